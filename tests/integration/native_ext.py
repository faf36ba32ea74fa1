"""Builds the test C extension (tests/targets/native_chain/native_chain.c) for one interpreter with gcc
and that interpreter's own headers; skips, saying why, when gcc or the headers are missing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import TARGETS

SOURCE = TARGETS / "native_chain" / "native_chain.c"


def _toolchain(interpreter: str) -> tuple:
    """(gcc, the interpreter's include directory, its EXT_SUFFIX); skips without gcc or Python.h."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed (apt-get install gcc)")
    probe = subprocess.run(
        [
            interpreter,
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['include']); print(sysconfig.get_config_var('EXT_SUFFIX'))",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    include, suffix = probe.stdout.split()
    if not (Path(include) / "Python.h").exists():
        pytest.skip(
            f"no Python.h in {include} for {interpreter} (Debian: apt-get install python3-dev; see the Makefile's system-deps)"
        )
    return gcc, include, suffix


def build_native_chain(interpreter: str, out_dir: Path) -> Path:
    """The directory holding `native_chain<EXT_SUFFIX>` built for `interpreter`."""
    gcc, include, suffix = _toolchain(interpreter)
    out_dir.mkdir(parents=True, exist_ok=True)
    # The include dir's parent too: Debian's pyconfig.h includes <x86_64-linux-gnu/python3.X/pyconfig.h>
    # from there (sid's 3.14/3.15 live in a private root, not on gcc's default path).
    target = out_dir / f"native_chain{suffix}"
    # No inlining and no sibling calls: outer -> middle -> inner_spin keep a frame each, as -g keeps lines.
    cmd = [
        gcc,
        "-shared",
        "-fPIC",
        "-O1",
        "-g",
        "-fno-inline",
        "-fno-optimize-sibling-calls",
        f"-I{include}",
        f"-I{Path(include).parent}",
        str(SOURCE),
        "-o",
        str(target),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stderr}"
    return out_dir


def c_line_of(marker: str) -> int:
    """Line number of the ``/* LINE:<marker> */`` comment in the extension's C source."""
    tag = f"/* LINE:{marker} */"
    for number, text in enumerate(SOURCE.read_text(encoding="utf-8").splitlines(), 1):
        if text.rstrip().endswith(tag):
            return number
    raise AssertionError(f"no {tag} in {SOURCE}")


def build_module(interpreter: str, source: Path, out_dir: Path, name: str, defines: tuple = ()) -> Path:
    """``source`` built for ``interpreter`` as the extension module ``name`` (``-DMODNAME=name`` and
    ``defines``), in ``out_dir``; skips as ``build_native_chain`` does."""
    gcc, include, suffix = _toolchain(interpreter)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{name}{suffix}"
    cmd = [gcc, "-shared", "-fPIC", "-O0", f"-I{include}", f"-I{Path(include).parent}", f"-DMODNAME={name}"]
    cmd += [f"-D{d}" for d in defines] + [str(source), "-o", str(target)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stderr}"
    return target
