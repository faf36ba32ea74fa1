"""Native (C) frames in recordings (`gilty record --native`), on every interpreter, against the C
extension built here whose call chain is known: outer -> middle -> inner_spin, which releases the GIL
or holds it while it spins (tests/targets/native_chain/). The recording's own samples are checked:
each sample of the spinning thread that has a native part must end in the C chain under the Python
line that calls it, and most of its samples must have one."""

from __future__ import annotations

import json
import os

import pytest
from conftest import line_of, run_gilty, running_target
from native_ext import build_native_chain, c_line_of
from test_perf_refused import _one_line_refusal as one_line_refusal
from test_perf_refused import _refused as refused
from timing_reference import Pressure, assert_unless_busy

pytestmark = pytest.mark.interpreter

SCRIPT = "native_chain.py"
CHAIN = ["inner_spin", "middle", "outer"]
DURATION_S = 2.0
RATE_HZ = 200
# States: 0 holding_gil, 3 native, 4 idle, 6 cpu_wait (gilty.sampling.thread_states).
HOLDING_GIL, NATIVE, IDLE, CPU_WAIT = 0, 3, 4, 6


@pytest.fixture(scope="module")
def ext_dir(interp, tmp_path_factory):
    return build_native_chain(interp.path, tmp_path_factory.mktemp(f"record-native-{interp.id}"))


def record_native(pid: int, out: str, duration: float = DURATION_S, rate: int = RATE_HZ) -> dict:
    """`gilty record --native` into the JSON report `out`; skips when perf events are not permitted."""
    rc, _, err = run_gilty("record", "--pid", pid, "--native", "--duration", duration, "--rate", rate, "-o", out, timeout=60)
    if rc != 0 and "not permitted" in err:
        pytest.skip(err.strip().splitlines()[-1])
    assert rc == 0 and "Traceback" not in err, f"gilty record --native exited {rc}:\n{err}"
    with open(out, encoding="utf-8") as f:
        return json.load(f)


def process(report: dict) -> dict:
    procs = report["recording"]["processes"]
    assert len(procs) == 1
    return procs[0]


def samples_of(proc: dict, name: str) -> list:
    """[(state, [(function, file, line) innermost first], samples)] of the thread called `name`."""
    tids = [int(t) for t, n in proc["thread_names"].items() if n == name]
    assert len(tids) == 1, proc["thread_names"]
    frames = {int(k): tuple(v) for k, v in proc["frames"].items()}
    stacks = {int(k): [frames[f] for f in v] for k, v in proc["stacks"].items()}
    return [(state, stacks.get(stack_id, []), n) for tid, state, stack_id, n in proc["counts"] if tid == tids[0]]


def is_native(frame: tuple) -> bool:
    return frame[2] <= -2


def chain_under_line(stack: list, call_line: int) -> bool:
    if len(stack) < 4 or not all(is_native(f) for f in stack[:3]):
        return False
    function, file, line = stack[3]
    return [f[0] for f in stack[:3]] == CHAIN and function == "spin" and os.path.basename(file) == SCRIPT and line == call_line


