"""`gilty mcp`: gilty's tools behind the `mcp` package's server (``mcp.server.mcpserver.MCPServer``),
over stdin/stdout. Each tool is a function of ``assist.tools``; this module gives it its name, its
input schema (with its bounds), its description and read-only annotations, and turns a failure into
an MCP tool error (``is_error``) whose text is the command line's one line.

Written against mcp 2.3 (``MCPServer`` is v1's ``FastMCP``). Tools are coroutines that hand the work
to a worker thread: the server keeps answering (a ping, a list of tools) while a record runs, and a
cancelled call stops its record (memory, specialization run) at the next slice instead of running
out its duration. Not ``from __future__ import annotations``: the server reads the tools' signatures for their schemas.
"""

import sys
from typing import Annotated, Optional

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from gilty._errors import UsageError
from gilty.assist import tools
from gilty.sampling import capture
from gilty.specialization.run import DEFAULT_DURATION_S as DEFAULT_SPECIALIZATION_S

INSTRUCTIONS = (
    "gilty reads a live CPython process from outside (read-only: it never writes to the target or stops it) and says "
    "which threads hold the GIL, which wait for it, and why. Start with `dump` (every thread's state and Python stack, "
    "instantly), then `record` a few seconds (per-thread GIL shares, top functions, a verdict). `memory` measures a prefork server's "
    "master and workers (shared memory, copy-on-write in GC or outside it), `specialization` the adaptive interpreter's "
    "hot sites. `compare` two saved "
    "JSON reports of `gilty record` or `gilty load`; `load_knee` reads the knee of a saved `gilty load` report. "
    "Every result is the JSON the `gilty` command writes with --format json; a failure is gilty's one-line error."
)

# The target is only read, nothing is written: every tool is read-only. A dump or record answers
# differently each time (the target runs on), a saved report's comparison does not.
_LIVE = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
_SAVED = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

RECORD_DESCRIPTION = (
    "Sample a Python process for a while: per thread, the share of time holding the GIL, waiting for it, idle, in "
    "native code; the GIL's utilisation, convoys, who blocks whom, top functions and a verdict. "
    f"`gilty record --pid PID --duration S --rate HZ --format json`. Bounded: at most {tools.MAX_RECORD_S:g} s, "
    f"{tools.MIN_RATE_HZ:g} to {tools.MAX_RATE_HZ:g} Hz, one measurement at a time, a result of at most "
    f"{tools.MAX_RESULT_BYTES >> 20} MiB."
)

MEMORY_DESCRIPTION = (
    "Measure a prefork server (gunicorn, uWSGI, multiprocessing) from its master for a while: each process's RSS, "
    "PSS, USS, shared and private memory every second, which pages shared with the master each worker copied, "
    "during garbage collection or outside it, and each process's GC configuration (gc.freeze, thresholds). "
    "With faults: also the Python function whose write copied each page (perf events). "
    f"`gilty memory --pid MASTER --duration S [--faults] --format json`. Bounded: at most {tools.MAX_RECORD_S:g} s, "
    "one measurement at a time."
)
SPECIALIZATION_DESCRIPTION = (
    "Sample a Python process for a while and read its hot code's adaptive bytecode: per hot instruction, specialized, "
    "warming, backing off or cold, an estimate of the executions that miss or run the generic path, and the costliest "
    "sites with their likely cause (CPython 3.11 to 3.13; on 3.10 the opcache). "
    f"`gilty specialization --pid PID --duration S --format json`. Bounded: at most {tools.MAX_RECORD_S:g} s, "
    "one measurement at a time."
)

Pid = Annotated[int, Field(description="the process id of a running CPython process (its user's, or any as root)")]
Subprocesses = Annotated[bool, Field(description="also every Python descendant of the process (a server's workers)")]
Tasks = Annotated[bool, Field(description="also every asyncio task: its state, coroutine stack, what it awaits")]
Native = Annotated[
    bool,
    Field(
        description="also each thread's C frames between its Python frames (perf events: root, CAP_PERFMON or perf_event_paranoid<=1)"
    ),
]
Duration = Annotated[
    float,
    Field(
        description=f"seconds to sample, more than 0 and at most {tools.MAX_RECORD_S:g}",
        json_schema_extra={"exclusiveMinimum": 0, "maximum": tools.MAX_RECORD_S},
    ),
]


