"""The development build `make setup` installs into .venv, and the cargo settings the tests' wheel
build shares with it.

Both are linked by zig against glibc 2.17, as the published wheel is, in one cargo target directory
with one profile: the editable install compiles every crate once, and the wheel the integration tests
build (tests/integration/wheel_env.py, through the PEP 517 backend) finds them all compiled and only
packages them. Without zig both fall back to the host's linker, still sharing one target directory.

    python tools/dev_build.py     # what `make setup` runs: the editable install into this Python's venv
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# The oldest glibc the wheel supports (RHEL 7+, Debian 9+, Amazon Linux 2): what `make wheel` targets.
MANYLINUX = "manylinux_2_17"

# `release` (not the published `dist` profile: LTO over one codegen unit costs minutes per change),
# stripped so the extension stays as small as the wheel users get.
PROFILE_ARGS = "--profile release --strip"


@functools.lru_cache(maxsize=None)
def zig_available(python: str = sys.executable) -> bool:
    """ziglang (requirements-dev.txt) is what lets maturin link against an older glibc than the host's."""
    done = subprocess.run([python, "-m", "ziglang", "version"], capture_output=True, text=True)
    return done.returncode == 0


def build_env(python: str = sys.executable) -> dict:
    """The environment under which pip builds gilty through the PEP 517 backend, for ``python``'s venv."""
    bin_dir = os.path.dirname(python)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}
    if zig_available(python):
        # Its own target directory: zig's linker is part of every crate's fingerprint, so sharing
        # target/ with the host-linked `cargo test` would make each rebuild the other's crates.
        env["CARGO_TARGET_DIR"] = str(REPO / "target" / "wheel-zig")
        env["MATURIN_PEP517_ARGS"] = f"{PROFILE_ARGS} --zig --compatibility {MANYLINUX}"
    else:
        env["CARGO_TARGET_DIR"] = str(REPO / "target")
        env["MATURIN_PEP517_ARGS"] = PROFILE_ARGS
    return env


def main() -> int:
    python = sys.executable
    done = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "-e", str(REPO)],
        env={**build_env(python), "VIRTUAL_ENV": str(Path(python).parents[1])},
    )
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
