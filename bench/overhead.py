"""How much does sampling slow the target down, and how fast can gilty sample? (`make bench`)

    .venv/bin/python bench/overhead.py [--python PATH ...] [--repeats 4] [--window 4] [--pin]
                                       [--samplers gilty,py-spy,py-spy-nb] [--rates 100,1000] [--nice N]
                                       [--threads 4] [--skip-overhead] [--skip-maxrate] [--json FILE]

1. Overhead. bench/targets/cpu4.py (--threads threads, default 4, spinning in pure Python) measures its own
   throughput (loop iterations per second, and per CPU-second of the target) over --window
   seconds, while one of these runs against it:
     none             no sampler (the baseline)
     gilty@R          bench/gilty_sampler.py: gilty._native.Sampler at R Hz, batches merged into
                      a Session every 0.25 s, as `gilty record` does
     py-spy@R         `py-spy record --rate R` in its default mode, which pauses the target
                      for every sample
     py-spy-nb@R      the same with --nonblocking (no pause; reads memory as it changes)
     gilty-batch@R    (only with --samplers ...,gilty-batch) gilty@R run under SCHED_BATCH
                      (`chrt --batch 0`), so its wake-ups do not preempt the target's threads
   for R in --rates (default 100 and 1000). The configurations are interleaved (each round
   runs every configuration once, in an order rotated from round to round) and each runs
   --repeats times. Reported: per configuration, the median and the range over rounds of
   (throughput / the same round's baseline throughput), the same for throughput per
   target CPU-second, the rate the sampler actually achieved, and the sampler's CPU use.

2. Maximum rate. bench/targets/mixed32.py (32 threads: 4 spinning, the rest sleeping 1-5 ms
   in a loop), sampled by gilty at increasing rates for --maxrate-seconds each. Reported:
   achieved passes/s, late (skipped) slots, CPU per pass and the sampler's CPU share. The
   highest sustainable rate is the highest requested rate achieved to within 5%.

With --pin the target runs on CPU 0 and the sampler on CPU 1 (taskset), so the sampler's
own CPU time does not compete with the target's.

Noise: every run also measures how much CPU other processes used meanwhile (from
/proc/stat, minus the target's and the sampler's own CPU time); ratios are taken over the
rounds where that stayed under --max-noise. On a shared machine, --nice -10 (targets and
samplers inherit it) makes the measurement much less sensitive to other processes without
changing how the target and the sampler compete with each other.

Each sampler is a separate process; every target is started with the interpreter under
test (default: the pyenv 3.12.1 build), gilty itself runs with the interpreter running
this script. Needs permission to read the target's memory (same user or root).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
CPU4 = os.path.join(HERE, "targets", "cpu4.py")
MIXED32 = os.path.join(HERE, "targets", "mixed32.py")
GILTY_SAMPLER = os.path.join(HERE, "gilty_sampler.py")
DEFAULT_PYTHON = "/root/.pyenv/versions/3.12.1/bin/python3"
SETTLE_S = 1.0  # between starting a sampler and starting the measurement window
SUSTAINED = 0.95  # achieved / requested at or above this counts as keeping up
MAXRATE_RATES = (100, 250, 500, 1000, 2000, 4000)
MIXED32_THREADS = 32  # Python threads in bench/targets/mixed32.py (py-spy --idle samples each per pass)


# -- processes --------------------------------------------------------------------------------


def taskset(cpu: Optional[int]) -> list:
    return ["taskset", "-c", str(cpu)] if cpu is not None else []


def read_line(proc: subprocess.Popen, stream, timeout_s: float) -> str:
    """One line from a child's pipe, or RuntimeError on timeout / EOF."""
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as sel:
        sel.register(stream, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"pid {proc.pid}: no output within {timeout_s:g} s")
            if sel.select(left):
                line = stream.readline()
                if not line:
                    raise RuntimeError(f"pid {proc.pid} closed its output (exit status {proc.wait()})")
                return line.strip()


