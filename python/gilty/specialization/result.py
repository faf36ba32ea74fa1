"""What `gilty specialization` hands to the report layer: a PEP 659 watch with its analysis
(``SpecializationResult``), or Python 3.10's opcache reading (``OpcacheResult``)."""

from __future__ import annotations

from dataclasses import dataclass

from gilty.specialization.analysis import Analysis
from gilty.specialization.session import SpecializationSession


@dataclass
class SpecializationResult:
    session: SpecializationSession
    analysis: Analysis
    top: int = 10  # sites, functions and families listed
    exited_early: bool = False  # a process exited before the requested duration: the result is partial


@dataclass
class OpcacheResult:
    doc: dict  # as the native reader returns it
    top: int = 10
