"""One `gilty dump`: every thread of each process read once (name, tid, state, Python stack; with
options its locals, native frames and asyncio tasks). Plain classes, not dataclasses: `gilty dump`
starts without importing more than it needs."""

from __future__ import annotations

import sys

from gilty._visible import visible
from gilty.sampling.attach import attach, child_pids, native_module
from gilty.sampling.dump import Dump


class DumpOptions:
    """``pids`` to read (repeatable --pid, in order, once each) and with ``subprocesses`` every Python
    descendant; what each snapshot holds; the output ``format`` (stdout only)."""

    __slots__ = ("pids", "subprocesses", "tasks", "locals", "native", "format")

    def __init__(
        self,
        pids: tuple,
        subprocesses: bool = False,
        tasks: bool = False,
        locals: bool = False,  # noqa: A002 - the option's name
        native: bool = False,
        format: str = "text",  # noqa: A002 - the option's name
    ) -> None:
        self.pids = tuple(dict.fromkeys(pids))
        self.subprocesses = subprocesses
        self.tasks = tasks
        self.locals = locals
        self.native = native
        self.format = format


def run(options: DumpOptions) -> Dump:
    native = native_module()
    roots = list(options.pids)
    if len(roots) == 1 and not options.subprocesses:
        return Dump([_snapshot(native, roots[0], options)], native.syscall_name, single=True)
    # The given pids must be Python (as for one pid); descendants that are not are skipped.
    pids = list(roots)
    if options.subprocesses:
        for root in roots:
            pids += [p for p in child_pids(root) if p not in pids]
    dumps, skipped = [], []
    for pid in pids:
        try:
            dumps.append(_snapshot(native, pid, options))
        except native.GiltyError as e:
            if pid in roots and getattr(e, "kind", None) == "no_such_process":
                raise
            if pid in roots and not options.subprocesses:
                raise
            skipped.append({"pid": pid, "reason": str(e)})
            print(f"gilty: skipping pid {pid}: {visible(str(e), 0)}", file=sys.stderr)  # names the target's executable
    if not dumps:
        from gilty._errors import EXIT_NOT_PYTHON, CommandError

        raise CommandError(f"no Python process found in pid {', '.join(map(str, roots))} or its descendants", EXIT_NOT_PYTHON)
    return Dump(dumps, native.syscall_name, skipped)


def run_core(options: DumpOptions, core: str, exe: str | None, sysroot: str | None) -> Dump:
    """One snapshot read from a core file (`gilty dump --core`), as `run` reads a live process."""
    import os
    import stat

    from gilty._errors import UsageError

    for path, what in ((core, "core file"), (exe, "--exe"), (sysroot, "--sysroot")):
        if path is None:
            continue
        try:
            mode = os.stat(path).st_mode
        except OSError as e:
            raise UsageError(f"{what} {visible(path, 0)}: {e.strerror}") from None
        wanted = stat.S_ISDIR if what == "--sysroot" else stat.S_ISREG
        if not wanted(mode):
            kind = "directory" if what == "--sysroot" else "regular file"
            raise UsageError(f"{what} {visible(path, 0)}: not a {kind}")
    native = native_module()
    target = native.CoreTarget(core, exe, sysroot)
    target_info = {
        "pid": target.pid,
        "python_version": target.python_version,
        "executable": target.executable,
        "switch_interval_s": target.switch_interval_s,
        "core": core,
    }
    snapshot = target.dump(locals=options.locals, positions=options.format == "json", native=options.native)
    if options.tasks:
        snapshot["tasks"] = target.tasks()
    return Dump([(target_info, snapshot)], native.syscall_name, single=True)


def _snapshot(native, pid: int, options: DumpOptions) -> tuple:
    target = attach(native, pid)
    target_info = {
        "pid": target.pid,
        "python_version": target.python_version,
        "executable": target.executable,
        "switch_interval_s": target.switch_interval_s,
    }
    # Positions (3.11+ column ranges) are in the JSON form only: the text keeps py-spy's layout.
    positions = options.format == "json"
    if options.native:
        snapshot = target.dump(locals=options.locals, positions=positions, native=True)
    elif options.locals or positions:
        snapshot = target.dump(locals=options.locals, positions=positions)
    else:
        snapshot = target.dump()
    if options.tasks:
        snapshot["tasks"] = target.tasks()
    return target_info, snapshot
