"""Native (C) stacks merged with Python stacks (`gilty dump --native`), on every interpreter, against
a C extension built here whose call chain is known: outer -> middle -> inner_spin, which either
releases the GIL or holds it while it spins (tests/targets/native_chain/)."""

from __future__ import annotations

import os

import pytest
from conftest import line_of, parse_json, run_gilty, running_target, thread_named
from native_ext import build_native_chain, c_line_of

pytestmark = [pytest.mark.interpreter, pytest.mark.alone]

SCRIPT = "native_chain.py"
DUMPS = 20
CHAIN = ["inner_spin", "middle", "outer"]


@pytest.fixture(scope="module")
def ext_dir(interp, tmp_path_factory):
    return build_native_chain(interp.path, tmp_path_factory.mktemp(f"native-{interp.id}"))


def native_dumps(pid: int, count: int) -> list:
    """`count` dumps with native stacks through the extension module; skips when perf is not permitted."""
    from gilty import _native

    target = _native.Target(pid)
    out = []
    for _ in range(count):
        try:
            out.append(target.dump(native=True))
        except _native.GiltyError as e:
            if "not permitted" in str(e):
                pytest.skip(str(e))
            raise
    return out


def spinner(snapshot: dict) -> dict:
    found = [t for t in snapshot["threads"] if t["name"] == "spinner"]
    assert len(found) == 1, snapshot["threads"]
    return found[0]


def ends_in_chain(thread: dict, call_line: int) -> bool:
    stack = thread.get("native_stack")
    # caught deeper in C (libc under the chain), the fourth frame is a C one: ("c", function, library,
    # offset, file, line), not the Python caller
    if not stack or len(stack) < 4 or stack[3][0] != "py":
        return False
    names = [f[1] for f in stack[:3]]
    kind, function, file, line = stack[3]
    return (
        names == CHAIN
        and all(f[0] == "c" for f in stack[:3])
        and kind == "py"
        and function == "spin"
        and os.path.basename(file) == SCRIPT
        and line == call_line
    )


@pytest.mark.parametrize("mode", ["release", "hold"])
def test_c_chain_under_calling_line(interp, ext_dir, mode):
    call_line = line_of(SCRIPT, "call")
    with running_target(interp, SCRIPT, str(ext_dir), mode) as proc:
        dumps = native_dumps(proc.pid, DUMPS)
    threads = [spinner(d) for d in dumps]
    good = sum(ends_in_chain(t, call_line) for t in threads)
    shown = [t.get("native_stack", t.get("native_error"))[:5] for t in threads if not ends_in_chain(t, call_line)][:3]
    assert good >= 0.95 * DUMPS, f"{good}/{DUMPS} dumps end in inner_spin <- middle <- outer <- spin:{call_line}; others: {shown}"
    # The library is the extension just built, with offsets inside it.
    top = next(t for t in threads if ends_in_chain(t, call_line))["native_stack"][0]
    assert os.path.basename(top[2]).startswith("native_chain") and top[3] > 0
    # Built with -g: each C frame has its source line. inner_spin's is the spin loop's (a sample may
    # land on its entry or exit, rarely), middle's the line calling inner_spin (its return address).
    chains = [t["native_stack"] for t in threads if ends_in_chain(t, call_line)]
    spin_line, inner_call = c_line_of("spin"), c_line_of("inner")
    assert all(os.path.basename(s[0][4] or "") == "native_chain.c" for s in chains), [s[0] for s in chains]
    at_loop = sum(s[0][5] == spin_line for s in chains)
    assert at_loop >= 0.9 * len(chains), (
        f"inner_spin at line {spin_line} in {at_loop} of {len(chains)}: {[s[0][5] for s in chains]}"
    )
    assert all(s[1][5] == inner_call for s in chains), [s[1] for s in chains]
    if mode == "hold":
        # Holding the GIL in C: holding_gil, or cpu_wait when the busy machine preempted the holder.
        states = [t["state"] for t in threads if ends_in_chain(t, call_line)]
        assert sum(s in (0, 6) for s in states) >= 0.95 * good and 0 in states, f"states {states}"
    else:
        # Without the GIL: native, or cpu_wait when the busy machine leaves it runnable without a CPU.
        native = sum(t["state"] in (3, 6) for t in threads if ends_in_chain(t, call_line))
        assert native >= 0.95 * good, f"native or cpu_wait (no GIL) in {native} of {good} dumps"
    # Never a merged stack that contradicts the Python stack. The two are read moments apart (the
    # native one first) and the spinner passes through `started.set()` between calls, so the frames
    # from `spin` outwards are compared: the same functions in the same files.
    for t in threads:
        if "native_stack" in t:
            merged = [tuple(f[1:3]) for f in t["native_stack"] if f[0] == "py"]
            python = [tuple(f[:2]) for f in t["stack"]]
            at_merged = next(i for i, f in enumerate(merged) if f[0] == "spin")
            at_python = next(i for i, f in enumerate(python) if f[0] == "spin")
            assert merged[at_merged:] == python[at_python:], (merged, python)


