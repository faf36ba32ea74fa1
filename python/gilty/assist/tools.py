"""What each of `gilty mcp`'s tools does, as plain functions: the typed options built as the command
line builds them, the capability's ``run``, and the report registry's JSON, the same text the
command writes with ``--format json``. The same safety as the commands: the target is only read
(nothing is written to it, nothing stopped), nothing listens on a network (stdio only), and every
measurement is bounded (below). A failure is a ``CommandError`` or the native ``GiltyError``, which
``error_line`` says as the command line's one line.
"""

from __future__ import annotations

import sys
import threading

from gilty import report
from gilty._errors import EXIT_INTERRUPTED, EXIT_USAGE, CommandError, UsageError
from gilty._visible import visible
from gilty.options import (
    CompareOptions,
    MemoryOptions,
    OutputOptions,
    RecordOptions,
    SamplingOptions,
    SpecializationOptions,
    TargetOptions,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

# The bounds of a tool call. The command line takes up to 116 days and 20 kHz; an assistant's call
# waits for its answer, and its answer has to fit what the assistant reads.
MAX_RECORD_S = 60.0
DEFAULT_RECORD_S = 5.0
DEFAULT_MEMORY_S = 10.0  # `gilty memory` runs until Ctrl-C; a call needs an end: ten measurements
MIN_RATE_HZ = 0.1  # as the command line (one pass every 10 s)
MAX_RATE_HZ = 1000.0
DEFAULT_RATE_HZ = 100.0  # `gilty record`'s default
MAX_PID = 2**22  # the kernel's pid_max ceiling, as the command line's --pid
MAX_RESULT_BYTES = 16 << 20  # a tool's JSON; a larger report is for `gilty record -o FILE.json`

# One measurement at a time: an assistant that fires ten records at once gets them one after the
# other, not ten samplers on the machine it is diagnosing.
_ONE_AT_A_TIME = threading.Lock()


def check_pid(pid: int) -> int:
    if isinstance(pid, bool) or not isinstance(pid, int) or not 1 <= pid <= MAX_PID:
        raise UsageError(f"pid {pid!r} must be a whole number between 1 and {MAX_PID}")
    return pid


def check_duration(duration: float, command: str = "record") -> None:
    """A measurement's duration bound (record, memory, specialization), said before anything is attached."""
    if not 0 < duration <= MAX_RECORD_S:  # false for NaN too
        what, then = ("a record", " and compare or report the file") if command == "record" else (f"a {command} run", "")
        raise UsageError(
            f"duration {duration:g} s is out of bounds: {what} from the mcp server lasts more than 0 and at most {MAX_RECORD_S:g} s (for longer, run `gilty {command} --duration S -o FILE.json`{then})"
        )


def check_record_bounds(duration: float, rate: float) -> None:
    """The record tool's bounds, said before anything is attached."""
    check_duration(duration, "record")
    if not MIN_RATE_HZ <= rate <= MAX_RATE_HZ:
        raise UsageError(f"rate {rate:g} Hz is out of bounds: the mcp server samples at {MIN_RATE_HZ:g} to {MAX_RATE_HZ:g} Hz")


def bounded(text: str, command: str = "record") -> str:
    size = len(text.encode("utf-8"))
    if size > MAX_RESULT_BYTES:
        shorter = "record for less time or at a lower rate" if command == "record" else "measure for less time"
        raise CommandError(
            f"the JSON report is {size / (1 << 20):.1f} MiB, over the {MAX_RESULT_BYTES >> 20} MiB a tool result carries; "
            f"{shorter}, or write it with `gilty {command} -o FILE.json`",
            EXIT_USAGE,
        )
    return text


def dump(pid: int, subprocesses: bool = False, tasks: bool = False, locals: bool = False, native: bool = False) -> str:  # noqa: A002
    """`gilty dump --pid PID --format json` with the same flags."""
    from gilty.sampling import snapshots

    options = snapshots.DumpOptions((check_pid(pid),), subprocesses, tasks, locals, native, "json")
    with _ONE_AT_A_TIME:
        return bounded(report.render(snapshots.run(options), "json"))


def dump_core(
    core: str,
    exe: Optional[str] = None,
    sysroot: Optional[str] = None,
    tasks: bool = False,
    locals: bool = False,
    native: bool = False,  # noqa: A002
) -> str:
    """`gilty dump --core CORE [--exe PYTHON] [--sysroot DIR] --format json`: a core file read as a
    live process is (docs/core-files.md)."""
    from gilty.sampling import snapshots

    options = snapshots.DumpOptions((), tasks=tasks, locals=locals, native=native, format="json")
    with _ONE_AT_A_TIME:
        return bounded(report.render(snapshots.run_core(options, core, exe, sysroot), "json"))


def record_options(
    pid: int,
    duration: float,
    rate: float,
    subprocesses: bool = False,
    tasks: bool = False,
    native: bool = False,
    free_threading: bool = False,
) -> RecordOptions:
    """`gilty record --pid PID --duration S --rate HZ --format json`'s options, refused in one line
    where the command line refuses them; ``free_threading`` is --free-threading at its default slowdown."""
    from gilty.readiness.analysis import DEFAULT_SLOWDOWN

    check_pid(pid)
    check_record_bounds(duration, rate)
    target = TargetOptions((pid,), subprocesses)
    if target.several and tasks:
        raise UsageError("tasks reads one process's event loops: leave out subprocesses")
    sampling = SamplingOptions(rate, duration, native=native, tasks=tasks)
    return RecordOptions(target, sampling, OutputOptions("json"), free_threading=DEFAULT_SLOWDOWN if free_threading else None)


def record(options: RecordOptions, stop: Any) -> str:
    """The recording's JSON report; ``stop`` (capture.Stop) ends it early. What the run says while it
    runs goes to gilty's stderr, as the command's does."""
    from gilty.sampling import record_run

    with _ONE_AT_A_TIME:
        result = record_run.run(options, stop, sys.stderr)
        return bounded(report.render(result.recording, "json"))


def memory_options(pid: int, duration: float, faults: bool = False) -> MemoryOptions:
    """`gilty memory --pid MASTER --duration S [--faults] --format json`'s options, at the command
    line's interval and GC poll; refused in one line before anything is attached."""
    from gilty.memory import run as memory

    check_pid(pid)
    check_duration(duration, "memory")
    return MemoryOptions(
        pid, memory.DEFAULT_INTERVAL_S, memory.DEFAULT_GC_POLL_MS, float(duration), OutputOptions("json"), faults=bool(faults)
    )


def memory(options: MemoryOptions, stop: Any) -> str:
    """The prefork tree's memory report (sharing, copy-on-write in GC or outside it); ``stop`` ends
    it early. A master that exits during the run gives the PARTIAL report the command writes (it
    exits 8 after writing it)."""
    from gilty.memory import run as memory_run

    with _ONE_AT_A_TIME:
        return bounded(report.render(memory_run.run(options, stop), "json"), "memory")


def specialization_options(pid: int, duration: float) -> SpecializationOptions:
    """`gilty specialization --pid PID --duration S --format json`'s options, at the command line's
    rate, read interval and top; refused in one line before anything is attached."""
    from gilty.specialization import run as specialization_run

    check_pid(pid)
    check_duration(duration, "specialization")
    return SpecializationOptions(
        pid=pid,
        duration_s=float(duration),
        rate_hz=specialization_run.DEFAULT_RATE_HZ,
        read_interval_ms=specialization_run.DEFAULT_READ_INTERVAL_MS,
        top=specialization_run.DEFAULT_TOP,
        output=OutputOptions("json"),
        opcache_output="json" in report.formats("opcache"),
    )


def specialization(options: SpecializationOptions, stop: Any) -> str:
    """The specialization report (on 3.10 the opcache's); ``stop`` ends it early."""
    from gilty.specialization import run as specialization_run

    with _ONE_AT_A_TIME:
        try:
            result = specialization_run.run(options, stop)
        except KeyboardInterrupt:  # how the run says a stop before its first read; the call was cancelled
            raise CommandError("interrupted", EXIT_INTERRUPTED) from None
        return bounded(report.render(result, "json"), "specialization")


def compare(a: str, b: str, read_json: Callable) -> str:
    """`gilty compare A B --format json`: two saved `gilty record` or two `gilty load` JSON reports."""
    from gilty.load import two_runs

    comparison = two_runs.run(CompareOptions(a, b, OutputOptions("json")), read_json)
    return bounded(report.render(comparison, "json"))


def load_knee(path: str, read_json: Callable) -> dict:
    """The knee of a saved `gilty load` JSON report, and why it is there: the file is read, no load
    is generated. The knee as the report holds it, the text report's line for it, the SLO, and each
    step's verdict (rate, throughput, the SLO's percentile, met or not)."""
    from gilty.report import saved
    from gilty.report.load.text import knee_line

    data = read_json(path)
    if not (isinstance(data, dict) and data.get("kind") == "load" and isinstance(data.get("steps"), list)):
        kind = data.get("kind") if isinstance(data, dict) else None
        what = "a Locust run, which has no knee" if kind == "load_locust" else "not a `gilty load` JSON report"
        raise CommandError(f"{path} is {what}; give a report written by `gilty load ... -o FILE.json`", EXIT_USAGE)
    if not data["steps"]:
        raise CommandError(f"{path} holds a load run of no step", EXIT_USAGE)
    try:
        run = saved.load_run(data)
        line = None if run.knee is None else knee_line(run)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        raise CommandError(f"{path}: the load report in it is damaged ({type(e).__name__}: {e})", EXIT_USAGE) from None
    return {
        "file": path,
        "knee": data.get("knee"),
        "summary": line,
        "slo": data.get("slo"),
        "arrivals": data.get("arrivals"),
        "stopped": data.get("stopped", False),
        "steps": [step.get("verdict") for step in data["steps"]],
    }


# -- failures as the command line says them ---------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(str(text).split()) or "(no message)"


def error_line(error: BaseException) -> str:
    """``gilty: error: <message>``, the line `gilty` prints on stderr for the same failure (gilty.cli.main)."""
    native = sys.modules.get("gilty._native")
    native_error = getattr(native, "GiltyError", None) if native is not None else None
    if isinstance(error, CommandError):
        message = _one_line(error.message)
    elif isinstance(native_error, type) and isinstance(error, native_error):
        message = _one_line(str(error))
    else:
        message = f"internal error: {type(error).__name__}: {_one_line(str(error))}"
    # Messages name the target's executable and threads, which its owner chose.
    return f"gilty: error: {visible(message, 0)}"


def answer(work: Callable[[], Any]) -> tuple:
    """(True, what ``work`` returns) or (False, its failure's one line), never a traceback."""
    try:
        return True, work()
    except Exception as e:  # noqa: BLE001 - every failure becomes the command line's one line
        return False, error_line(e)
