"""The wheel users install: built once as `pip install .` builds it (through the PEP 517 backend; the
`release` profile stripped, which `make setup` has compiled already, instead of `dist`), installed
into a fresh venv of every interpreter present, then used against a target of another version.

Guards: the extension must be small (no debug info), abi3 (one wheel for every host Python 3.10+),
manylinux-compatible (auditwheel), the build leaves nothing in the source tree, and the host's Python
version must not tie gilty to targets of the same version. `gilty.memory.prefork` runs inside applications
and must work where the native extension is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import INTERPRETERS, running_target
from wheel_env import MANYLINUX, build_products_left, venv_with_wheel, wheel, zig_available  # noqa: F401 - wheel is a fixture

pytestmark = [pytest.mark.interpreter, pytest.mark.alone]

MAX_EXTENSION_BYTES = 5 * 1024 * 1024


def test_wheel_is_small_and_abi3(wheel):
    assert "-abi3-" in wheel.name, wheel.name
    with zipfile.ZipFile(wheel) as z:
        natives = [i for i in z.infolist() if i.filename.startswith("gilty/_native") and i.filename.endswith(".so")]
        names = set(z.namelist())
    assert len(natives) == 1 and natives[0].filename == "gilty/_native.abi3.so", [i.filename for i in natives]
    assert natives[0].file_size <= MAX_EXTENSION_BYTES, f"extension is {natives[0].file_size} bytes"
    assert "gilty/memory/prefork/__init__.py" in names and "gilty/py.typed" in names


def test_auditwheel_accepts_the_tag(wheel):
    auditwheel = shutil.which("auditwheel", path=os.path.dirname(sys.executable))
    if auditwheel is None:
        pytest.skip("auditwheel is not installed (requirements-dev.txt lists it)")
    done = subprocess.run([auditwheel, "show", str(wheel)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # Without zig a PEP 517 build is tagged plain `linux` (maturin leaves tagging to the publisher) and
    # links against the host's glibc; with it, the wheel is the one `make wheel` publishes.
    text = " ".join(done.stdout.split())
    assert re.search(r'consistent with the following platform tag: "manylinux_2_\d+_x86_64"', text), done.stdout


def test_wheel_runs_on_glibc_2_17_hosts(wheel):
    if not zig_available():
        pytest.skip("ziglang is not installed (requirements-dev.txt): the wheel links against this host's glibc")
    auditwheel = shutil.which("auditwheel", path=os.path.dirname(sys.executable))
    if auditwheel is None:
        pytest.skip("auditwheel is not installed (requirements-dev.txt lists it)")
    assert f"{MANYLINUX}_x86_64" in wheel.name, wheel.name
    done = subprocess.run([auditwheel, "show", str(wheel)], capture_output=True, text=True, timeout=120)
    # auditwheel reads the glibc symbol versions the extension needs: none newer than 2.17.
    assert f'consistent with the following platform tag: "{MANYLINUX}_x86_64"' in " ".join(done.stdout.split()), done.stdout


def test_pip_install_from_a_checkout_leaves_no_build_products(wheel):
    assert build_products_left() == []


@pytest.fixture(scope="module")
def installed(interp) -> Path:
    return venv_with_wheel(interp)


def _other_interpreter(interp):
    """A target interpreter of another minor version than the host, when one is present: the next
    newer minor, the newest host taking the oldest, so that across the hosts every version present
    is attached to by an installed wheel once (3.14/3.15 included), at one dump per host."""
    minors = sorted({i.version[:2] for i in INTERPRETERS if i.path})
    others = [m for m in minors if m != interp.version[:2]]
    if not others:
        return None
    wanted = next((m for m in others if m > interp.version[:2]), others[0])
    return min((i for i in INTERPRETERS if i.path and i.version[:2] == wanted), key=lambda i: i.id.startswith("debian"))


def test_installed_wheel_attaches_to_another_version(interp, installed):
    target_interp = _other_interpreter(interp)
    if target_interp is None:
        pytest.skip("no interpreter of another version present")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    with running_target(target_interp, "known_stack.py") as proc:
        done = subprocess.run(
            [str(installed / "bin" / "gilty"), "dump", "--pid", str(proc.pid), "--format", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
    assert done.returncode == 0, done.stderr
    assert f'"python_version": "{target_interp.version_str}' in done.stdout.replace("'", '"') or (
        target_interp.version_str in done.stdout
    ), done.stdout[:500]
    assert "Traceback" not in done.stderr


def test_prefork_works_without_the_extension(interp, installed):
    # sys.modules[name] = None makes every import of the extension fail, as if it were not installed.
    code = (
        "import sys\n"
        "sys.modules['gilty._native'] = None\n"
        "import gc, gilty.memory.prefork as p, gilty.memory.prefork.gunicorn\n"
        "p.master_start(); p.before_fork(); p.after_fork_in_child()\n"
        "assert gc.get_freeze_count() > 0 and gc.isenabled()\n"
        "try:\n"
        "    import gilty._native\n"
        "except ImportError:\n"
        "    print('no extension; prefork ok')\n"
    )
    done = subprocess.run([str(installed / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "no extension; prefork ok" in done.stdout