@pytest.mark.alone  # the share of samples with a native part falls while the spinner waits for a CPU
@pytest.mark.parametrize("mode", ["release", "hold"])
def test_c_chain_under_calling_line(interp, ext_dir, mode, tmp_path):
    call_line = line_of(SCRIPT, "call")
    sleep_line = line_of(SCRIPT, "sleep")
    with running_target(interp, SCRIPT, str(ext_dir), mode) as proc:
        report = record_native(proc.pid, str(tmp_path / "r.json"))
    p = process(report)
    spinner = samples_of(p, "spinner")
    total = sum(n for _, _, n in spinner)
    with_native = [(s, st, n) for s, st, n in spinner if any(is_native(f) for f in st)]
    have = sum(n for _, _, n in with_native)
    good = sum(n for _, st, n in with_native if chain_under_line(st, call_line))
    share = have / total
    print(f"{interp.id} {mode}: {have} of {total} spinner samples ({share:.0%}) have a native part; {good} end in the chain")
    bad = [st[:5] for _, st, _ in with_native if not chain_under_line(st, call_line)][:3]
    assert good >= 0.95 * have, (
        f"{good}/{have} native samples end in inner_spin <- middle <- outer <- spin:{call_line}; others: {bad}"
    )
    # The spinner is in C nearly all the time; a sample keeps its Python stack alone when no kernel
    # sample fell between two equal reads (the thread waited for a CPU, or passed between calls).
    assert share >= 0.3, f"only {share:.0%} of the spinner's samples have a native part"
    errors = report["errors"]
    # Every sample with a Python stack was either joined (some with no C frame left after the merge:
    # the thread was in Python code) or counted as missing.
    with_python = sum(n for _, st, n in spinner if st)
    assert errors["native_matched"] >= have and errors["native_matched"] + errors["native_missing"] >= with_python
    # The library offset is kept: the C frames are function starts inside the extension.
    top = next(st for _, st, _ in with_native if chain_under_line(st, call_line))[0]
    assert top[1].startswith("native_chain") and -2 - top[2] > 0
    states = [s for s, st, n in with_native if chain_under_line(st, call_line) for _ in range(n)]
    if mode == "hold":
        assert sum(s in (HOLDING_GIL, CPU_WAIT) for s in states) >= 0.95 * len(states) and HOLDING_GIL in states, states
    else:
        assert sum(s in (NATIVE, CPU_WAIT) for s in states) >= 0.95 * len(states), states
    if mode == "release":
        # The main thread sleeps in a system call: its native part comes from /proc and ends in the
        # sleeping line, the system call's C frames innermost.
        main = [(s, st, n) for s, st, n in samples_of(p, "MainThread") if s == IDLE and any(is_native(f) for f in st)]
        assert main, samples_of(p, "MainThread")[:3]
        for _, st, _ in main:
            assert is_native(st[0]), st
            assert not is_native(st[-1]) and st[-1][0] == "<module>" and st[-1][2] == sleep_line, st
        if interp.id.startswith("debian"):
            # Debian's stripped python3.11: its own local functions are `python3.11+0x...`.
            unnamed = {f[0] for _, st, _ in main for f in st if is_native(f) and f[0].startswith("python3.11+0x")}
            print(f"debian: unnamed interpreter frames {sorted(unnamed)[:3]}")


@pytest.mark.alone  # the share of samples with a native part falls while the spinner waits for a CPU
def test_chain_at_1000_hz(interp, ext_dir, tmp_path):
    """At 1000 Hz the kernel samples a running thread at most 500 times per CPU-second (each sample
    costs the target an interrupt): passes between take the run's last sample, so the spinner still
    has its C chain in most samples, and never a wrong one."""
    if interp.id != "3.12.1":
        pytest.skip("the sampling period's floor is version-independent: checked on pyenv 3.12 only (suite time)")
    call_line = line_of(SCRIPT, "call")
    with running_target(interp, SCRIPT, str(ext_dir), "hold") as proc:
        pressure = Pressure()
        report = record_native(proc.pid, str(tmp_path / "r.json"), rate=1000)
    spinner = samples_of(process(report), "spinner")
    total = sum(n for _, _, n in spinner)
    have = sum(n for _, st, n in spinner if any(is_native(f) for f in st))
    good = sum(n for _, st, n in spinner if chain_under_line(st, call_line))
    print(f"1000 Hz: {have} of {total} spinner samples ({have / total:.0%}) have a native part; {good} end in the chain")
    assert good >= 0.95 * have, f"{good}/{have} native samples end in the chain"
    # The kernel samples the spinner only while it has a CPU: beside eight hogs, 554 of 1,940 (28.6 %).
    assert_unless_busy(have >= 0.3 * total, pressure, f"only {have} of {total} samples have a native part")