def wait_rusage(proc: subprocess.Popen, timeout_s: float) -> tuple:
    """Reap ``proc`` with wait4: (exit status, user+sys CPU seconds). Kills it after the timeout.

    Never call ``proc.poll()``/``wait()`` first: they reap the child and lose its rusage.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, ru.ru_utime + ru.ru_stime
        if time.monotonic() > deadline:
            proc.send_signal(signal.SIGKILL)
            deadline = time.monotonic() + 5
        time.sleep(0.02)


def kill(proc: Optional[subprocess.Popen]) -> None:
    if proc is None or proc.returncode is not None:
        return
    try:
        pid, _status, _ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = 0
            return
        proc.send_signal(signal.SIGTERM)
        wait_rusage(proc, 3)
    except ChildProcessError:
        pass


def system_busy_s() -> float:
    """CPU seconds all CPUs spent not idle since boot, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    steal_guest = sum(fields[7:]) if len(fields) > 7 else 0  # steal, guest (counted in user), guest_nice
    return (sum(fields) - idle - steal_guest) / os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: Optional[int]) -> float:
    """user+sys CPU seconds of a live process (all its threads), or 0."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return 0.0
    fields = stat[stat.rfind(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- samplers ---------------------------------------------------------------------------------


class Sampler:
    """One sampler configuration: start against a pid, then stop and report."""

    name = "none"
    rate: Optional[float] = None

    def start(self, pid: int, duration_s: float, cpu: Optional[int]) -> None:
        self.started = time.monotonic()

    def finish(self) -> dict:
        return {}

    def pid(self) -> Optional[int]:
        proc = getattr(self, "proc", None)
        return proc.pid if proc is not None else None

    def stop(self) -> None:
        pass


class GiltySampler(Sampler):
    def __init__(self, rate: float, batch: bool = False) -> None:
        self.rate = rate
        self.batch = batch
        self.name = f"gilty{'-batch' if batch else ''}@{rate:g}"
        self.proc: Optional[subprocess.Popen] = None

    def start(self, pid: int, duration_s: float, cpu: Optional[int]) -> None:
        self.started = time.monotonic()
        # gilty-batch: the sampler under SCHED_BATCH, which does not preempt on wake-up.
        cmd = (
            taskset(cpu)
            + (["chrt", "--batch", "0"] if self.batch else [])
            + [sys.executable, GILTY_SAMPLER, "--pid", str(pid), "--rate", f"{self.rate:g}", "--duration", f"{duration_s:g}"]
        )
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        line = read_line(self.proc, self.proc.stdout, 15)
        if line != "attached":
            raise RuntimeError(f"gilty_sampler: unexpected output {line!r}")

    def finish(self) -> dict:
        assert self.proc is not None
        line = read_line(self.proc, self.proc.stdout, 30)
        status, cpu = wait_rusage(self.proc, 10)
        result = json.loads(line)
        result["process_cpu_s"] = cpu
        result["process_wall_s"] = time.monotonic() - self.started
        result["status"] = status
        return result

    def stop(self) -> None:
        kill(self.proc)


class PySpySampler(Sampler):
    def __init__(self, rate: float, nonblocking: bool, py_spy: str) -> None:
        self.rate = rate
        self.nonblocking = nonblocking
        self.py_spy = py_spy
        self.name = f"py-spy{'-nb' if nonblocking else ''}@{rate:g}"
        self.proc: Optional[subprocess.Popen] = None

    def start(self, pid: int, duration_s: float, cpu: Optional[int]) -> None:
        self.started = time.monotonic()
        self.raw = tempfile.NamedTemporaryFile(prefix="pyspy-", suffix=".raw", delete=False)
        self.raw.close()
        # --idle: count every thread in every pass, so passes = samples / threads.
        cmd = taskset(cpu) + [
            self.py_spy,
            "record",
            "--pid",
            str(pid),
            "--rate",
            f"{self.rate:g}",
            "--duration",
            str(int(duration_s + 1)),
            "--format",
            "raw",
            "--output",
            self.raw.name,
            "--idle",
        ]
        if self.nonblocking:
            cmd.append("--nonblocking")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def finish(self, stop_after_s: float = 2.0) -> dict:
        """Reap py-spy. It stops by itself when the target exits, but --duration only sets how
        many samples it takes (rate x duration), so a py-spy that cannot keep up runs on: it
        gets a SIGINT (on which it writes its output) ``stop_after_s`` from now."""
        assert self.proc is not None
        deadline = time.monotonic() + stop_after_s
        status = cpu = None
        while time.monotonic() < deadline:
            pid, st, ru = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                self.proc.returncode = status = os.waitstatus_to_exitcode(st)
                cpu = ru.ru_utime + ru.ru_stime
                break
            time.sleep(0.02)
        wall = time.monotonic() - self.started
        if status is None:
            self.proc.send_signal(signal.SIGINT)
            status, cpu = wait_rusage(self.proc, 30)
        stderr = self.proc.stderr.read() if self.proc.stderr else ""
        samples = 0
        try:
            with open(self.raw.name) as f:
                for line in f:
                    samples += int(line.rsplit(" ", 1)[1])
        except (OSError, ValueError, IndexError):
            pass
        finally:
            os.unlink(self.raw.name)
        behind = [line for line in stderr.splitlines() if "behind in sampling" in line]
        return {
            "thread_samples": samples,
            "process_cpu_s": cpu,
            "process_wall_s": wall,
            "status": status,
            "sampling_wall_s": wall,
            "interrupted": bool(stop_after_s) and wall >= stop_after_s,
            "behind_warnings": len(behind),
            "last_behind": behind[-1].split("py-spy>")[-1].strip() if behind else None,
        }

    def stop(self) -> None:
        kill(self.proc)


# -- the overhead benchmark -------------------------------------------------------------------


def run_cpu4(python: str, sampler: Sampler, window_s: float, pin: bool, threads: int = 4) -> dict:
    """One measurement: start the target, attach the sampler, let the target measure itself."""
    target = subprocess.Popen(
        taskset(0 if pin else None) + [python, CPU4, "--window", f"{window_s:g}", "--threads", str(threads)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        # Every thread must have had the GIL once before "ready": 200 threads take about 10 s.
        ready = read_line(target, target.stdout, 15 + 0.2 * threads)
        pid = int(ready.split()[1])
        sampler.start(pid, SETTLE_S + window_s + 3.0, 1 if pin else None)
        time.sleep(max(0.0, SETTLE_S - (time.monotonic() - sampler.started)))
        sampler_pid = sampler.pid()
        busy0, spl0 = system_busy_s(), process_cpu_s(sampler_pid)
        target.stdin.write("go\n")
        target.stdin.flush()
        result = json.loads(read_line(target, target.stdout, window_s + 30))
        busy1, spl1 = system_busy_s(), process_cpu_s(sampler_pid)
        # Noise check: CPU time used during the window by anything but the target and the sampler.
        others = (busy1 - busy0) - result["cpu_s"] - (spl1 - spl0)
        result["others_cpu_share"] = max(0.0, others) / result["window_s"]
        result["sampler_window_cpu_s"] = spl1 - spl0
        target.wait(10)
        result["sampler"] = sampler.finish()
        return result
    finally:
        sampler.stop()
        kill(target)


SAMPLER_KINDS = ("gilty", "gilty-batch", "py-spy", "py-spy-nb")


def configurations(kinds: list, rates: list, py_spy: Optional[str]) -> list:
    configs: list = [Sampler()]
    for kind in kinds:
        for r in rates:
            if kind == "gilty":
                configs.append(GiltySampler(r))
            elif kind == "gilty-batch":
                configs.append(GiltySampler(r, batch=True))
            elif py_spy:
                configs.append(PySpySampler(r, kind == "py-spy-nb", py_spy))
    return configs


def overhead(python: str, args: argparse.Namespace, py_spy: Optional[str]) -> dict:
    configs = configurations(args.samplers, args.rates, py_spy)
    runs: dict = {c.name: [] for c in configs}
    for round_no in range(args.repeats):
        shift = round_no % len(configs)
        order = configs[shift:] + configs[:shift]
        for config in order:
            result = run_cpu4(python, config, args.window, args.pin, args.threads)
            result["round"] = round_no
            runs[config.name].append(result)
            print(
                f"  round {round_no + 1} {config.name:<16} {result['ips'] / 1e6:7.3f} M it/s  "
                f"{result['ips_per_cpu_s'] / 1e6:7.3f} M it/CPU-s  others {result['others_cpu_share'] * 100:3.0f}% of a CPU",
                file=sys.stderr,
                flush=True,
            )
    return {"configs": [c.name for c in configs], "runs": runs}


def clean(result: dict, max_others: float) -> bool:
    return result.get("others_cpu_share", 0.0) <= max_others


def ratio_stats(runs: dict, key: str, max_others: float) -> dict:
    """Per configuration: per-round ratio to that round's baseline -> median, min, max.

    Only rounds where neither this run nor that round's baseline saw other processes use
    more than ``max_others`` of a CPU count ("clean"); with fewer than two clean rounds,
    every round counts and ``all_rounds`` says so.
    """
    base = {r["round"]: r for r in runs["none"]}
    out = {}
    for name, results in runs.items():
        pairs = [(r, base[r["round"]]) for r in results if r["round"] in base]
        kept = [(r, b) for r, b in pairs if clean(r, max_others) and clean(b, max_others)]
        all_rounds = len(kept) < 2
        if all_rounds:
            kept = pairs
        ratios = [r[key] / b[key] for r, b in kept]
        out[name] = {
            "median": statistics.median(ratios),
            "min": min(ratios),
            "max": max(ratios),
            "abs_median": statistics.median(r[key] for r, _ in kept),
            "rounds": len(kept),
            "of": len(pairs),
            "all_rounds": all_rounds,
        }
    return out


def achieved(name: str, result: dict, window_s: float) -> tuple:
    """(achieved passes/s, sampler CPU seconds per wall second) of one run."""
    s = result["sampler"]
    if name.startswith("gilty"):
        return s["achieved_hz"], s["cpu_share"]
    if name.startswith("py-spy"):
        threads = result["threads"] + 1  # the spinners and the main thread (--idle counts all)
        wall = max(s["sampling_wall_s"], 1e-9)
        return s["thread_samples"] / threads / wall, s["process_cpu_s"] / max(s["process_wall_s"], 1e-9)
    return None, None


# -- the maximum-rate benchmark ---------------------------------------------------------------


def maxrate(python: str, args: argparse.Namespace, py_spy: Optional[str]) -> list:
    """Sample mixed32 at each rate: gilty, then (if found) py-spy --nonblocking, rate by rate."""
    target = subprocess.Popen(taskset(0 if args.pin else None) + [python, MIXED32], stdout=subprocess.PIPE, text=True)
    rows = []
    cpu = 1 if args.pin else None
    try:
        pid = int(read_line(target, target.stdout, 15).split()[1])
        time.sleep(0.5)
        for rate in MAXRATE_RATES:
            busy0, tgt0 = system_busy_s(), process_cpu_s(pid)
            sampler = GiltySampler(rate)
            try:
                sampler.start(pid, args.maxrate_seconds, cpu)
                r = sampler.finish()
            finally:
                sampler.stop()
            busy1, tgt1 = system_busy_s(), process_cpu_s(pid)
            r.update(
                sampler="gilty",
                cpu_ms_per_pass=1000 * r["cpu_s"] / r["samples"] if r["samples"] else None,
                target_cpu_share=(tgt1 - tgt0) / r["process_wall_s"],
                others_cpu_share=max(0.0, (busy1 - busy0) - (tgt1 - tgt0) - r["process_cpu_s"]) / r["process_wall_s"],
            )
            rows.append(r)
            print(
                f"  gilty@{rate:<6g} achieved {r['achieved_hz']:8.1f}/s late {r['late']:6d} "
                f"cpu {r['cpu_share'] * 100:5.1f}% {r['cpu_ms_per_pass']:.3f} ms/pass  "
                f"others {r['others_cpu_share'] * 100:3.0f}% of a CPU",
                file=sys.stderr,
                flush=True,
            )
            if not py_spy:
                continue
            duration = max(1, round(args.maxrate_seconds))
            busy0, tgt0 = system_busy_s(), process_cpu_s(pid)
            sampler = PySpySampler(rate, True, py_spy)
            try:
                sampler.start(pid, duration - 1, cpu)  # start() adds 1 s
                r = sampler.finish(stop_after_s=duration)
            finally:
                sampler.stop()
            busy1, tgt1 = system_busy_s(), process_cpu_s(pid)
            passes = r["thread_samples"] / MIXED32_THREADS
            r.update(
                sampler="py-spy-nb",
                rate=rate,
                samples=passes,
                achieved_hz=passes / r["sampling_wall_s"],
                cpu_ms_per_pass=1000 * r["process_cpu_s"] / passes if passes else None,
                cpu_share=r["process_cpu_s"] / r["process_wall_s"],
                target_cpu_share=(tgt1 - tgt0) / r["process_wall_s"],
                others_cpu_share=max(0.0, (busy1 - busy0) - (tgt1 - tgt0) - r["process_cpu_s"]) / r["process_wall_s"],
            )
            rows.append(r)
            print(
                f"  py-spy-nb@{rate:<6g} achieved {r['achieved_hz']:8.1f}/s "
                f"cpu {r['cpu_share'] * 100:5.1f}% (whole process)  others {r['others_cpu_share'] * 100:3.0f}% of a CPU",
                file=sys.stderr,
                flush=True,
            )
    finally:
        target.send_signal(signal.SIGTERM)
        try:
            target.wait(5)
        except subprocess.TimeoutExpired:
            kill(target)
    return rows


# -- report -----------------------------------------------------------------------------------


def machine() -> dict:
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": model, "kernel": platform.release(), "date": time.strftime("%Y-%m-%d %H:%M %Z")}


def busy_processes(seconds: float = 1.0, threshold: float = 0.05) -> list:
    """Other processes using more than ``threshold`` of a CPU over ``seconds``: the noise check."""

    def ticks() -> dict:
        out = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            out[int(entry)] = (int(fields[11]) + int(fields[12]), cmd)
        return out

    hz = os.sysconf("SC_CLK_TCK")
    a = ticks()
    time.sleep(seconds)
    b = ticks()
    busy = []
    for pid, (t, cmd) in b.items():
        if pid == os.getpid() or pid not in a:
            continue
        share = (t - a[pid][0]) / hz / seconds
        if share >= threshold:
            busy.append({"pid": pid, "cpu": round(share, 2), "cmd": cmd[:100]})
    return sorted(busy, key=lambda p: -p["cpu"])


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def pct(x: float) -> str:
    return f"{(x - 1) * 100:+.1f}%"


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        f"machine: {m['nproc']} CPUs, {m['cpu']}, Linux {m['kernel']}; {m['date']}",
        f"command: {report['command']}",
        f"py-spy: {report['py_spy'] or 'not found'}; nice value of targets and samplers: {report['nice']} (autogroup: {report['autogroup']})",
        f"load average before / after: {report['load_before']} / {report['load_after']}",
    ]
    for when in ("before", "after"):
        for p in report[f"busy_{when}"]:
            lines.append(f"other busy process {when}: pid {p['pid']} at {p['cpu'] * 100:.0f}% CPU: {p['cmd']}")
    lines.append("")
    for py in report["interpreters"]:
        lines.append(f"### Target: Python {py['version']} ({py['python']})")
        lines.append("")
        if "overhead" in py:
            ov = py["overhead"]
            max_others = report["max_noise"]
            thr = ratio_stats(ov["runs"], "ips", max_others)
            per_cpu = ratio_stats(ov["runs"], "ips_per_cpu_s", max_others)
            if max_others == float("inf"):
                which = "over all rounds"
            else:
                which = (
                    f"over the rounds in which other processes used at most {max_others * 100:.0f}% of a CPU during "
                    'both runs ("clean"; * = too few clean rounds, all rounds used)'
                )
            others = statistics.median(r.get("others_cpu_share", 0.0) for runs in ov["runs"].values() for r in runs)
            lines.append(
                f"cpu4 target ({report.get('threads', 4)} threads), {report['window']:g} s window, {report['repeats']} interleaved rounds{', target on CPU 0, sampler on CPU 1' if report['pin'] else ''}. "
                f"Change vs. the same round's no-sampler run: median [min, max], {which}. "
                f"Other processes used a median {others * 100:.0f}% of a CPU during the runs."
            )
            lines.append("")
            lines.append(
                "| sampler | rounds used | throughput (M it/s, median) | throughput change | per target CPU-s change | target CPU use | achieved rate (passes/s) | sampler CPU (CPU-s per s) |"
            )
            lines.append("|---|---:|---:|---:|---:|---:|---:|---:|")
            for name in ov["configs"]:
                t, c = thr[name], per_cpu[name]
                target_cpu = statistics.median(r["cpu_s"] / r["window_s"] for r in ov["runs"][name])
                ach = [achieved(name, r, report["window"]) for r in ov["runs"][name]]
                rates = [a for a, _ in ach if a is not None]
                cpus = [b for _, b in ach if b is not None]
                lines.append(
                    f"| {name} | {t['rounds']}/{t['of']}{'*' if t['all_rounds'] else ''} | {t['abs_median'] / 1e6:.3f} | "
                    + ("baseline" if name == "none" else f"{pct(t['median'])} [{pct(t['min'])}, {pct(t['max'])}]")
                    + " | "
                    + ("baseline" if name == "none" else f"{pct(c['median'])} [{pct(c['min'])}, {pct(c['max'])}]")
                    + f" | {target_cpu:.2f}"
                    + (f" | {statistics.median(rates):.0f}" if rates else " | -")
                    + (f" | {statistics.median(cpus):.2f}" if cpus else " | -")
                    + " |"
                )
            lines.append("")
        if "maxrate" in py:
            lines.append(
                f"mixed32 target (32 threads: 4 spinning, 27 sleeping 1-5 ms, main), {report['maxrate_seconds']:g} s per rate. "
                "gilty: CPU of the sampling loop only; py-spy --nonblocking: CPU of the whole process (incl. start-up), "
                "passes = samples / 32 threads."
            )
            lines.append("")
            lines.append(
                "| sampler | requested Hz | achieved passes/s | late (skipped) slots | pass interval p50 / p99 (ms) | CPU ms per pass | sampler CPU share | sampler waiting for a CPU (s) | target CPU use | other processes' CPU |"
            )
            lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
            for r in py["maxrate"]:
                gilty = r["sampler"] == "gilty"
                lines.append(
                    f"| {r['sampler']} | {r['rate']:g} | {r['achieved_hz']:.0f} | {r['late'] if gilty else '-'} | "
                    + (f"{r['pass_ms_p50']} / {r['pass_ms_p99']}" if gilty else "-")
                    + " | "
                    + (f"{r['cpu_ms_per_pass']:.3f}" if r["cpu_ms_per_pass"] else "-")
                    + f" | {r['cpu_share'] * 100:.0f}% | "
                    + (f"{r['runq_wait_s']:.2f}" if gilty else "-")
                    + f" | {r['target_cpu_share']:.2f} | {r['others_cpu_share'] * 100:.0f}% |"
                )
            lines.append("")
            for name in ("gilty", "py-spy-nb"):
                rows = [r for r in py["maxrate"] if r["sampler"] == name]
                if not rows:
                    continue
                ok = [r["rate"] for r in rows if r["achieved_hz"] >= SUSTAINED * r["rate"]]
                best = max(rows, key=lambda r: r["achieved_hz"])
                lines.append(
                    f"{name}: highest requested rate achieved to within 5%: "
                    + (f"{max(ok):g} Hz" if ok else "none")
                    + f"; most passes/s seen: {best['achieved_hz']:.0f} (at {best['rate']:g} Hz requested)."
                )
            lines.append("")
    return "\n".join(lines)


def set_nice(value: int) -> None:
    """Nice this process (children inherit it) and, with autogroup scheduling, its own autogroup.

    With kernel.sched_autogroup_enabled each session is one scheduling group, so a process's
    nice value only matters against its own session; the autogroup's nice value
    (/proc/self/autogroup) is what weighs it against other sessions' processes. The
    benchmark first moves into a session of its own, so only it and its children are
    affected.
    """
    try:
        os.setsid()
    except OSError:
        pass  # already a process-group leader (started from an interactive shell): keep the session
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(value))
    except OSError:
        pass  # no autogroup scheduling, or not permitted
    os.setpriority(os.PRIO_PROCESS, 0, value)


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", action="append", help=f"target interpreter (repeatable; default {DEFAULT_PYTHON})")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--window", type=float, default=4.0, help="seconds the target measures its throughput")
    parser.add_argument(
        "--threads", type=int, default=4, help="spinning threads in the overhead target (e.g. 200 for the many-threads run)"
    )
    parser.add_argument("--rates", type=lambda s: [float(x) for x in s.split(",")], default=[100.0, 1000.0])
    parser.add_argument("--pin", action="store_true", help="target on CPU 0, sampler on CPU 1")
    parser.add_argument(
        "--samplers",
        type=lambda text: [k for k in text.split(",") if k],
        default=["gilty", "py-spy", "py-spy-nb"],
        help=f"sampler configurations for the overhead test, from {','.join(SAMPLER_KINDS)} (default: gilty,py-spy,py-spy-nb); "
        "gilty-batch runs gilty under SCHED_BATCH (chrt --batch 0)",
    )
    parser.add_argument("--maxrate-seconds", type=float, default=3.0)
    parser.add_argument(
        "--max-noise",
        type=float,
        default=None,
        help="a round counts as clean when other processes used at most this share of a CPU "
        "(default 0.10; with --nice, every round counts)",
    )
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--skip-maxrate", action="store_true")
    parser.add_argument("--no-py-spy", action="store_true")
    parser.add_argument(
        "--nice",
        type=int,
        default=None,
        help="run at this nice value (targets and samplers inherit it); e.g. -10 on a shared machine, so "
        "other processes' CPU use disturbs the measurement less (negative values need root)",
    )
    parser.add_argument("--json", metavar="FILE", help="also write every measurement as JSON")
    args = parser.parse_args(argv)

    if args.max_noise is None:
        args.max_noise = float("inf") if args.nice is not None else 0.10
    if args.nice is not None:
        set_nice(args.nice)
    pythons = args.python or [DEFAULT_PYTHON]
    unknown = [k for k in args.samplers if k not in SAMPLER_KINDS]
    if unknown:
        parser.error(f"unknown --samplers {unknown}; choose from {SAMPLER_KINDS}")
    py_spy = None
    if not args.no_py_spy:
        py_spy = shutil.which("py-spy", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
        if py_spy is None:
            print("py-spy not found (pip install py-spy); comparing against gilty only", file=sys.stderr)

    report: dict = {
        "machine": machine(),
        "command": " ".join([os.path.relpath(sys.executable)] + [os.path.relpath(sys.argv[0])] + sys.argv[1:]),
        "window": args.window,
        "threads": args.threads,
        "repeats": args.repeats,
        "pin": args.pin,
        "maxrate_seconds": args.maxrate_seconds,
        "max_noise": args.max_noise,
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "autogroup": open("/proc/self/autogroup").read().strip() if os.path.exists("/proc/self/autogroup") else None,
        "py_spy": subprocess.run([py_spy, "--version"], capture_output=True, text=True).stdout.strip() if py_spy else None,
        "interpreters": [],
    }
    report["load_before"] = loadavg()
    report["busy_before"] = busy_processes()
    if report["busy_before"]:
        print(f"warning: other processes are busy: {report['busy_before']}", file=sys.stderr)
    started = time.monotonic()
    for python in pythons:
        version = subprocess.run(
            [python, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True, text=True, check=True
        ).stdout.strip()
        print(f"== Python {version} ({python})", file=sys.stderr, flush=True)
        entry: dict = {"python": python, "version": version}
        if not args.skip_overhead:
            entry["overhead"] = overhead(python, args, py_spy)
        if not args.skip_maxrate:
            entry["maxrate"] = maxrate(python, args, py_spy)
        report["interpreters"].append(entry)
    report["elapsed_s"] = time.monotonic() - started
    report["load_after"] = loadavg()
    report["busy_after"] = busy_processes()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    print(markdown(report))
    print(f"\n(total {report['elapsed_s']:.0f} s; {report['py_spy'] or 'no py-spy'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