def test_blocked_main_thread(interp, ext_dir):
    """The main thread sleeps in a system call: its native stack comes from /proc, when the thread did
    not run while it was read; it ends in the sleeping Python line."""
    sleep_line = line_of(SCRIPT, "sleep")
    with running_target(interp, SCRIPT, str(ext_dir), "release") as proc:
        dumps = native_dumps(proc.pid, 5)
    mains = [next(t for t in d["threads"] if t["name"] == "MainThread") for d in dumps]
    merged = [t["native_stack"] for t in mains if "native_stack" in t]
    assert merged, [t.get("native_error") for t in mains]
    for stack in merged:
        assert stack[0][0] == "c", stack  # the system call's wrapper, innermost
        assert stack[-1][0] == "py" and stack[-1][1] == "<module>" and stack[-1][3] == sleep_line, stack
    if interp.id.startswith("debian"):
        # Debian's stripped python3.11: its own local functions have no names, only file+offset.
        unnamed = [f for s in merged for f in s if f[0] == "c" and f[1] is None and f[2] == interp.path]
        assert unnamed, merged
        # ... and no line tables: its frames have no source line, and nothing failed for it.
        own = [f for s in merged for f in s if f[0] == "c" and f[2] == interp.path]
        assert own and all(f[4] is None and f[5] is None for f in own), own


def test_cli_text_and_json(interp, ext_dir):
    if interp.id != "3.12.1":
        pytest.skip("output layout is version-independent: checked on pyenv 3.12 only (suite time)")
    call_line = line_of(SCRIPT, "call")
    with running_target(interp, SCRIPT, str(ext_dir), "hold") as proc:
        rc, out, err = run_gilty("dump", "--pid", proc.pid, "--native", timeout=60)
        assert rc == 0 and "Traceback" not in err, err
        if "not permitted" in err:
            pytest.skip(err.strip())
        block = out.split("'spinner'")[1]
        lines = [ln.strip() for ln in block.splitlines()[1:5]]
        assert [ln.split(" ")[0] for ln in lines[:3]] == CHAIN, block
        # The source file and line, as Python frames show theirs (the build keeps line tables).
        assert lines[0].split(" ")[1].startswith("(/") and "native_chain.c:" in lines[0], lines[0]
        assert lines[1].endswith(f"native_chain.c:{c_line_of('inner')})"), lines[1]
        assert lines[3].startswith("spin (") and lines[3].endswith(f"{SCRIPT}:{call_line})"), block
        rc, out, err = run_gilty("dump", "--pid", proc.pid, "--native", "--format", "json", timeout=60)
        assert rc == 0, err
    report = parse_json(out)
    spin = thread_named(report, "spinner")
    frames = spin["native_stack"]
    assert [f["kind"] for f in frames[:4]] == ["native"] * 3 + ["python"]
    assert [f["function"] for f in frames[:3]] == CHAIN
    assert frames[0]["library"].endswith(".so") and frames[0]["offset"] > 0 and frames[0]["label"] == "inner_spin"
    assert frames[3]["line"] == call_line
    assert frames[0]["file"].endswith("/native_chain.c") and isinstance(frames[0]["line"], int), frames[0]
    assert (frames[1]["file"], frames[1]["line"]) == (frames[0]["file"], c_line_of("inner")), frames[1]
    assert report["errors"]["native_missing"] == sum("native_error" in t for t in report["threads"])


def dump_json_native(pid: int) -> dict:
    rc, out, err = run_gilty("dump", "--pid", pid, "--native", "--format", "json", timeout=60)
    if rc != 0 and "not permitted" in err:
        pytest.skip(err.strip())
    assert rc == 0 and "Traceback" not in err, f"gilty dump --native exited {rc}:\n{err}"
    return parse_json(out)


def check_accounted(report: dict) -> None:
    """Every thread has a merged stack or says why not, and the errors count the ones that say why."""
    for t in report["threads"]:
        if t["stack"]:
            assert "native_stack" in t or "native_error" in t, t
    assert report["errors"]["native_missing"] == sum("native_error" in t for t in report["threads"])