def test_every_output_shows_the_chain(interp, ext_dir, tmp_path):
    if interp.id != "3.12.1":
        pytest.skip("output layout is version-independent: checked on pyenv 3.12 only (suite time)")
    call_line = line_of(SCRIPT, "call")
    saved = str(tmp_path / "r.json")
    with running_target(interp, SCRIPT, str(ext_dir), "hold") as proc:
        report = record_native(proc.pid, saved)
    spin = next(t for t in report["threads"] if t["name"] == "spinner")
    top = [f for f in spin["top_functions"] if f.get("native")]
    assert top and top[0]["function"] == "inner_spin" and top[0]["line"] is None and top[0]["offset"] > 0, spin["top_functions"]
    assert top[0]["file"].startswith("native_chain")
    # Built with -g: the C function's samples are split by source line, the spin loop's the most.
    spin_line = c_line_of("spin")
    assert top[0]["source_file"].endswith("/native_chain.c") and top[0]["source_line"] == spin_line, top[0]
    outputs = {}
    for fmt in ("text", "collapsed", "svg", "speedscope", "chrome", "html", "pprof"):
        out = str(tmp_path / f"out.{fmt}")
        rc, _, err = run_gilty("report", saved, "--format", fmt, "-o", out, timeout=60)
        assert rc == 0 and "Traceback" not in err, f"{fmt}: {err}"
        with open(out, "rb") as f:
            outputs[fmt] = f.read()
    # The chain in order under its Python line, as collapsed stacks write it (outermost first), each C
    # frame with its source file (whole) and line.
    at_loop = f"/native_chain.c:{spin_line})"
    line = next(ln for ln in outputs["collapsed"].decode().splitlines() if "inner_spin" in ln and at_loop in ln)
    frames = line.rsplit(" ", 1)[0].split(";")
    names = [f.split(" ")[0] for f in frames[-4:]]
    assert names == ["spin", "outer", "middle", "inner_spin"] and frames[-4].endswith(f"{SCRIPT}:{call_line})"), line
    assert frames[-1].startswith("inner_spin (/") and frames[-1].endswith(at_loop), line
    assert frames[-2].endswith(f"/native_chain.c:{c_line_of('inner')})"), line
    assert "inner_spin (/" in outputs["text"].decode() and at_loop in outputs["text"].decode()
    short = f"inner_spin (native_chain.c:{spin_line})"  # pictures: the file's base name
    svg = outputs["svg"].decode()
    assert all(f"{name} (native_chain.c:" in svg for name in CHAIN) and short in svg, "the flame graph lacks the C chain"
    doc = json.loads(outputs["speedscope"])
    names = {f["name"] for f in doc["shared"]["frames"]}
    assert all(any(n.startswith(f"{c} (/") and "native_chain.c:" in n for n in names) for c in CHAIN), names
    assert not any(f.get("line", 0) < 0 for f in doc["shared"]["frames"])
    spun = [f for f in doc["shared"]["frames"] if f["name"].startswith("inner_spin (")]
    assert any(f["file"].endswith("/native_chain.c") and f["line"] == spin_line for f in spun), spun
    chrome = outputs["chrome"].decode()
    assert all(f"{name} (native_chain.c:" in chrome for name in CHAIN) and short in chrome
    events = json.loads(chrome)
    events = events["traceEvents"] if isinstance(events, dict) else events
    args = [e.get("args") for e in events if e.get("name") == short]
    assert args and all(
        a["file"].endswith("/native_chain.c")
        and a["line"] == spin_line
        and a["library"].startswith("native_chain")
        and a["offset"].startswith("0x")
        for a in args
    ), args[:3]
    html = outputs["html"].decode()
    assert '"inner_spin","native_chain' in html and "isNative" in html and f'/native_chain.c:{spin_line}"' in html
    gz = __import__("gzip").decompress(outputs["pprof"])
    assert b"inner_spin" in gz and b"native_chain.c" in gz