def _duration(default_note: str) -> object:
    return Annotated[
        float,
        Field(
            description=f"seconds to measure, more than 0 and at most {tools.MAX_RECORD_S:g} ({default_note})",
            json_schema_extra={"exclusiveMinimum": 0, "maximum": tools.MAX_RECORD_S},
        ),
    ]


MemoryDuration = _duration(f"default {tools.DEFAULT_MEMORY_S:g}: one measurement a second")
SpecializationDuration = _duration(f"default {DEFAULT_SPECIALIZATION_S:g}, the command's")
Rate = Annotated[
    float,
    Field(
        description=f"samples per second, {tools.MIN_RATE_HZ:g} to {tools.MAX_RATE_HZ:g}",
        json_schema_extra={"minimum": tools.MIN_RATE_HZ, "maximum": tools.MAX_RATE_HZ},
    ),
]
ReportPath = Annotated[
    str, Field(description="path of a saved JSON report on the server's machine (absolute, or relative to its directory)")
]


def _result(ok: bool, value) -> CallToolResult:
    """A tool's answer: the JSON as text, or its failure as a tool error (not "Error executing tool
    NAME: ..." as an exception would be said: the line is gilty's, word for word)."""
    return CallToolResult(content=[TextContent(type="text", text=value)], is_error=not ok)


async def _in_thread(work, stop: Optional[capture.Stop] = None) -> CallToolResult:
    try:
        ok, value = await anyio.to_thread.run_sync(tools.answer, work, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        if stop is not None:
            stop.set()  # the thread's record ends at its next slice, its answer is dropped
        raise
    if ok and not isinstance(value, str):
        import json

        value = json.dumps(value, indent=2) + "\n"
    return _result(ok, value)


class _Server(MCPServer):
    """Arguments that fail the input schema (a string for ``pid``) are said in one line too, as
    gilty says a bad option: the package's own text is pydantic's report over several lines."""

    async def call_tool(self, name, arguments, context=None):
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as e:
            if not isinstance(e.__cause__, ValidationError):
                raise
            problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'arguments'}: {err['msg']}" for err in e.__cause__.errors())
            return _result(False, tools.error_line(UsageError(f"{name}: {problems} (see the tool's input schema)")))


