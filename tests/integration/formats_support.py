"""What the format tests share: one interpreter to record with, and speedscope's schema."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Optional

import pytest
from conftest import AVAILABLE

# The formats do not depend on the interpreter; one is enough (the sampler is tested on all).
PREFERRED_MINOR = "3.12"
# speedscope's published file-format schema ships in its npm package at this path.
SPEEDSCOPE_PACKAGE = "speedscope@1.25.0"
SPEEDSCOPE_SCHEMA_PATH = "package/dist/release/file-format-schema.json"


def recording_interpreter():
    found = next((i for i in AVAILABLE if i.minor_str == PREFERRED_MINOR and i.id != "debian-3.11"), None)
    if found is None:
        pytest.skip(f"pyenv Python {PREFERRED_MINOR} not installed (the format tests record with it)")
    return found


def npm_pack(npm: str, package: str, cache_dir: Path) -> Path:
    """``package``'s tarball, fetched by `npm pack` into ``cache_dir``; raises what npm's failure raises."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "pack", package, "--silent"], cwd=cache_dir, capture_output=True, text=True, timeout=120, check=True
    )
    return cache_dir / done.stdout.strip().splitlines()[-1]


def speedscope_schema(cache_dir: Path) -> Optional[dict]:
    """speedscope's file-format schema, unpacked from its npm package into ``cache_dir`` once.

    Nothing is committed: the package is fetched with npm the first time. Skips when npm is
    missing or the registry does not answer.
    """
    schema = cache_dir / "speedscope-file-format-schema.json"
    if not schema.exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm not installed: cannot get speedscope's schema (structural checks still run in tests/unit)")
        try:
            with tarfile.open(npm_pack(npm, SPEEDSCOPE_PACKAGE, cache_dir)) as tar:
                member = tar.extractfile(SPEEDSCOPE_SCHEMA_PATH)
                schema.write_bytes(member.read())
        except (OSError, subprocess.SubprocessError, KeyError, IndexError) as e:
            pytest.skip(f"cannot get {SPEEDSCOPE_PACKAGE} from the npm registry ({e})")
    return json.loads(schema.read_text())


# The Firefox Profiler's command-line client: its npm package carries the viewer's own importer
# (profile processing and upgrading), bundled into one script that runs on node.
PROFILER_CLI_PACKAGE = "@firefox-devtools/profiler-cli@0.10.0"
PROFILER_CLI_SCRIPT = "package/dist/profiler-cli.js"


def profiler_cli(cache_dir: Path) -> Path:
    """The Firefox Profiler CLI's script, unpacked from its npm package into ``cache_dir`` once.

    Nothing is committed: the package is fetched with npm the first time. Skips when node or npm is
    missing or the registry does not answer.
    """
    script = cache_dir / PROFILER_CLI_SCRIPT
    if script.exists():
        return script
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("node/npm not installed: cannot run the Firefox Profiler's importer (tests/unit check the tables)")
    try:
        with tarfile.open(npm_pack(npm, PROFILER_CLI_PACKAGE, cache_dir)) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith("package/dist/")]
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(cache_dir, members=members, **safe)
    except (OSError, subprocess.SubprocessError, tarfile.TarError, IndexError) as e:
        pytest.skip(f"cannot get {PROFILER_CLI_PACKAGE} from the npm registry ({e})")
    if not script.exists():
        pytest.skip(f"{PROFILER_CLI_PACKAGE} has no {PROFILER_CLI_SCRIPT}")
    return script