@pytest.mark.parametrize("hazard", ["dlclose", "threads", "anon"])
def test_hazards_never_crash(interp, ext_dir, hazard, tmp_path):
    """A library unloaded during the recording, threads that exit mid-recording, code in an anonymous
    executable mapping: the recording completes, the target lives, unreachable frames are [unknown]
    and counted (partial), unmatched samples counted (missing)."""
    if interp.id != "3.12.1":
        pytest.skip("kernel and loader behaviour, checked on pyenv 3.12 only (suite time)")
    with running_target(interp, "native_hazards.py", str(ext_dir), hazard) as proc:
        report = record_native(proc.pid, str(tmp_path / "r.json"), duration=1.5)
        assert proc.alive(), "the target died"
    errors = report["errors"]
    p = process(report)
    counted = sum(n for _, _, _, n in p["counts"])
    assert errors["native_matched"] + errors["native_missing"] <= counted
    if hazard == "anon":
        anon_line = line_of("native_hazards.py", "anon")
        anon = samples_of(p, "anon")
        cut = [st for _, st, _ in anon if any(f[0] == "[unknown]" for f in st)]
        assert cut and errors["native_partial"] > 0, anon[:3]
        for st in cut:
            below = [f for f in st[max(i for i, f in enumerate(st) if f[0] == "[unknown]") + 1 :] if not is_native(f)]
            assert below and below[0][0] == "anon" and below[0][2] == anon_line, st
    if hazard == "threads":
        # Main thread, spawner, and the short-lived threads seen come and go.
        tids = {tid for tid, _, _, _ in p["counts"]}
        assert len(tids) >= 4, f"threads seen: {p['thread_names']}"


def test_numpy_fft_names_pocketfft(interp, tmp_path):
    """NumPy (from the registry, pinned in requirements-dev.txt): the recording's C frames of the FFT
    thread name pocketfft's functions, under NumPy's Python line that calls them."""
    if interp.id != "3.12.1":
        pytest.skip("NumPy's frames are version-independent: checked on pyenv 3.12 only (suite time)")
    from gilty.sampling.native_frames import native_parts
    from package_venvs import venv_python
    from test_numpy_states import _numpy_pin

    python = venv_python(interp, "numpy", (_numpy_pin(interp),), "import numpy")
    with running_target(python, "starved.py", "-", "fft") as proc:
        report = record_native(proc.pid, str(tmp_path / "r.json"))
    fft = samples_of(process(report), "fft")
    total = sum(n for _, _, n in fft)
    named = 0
    for _, st, n in fft:
        libs = [i for i, f in enumerate(st) if is_native(f) and "pocketfft" in native_parts(f[1])[0]]
        if not libs:
            continue
        # Named functions (numpy's wheels keep their symbols), not library+0xOFFSET.
        assert all("+0x" not in st[i][0] for i in libs), st
        caller = next(f for f in st[libs[-1] :] if not is_native(f))
        assert "numpy" in caller[1] and "fft" in caller[1], st
        named += n
    print(f"pocketfft frames in {named} of {total} samples of the fft thread")
    assert named >= 0.1 * total and named >= 10, f"pocketfft frames in {named} of {total} samples"


def test_refused_perf_is_one_line(interp, targets, deny_perf):
    """Perf events refused (a seccomp filter makes perf_event_open fail with EACCES, as a container or
    a user without CAP_PERFMON would): one line saying what to change, no report, the target alive."""
    if interp.id != "3.12.1":
        pytest.skip("the refusal comes before any version-specific read: checked on pyenv 3.12 only (suite time)")
    target = targets(interp, "cpu_and_io_threads.py")
    done = refused(deny_perf, "record", "--native", "--pid", str(target.pid), "--duration", "1", "--format", "json")
    line = one_line_refusal(done)
    assert "perf events are not permitted" in line, line
    assert done.returncode == 6 and not done.stdout.strip(), (done.returncode, done.stdout)
    # Across a server (-s) the same: one line, before anything is recorded.
    done = refused(deny_perf, "record", "-s", "--native", "--pid", str(target.pid), "--duration", "1", "--format", "json")
    line = one_line_refusal(done)
    assert "perf events are not permitted" in line, line
    assert done.returncode == 6 and not done.stdout.strip(), (done.returncode, done.stdout)
    assert target.popen.poll() is None, "the target died"