def build(read_json) -> MCPServer:
    from gilty import __version__

    server = _Server(name="gilty", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")

    @server.tool(name="dump", annotations=_LIVE, structured_output=False)
    async def dump(
        pid: Pid,
        subprocesses: Subprocesses = False,
        tasks: Tasks = False,
        locals: Annotated[
            bool, Field(description="also each frame's arguments and local variables (builtins by value, other objects by type)")
        ] = False,  # noqa: A002
        native: Native = False,
    ) -> CallToolResult:
        """Every thread of a Python process once, now: name, tid, state (holding the GIL, waiting for it,
        idle in a syscall, ...) and Python stack. `gilty dump --pid PID --format json`."""
        return await _in_thread(lambda: tools.dump(pid, subprocesses, tasks, locals, native))

    @server.tool(name="dump_core", annotations=_SAVED, structured_output=False)
    async def dump_core(
        core: Annotated[str, Field(description="path of a core file of a CPython process (gcore, systemd-coredump)")],
        exe: Annotated[
            Optional[str], Field(description="the interpreter the process ran, when it is not at the path the core names")
        ] = None,
        sysroot: Annotated[
            Optional[str], Field(description="a directory to look for every file the process mapped under first")
        ] = None,
        tasks: Tasks = False,
        locals: Annotated[bool, Field(description="also each frame's arguments and local variables")] = False,  # noqa: A002
        native: Annotated[bool, Field(description="also each thread's C frames, unwound from the core")] = False,
    ) -> CallToolResult:
        """Every thread of a hung or crashed Python process from its core file, as `dump` reads a live
        one, with a diagnosis (a deadlock, the GIL held outside Python). `gilty dump --core CORE --format json`."""
        return await _in_thread(lambda: tools.dump_core(core, exe, sysroot, tasks, locals, native))

    @server.tool(name="record", description=RECORD_DESCRIPTION, annotations=_LIVE, structured_output=False)
    async def record(
        pid: Pid,
        duration: Duration = tools.DEFAULT_RECORD_S,
        rate: Rate = tools.DEFAULT_RATE_HZ,
        subprocesses: Subprocesses = False,
        tasks: Tasks = False,
        native: Native = False,
        free_threading: Annotated[
            bool,
            Field(
                description="also whether a free-threaded build would help: the GIL wait it gives back, the bound on the gain, "
                "the extension modules that would turn the GIL back on (docs/free-threading.md)"
            ),
        ] = False,
    ) -> CallToolResult:
        ok, options = tools.answer(lambda: tools.record_options(pid, duration, rate, subprocesses, tasks, native, free_threading))
        if not ok:
            return _result(False, options)
        stop = capture.Stop()  # set only by a cancelled call: no signal handler outside the main thread
        return await _in_thread(lambda: tools.record(options, stop), stop)

    @server.tool(name="memory", description=MEMORY_DESCRIPTION, annotations=_LIVE, structured_output=False)
    async def memory(
        pid: Annotated[int, Field(description="the master (parent) process of a prefork tree; every descendant is measured too")],
        duration: MemoryDuration = tools.DEFAULT_MEMORY_S,
        faults: Annotated[
            bool,
            Field(
                description="also sample the workers' page faults that copy pages shared with the master, with the Python "
                "stack that wrote them (perf events: root, CAP_PERFMON or perf_event_paranoid<=1)"
            ),
        ] = False,
    ) -> CallToolResult:
        ok, options = tools.answer(lambda: tools.memory_options(pid, duration, faults))
        if not ok:
            return _result(False, options)
        stop = capture.Stop()  # set only by a cancelled call, as record's
        return await _in_thread(lambda: tools.memory(options, stop), stop)

    @server.tool(name="specialization", description=SPECIALIZATION_DESCRIPTION, annotations=_LIVE, structured_output=False)
    async def specialization(pid: Pid, duration: SpecializationDuration = DEFAULT_SPECIALIZATION_S) -> CallToolResult:
        ok, options = tools.answer(lambda: tools.specialization_options(pid, duration))
        if not ok:
            return _result(False, options)
        stop = capture.Stop()
        return await _in_thread(lambda: tools.specialization(options, stop), stop)

    @server.tool(name="compare", annotations=_SAVED, structured_output=False)
    async def compare(a: ReportPath, b: ReportPath) -> CallToolResult:
        """Compare two saved JSON reports, both of `gilty record` or both of `gilty load` (A the baseline),
        and say which differences are beyond run-to-run noise. `gilty compare A B --format json`."""
        return await _in_thread(lambda: tools.compare(a, b, read_json))

    @server.tool(name="load_knee", annotations=_SAVED, structured_output=False)
    async def load_knee(path: ReportPath) -> CallToolResult:
        """The knee of a saved `gilty load` JSON report: the highest rate that met the SLO, the limit
        that stopped the server there (concurrency, the GIL, a pool, the generator...) and its
        explanation, with each step's verdict. Reads the file only: it generates no load."""
        return await _in_thread(lambda: tools.load_knee(path, read_json))

    return server


def serve(read_json) -> None:
    """Until the client closes stdin. While serving, the `mcp` package points fd 1 at stderr: nothing
    but the protocol reaches stdout, and what gilty says while it works goes to stderr."""
    sys.stderr.write(
        f"gilty: serving MCP over stdio (tools: dump, dump_core, record, memory, specialization, compare, load_knee; "
        f"record, memory and specialization at most {tools.MAX_RECORD_S:g} s)\n"
    )
    build(read_json).run("stdio")
