"""Start-up code seen during load: a worker importing its application (importlib, reading and
compiling source) or building classes (dataclasses' generated methods) is starting, not serving.
Samples of such stacks are set apart from the load's states, sites, endpoints and event-loop lag,
and reported as start-up."""

from __future__ import annotations

from typing import Optional

# (last component of the function's name or "", a fragment of its file): frames that only run while
# code is being imported or classes are being made.
STARTUP_FRAMES = (
    ("", "importlib/_bootstrap"),  # _bootstrap.py and _bootstrap_external.py, source or frozen
    ("", "<frozen importlib._bootstrap"),
    ("import_module", "importlib/__init__.py"),
    ("_compile_bytecode", ""),
    ("source_to_code", ""),
    ("get_data", "<frozen importlib"),
    ("_process_class", "dataclasses.py"),  # a @dataclass being made
    ("__create_fn__", ""),  # the generated __init__/__repr__ ... being compiled
)


def _last(function: str) -> str:
    return function.rsplit(".", 1)[-1]


def is_startup_frame(frame: tuple) -> bool:
    function, file = _last(frame[0]), frame[1]
    return any((not name or function == name) and (not fragment or fragment in file) for name, fragment in STARTUP_FRAMES)


def startup_frame(stack: list) -> Optional[tuple]:
    """The outermost start-up frame of a stack (innermost first), e.g. `_load_unlocked`, or None."""
    for frame in reversed(stack):
        if is_startup_frame(frame):
            return frame
    return None


def startup_label(stack: list) -> Optional[str]:
    """Where start-up work was seen, as a person reads it: the innermost start-up frame
    (`FileLoader.get_data`, `_compile_bytecode`) and the application frame that started it."""
    inner = next((f for f in stack if is_startup_frame(f)), None)
    if inner is None:
        return None
    return f"{inner[0]} (importlib)" if "importlib" in inner[1] else f"{inner[0]} ({inner[1].rsplit('/', 1)[-1]})"