def test_server_workers_and_their_blas_threads(interp, tmp_path):
    """`record -s --native` on a prefork server of NumPy workers (issue 31, item 7): it was refused
    ("--native samples one process"); now each worker's samples carry C frames, the OpenBLAS pool
    threads (no Python stack: their C stack is all they have) included, and the samples left without
    C frames are counted per reason, the reasons adding up to the missing ones."""
    if interp.id != "3.12.1":
        pytest.skip("the process set and the unwinder are version-independent: checked on pyenv 3.12 only (suite time)")
    from package_venvs import venv_python
    from test_numpy_states import _numpy_pin

    python = venv_python(interp, "numpy", (_numpy_pin(interp),), "import numpy")
    out = str(tmp_path / "r.json")
    with running_target(python, "numpy_workers.py") as server:
        rc, _, err = run_gilty(
            "record", "--pid", server.pid, "-s", "--native", "--duration", "2", "--rate", 100, "-o", out, timeout=60
        )
    if rc != 0 and "not permitted" in err:
        pytest.skip(err.strip().splitlines()[-1])
    assert rc == 0 and "Traceback" not in err, f"gilty record -s --native exited {rc}:\n{err}"
    with open(out, encoding="utf-8") as f:
        report = json.load(f)
    procs = report["recording"]["processes"]
    workers = [p for p in procs if p["target"]["pid"] != server.pid]
    assert len(workers) == 2, [p["target"]["pid"] for p in procs]
    matmul_line = line_of("numpy_workers.py", "matmul")
    for p in workers:
        frames = {int(k): tuple(v) for k, v in p["frames"].items()}
        stacks = {int(k): [frames[f] for f in v] for k, v in p["stacks"].items()}
        by_tid: dict = {}
        for tid, _, stack_id, n in p["counts"]:
            by_tid.setdefault(tid, []).append((stacks.get(stack_id, []), n))
        python_tids = [t for t, seen in by_tid.items() if any(not is_native(f) for st, _ in seen for f in st)]
        # The worker's own thread: C frames (OpenBLAS) under the matmul line.
        under = sum(
            n
            for t in python_tids
            for st, n in by_tid[t]
            if any(is_native(f) for f in st) and any(f[0] == "work" and f[2] == matmul_line for f in st)
        )
        assert under > 0, by_tid
        # OpenBLAS's pool threads: stacks of C frames only, in OpenBLAS's library.
        bare = {t: seen for t, seen in by_tid.items() if t not in python_tids}
        assert bare, f"no thread without a Python stack in pid {p['target']['pid']}: {p['thread_names']}"
        blas = sum(
            n
            for seen in bare.values()
            for st, n in seen
            if st and all(is_native(f) for f in st) and any("openblas" in f[1].lower() for f in st)
        )
        assert blas > 0, {t: seen[:2] for t, seen in bare.items()}
    errors = report["errors"]
    reasons = {k: v for k, v in errors.items() if k.startswith("native_missing_")}
    assert reasons, errors
    assert sum(reasons.values()) == errors["native_missing"], errors
    assert errors["native_bare"] > 0, errors
    # dgemm under a ufunc takes more than 32 KiB of stack below the Python frame: a 32 KiB copy cut
    # 518 of 822 samples short at [unknown]; the kernel's most, 64 KiB, reaches the Python frames.
    assert errors["native_partial"] <= 0.2 * errors["native_matched"], errors
    text = str(tmp_path / "r.txt")
    rc, _, err = run_gilty("report", out, "-o", text, timeout=60)
    assert rc == 0, err
    with open(text, encoding="utf-8") as f:
        lines = f.read().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("native stacks:"))
    # Wrapped to the report's width: the line and its indented continuation.
    line = " ".join([lines[at]] + [ln.strip() for ln in lines[at + 1 :] if ln.startswith("    ")][:3])
    assert "without" in line and all(f"{n} " in line for n in reasons.values()), line