@pytest.mark.parametrize("hazard", ["dlclose", "threads", "anon"])
def test_hazards_never_crash(interp, ext_dir, hazard):
    """A library unloaded during the dump, threads that exit mid-sample, code in an anonymous
    executable mapping: the dump completes, unreachable frames are [unknown], and they are counted."""
    if interp.id != "3.12.1":
        pytest.skip("kernel and loader behaviour, checked on pyenv 3.12 only (suite time)")
    with running_target(interp, "native_hazards.py", str(ext_dir), hazard) as proc:
        reports = [dump_json_native(proc.pid) for _ in range(4)]
        assert proc.alive(), "the target died"
    for report in reports:
        check_accounted(report)
    if hazard == "anon":
        anon_line = line_of("native_hazards.py", "anon")
        for report in reports:
            t = thread_named(report, "anon")
            assert "native_error" in t, t
            if "native_stack" in t:
                frames = t["native_stack"]
                unknown = [i for i, f in enumerate(frames) if f["kind"] == "native" and f["label"] == "[unknown]"]
                assert unknown, frames
                below = [f for f in frames[unknown[-1] + 1 :] if f["kind"] == "python"]
                assert below and below[0]["function"] == "anon" and below[0]["line"] == anon_line, frames


def test_numpy_fft_names_pocketfft(interp):
    """NumPy (from the registry, pinned in requirements-dev.txt): the FFT thread's C frames name
    pocketfft's functions, under NumPy's Python line that calls them."""
    if interp.id != "3.12.1":
        pytest.skip("NumPy's frames are version-independent: checked on pyenv 3.12 only (suite time)")
    from package_venvs import venv_python
    from test_numpy_states import _numpy_pin

    python = venv_python(interp, "numpy", (_numpy_pin(interp),), "import numpy")
    with running_target(python, "starved.py", "-", "fft") as proc:
        reports = [dump_json_native(proc.pid) for _ in range(10)]
    named = 0
    for report in reports:
        check_accounted(report)
        frames = thread_named(report, "fft").get("native_stack") or []
        libs = [i for i, f in enumerate(frames) if f["kind"] == "native" and "pocketfft" in os.path.basename(f["library"] or "")]
        if not libs:
            continue
        assert all(frames[i]["function"] for i in libs), frames
        caller = next(f for f in frames[libs[-1] :] if f["kind"] == "python")
        assert "numpy" in caller["file"] and "fft" in caller["file"], frames
        named += 1
    assert named >= 3, f"pocketfft frames in {named} of 10 dumps"


def test_pool_threads_without_python_stack_get_their_c_stack(interp):
    """`dump --native` of a NumPy worker (issue 31, item 7): OpenBLAS's pool threads have no Python
    stack and no Python thread state; their C stack is all they have, and the dump shows it (they
    read "the thread was not there when the native stacks were read")."""
    if interp.id != "3.12.1":
        pytest.skip("the unwinder is version-independent: checked on pyenv 3.12 only (suite time)")
    from package_venvs import venv_python
    from test_numpy_states import _numpy_pin

    python = venv_python(interp, "numpy", (_numpy_pin(interp),), "import numpy")
    with running_target(python, "numpy_workers.py") as server:
        worker = int(open(f"/proc/{server.pid}/task/{server.pid}/children").read().split()[0])
        rc, out, err = run_gilty("dump", "--pid", worker, "--native", "--format", "json", timeout=60)
    if rc != 0 and "not permitted" in err:
        pytest.skip(err.strip().splitlines()[-1])
    assert rc == 0 and "Traceback" not in err, err
    bare = [t for t in parse_json(out)["threads"] if not t["stack"]]
    assert bare, out
    for t in bare:
        assert "native_error" not in t, t
        frames = t["native_stack"]
        assert frames and all(f["kind"] == "native" for f in frames), t
        assert any("openblas" in (f["library"] or "").lower() for f in frames), frames
    # The worker's own thread in dgemm reaches its Python frames: a 32 KiB stack copy stopped after
    # ufunc_generic_fastcall, short of them.
    main = next(t for t in parse_json(out)["threads"] if t["stack"])
    assert "native_error" not in main and main["native_stack"][-1]["kind"] == "python", main


def test_a_thread_without_a_python_thread_state_is_marked_native(interp):
    """From 3.14 CPython names OS threads after their Python threads, and the BLAS pool thread NumPy
    starts from the "fft" thread inherits the name: the dump showed two threads called "fft". The
    one without a Python thread state is marked."""
    if interp.id != "3.14.10":
        pytest.skip("OS thread names are inherited from Python threads from 3.14: checked on 3.14 only (suite time)")
    from package_venvs import venv_python
    from test_numpy_states import _numpy_pin

    python = venv_python(interp, "numpy", (_numpy_pin(interp),), "import numpy")
    with running_target(python, "starved.py", "-", "fft") as proc:
        rc, out, err = run_gilty("dump", "--pid", proc.pid, "--format", "json")
    assert rc == 0, err
    threads = parse_json(out)["threads"]
    names = [t["name"] for t in threads]
    assert names.count("fft") == 1 and thread_named(parse_json(out), "fft")["stack"], names
    native = [t for t in threads if t["name"].endswith(" (native thread)")]
    assert native and all(not t["stack"] for t in native), names
    assert "fft (native thread)" in names, names
