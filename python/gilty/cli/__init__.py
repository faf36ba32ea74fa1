"""The ``gilty`` command line: a registry of subcommands and the one place errors become exit codes.

Each command module has ``prepare_parser(parser)`` and ``run(args) -> int`` (memray's layout), and
``run`` is three calls: the options built from ``args`` once (gilty.options, by cli/options.py), the
capability's ``run(options, stop)`` (stop: gilty.sampling.capture.Stop), the result to
``gilty.report.write``. ``main`` prints any failure as one line, ``gilty: error: <message>``, never a traceback
(set GILTY_DEBUG=1 to get the traceback of an internal error).
"""

from __future__ import annotations

import sys

try:
    import argparse
    import importlib
    import os
    import re
    from types import ModuleType

    from gilty._errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, CommandError, UsageError, exit_code_for_kind
except KeyboardInterrupt:
    # Ctrl-C while gilty is still importing, before main() can catch it: the same one line, not a
    # traceback (the console script imports this module outside any handler of ours).
    sys.stderr.write("gilty: interrupted\n")
    raise SystemExit(130) from None
TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing `typing` costs every CLI start ~15 ms
    from typing import NoReturn, Optional, Sequence

# Command name -> module, imported only when needed: importing every command (and what they import)
# took most of a `gilty dump`'s wall time.
COMMAND_MODULES = {
    "record": "gilty.cli.record",
    "top": "gilty.cli.top",
    "dump": "gilty.cli.dump",
    "memory": "gilty.cli.memory",
    "load": "gilty.cli.load",
    "serve": "gilty.cli.serve",
    "report": "gilty.cli.report",
    "specialization": "gilty.cli.specialization",
    "compare": "gilty.cli.compare",
    "mcp": "gilty.cli.mcp",
}


# A word that is a negative value (-3, -.5, -inf, -10:10:5), never an option name.
_NEGATIVE_VALUE = re.compile(r"-(\d|\.\d|inf|nan)", re.IGNORECASE)


def command_module(name: str) -> ModuleType:
    return importlib.import_module(COMMAND_MODULES[name])


class _VersionAction(argparse.Action):
    """--version, reading the installed version only when asked (importlib.metadata is slow to import)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from gilty import __version__

        sys.stdout.write(f"gilty {__version__}\n")
        parser.exit()


def _columns() -> int:
    # What shutil.get_terminal_size() answers, without importing shutil: argparse's own formatter does,
    # and shutil brings bz2, lzma and fnmatch into every start (several ms of a `gilty dump`).
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return 80


class _Formatter(argparse.HelpFormatter):
    def __init__(self, prog: str, **kwargs) -> None:
        kwargs.setdefault("width", _columns() - 2)  # argparse keeps two columns free, as here
        super().__init__(prog, **kwargs)


class _RawDescriptionFormatter(_Formatter, argparse.RawDescriptionHelpFormatter):
    pass


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors become a UsageError, so main prints them as one line."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def build_parser(only: Optional[str] = None) -> argparse.ArgumentParser:
    """The full parser, or with ``only`` a parser that knows that command alone, so that running one
    command imports only its module. Each parser argparse makes looks up its translations three times
    (gettext reads the environment and probes for catalogues): eight unused ones cost a `gilty dump`
    about 5 % of its instructions. The command is known, so no error can list the others."""
    parser = _Parser(
        prog="gilty",
        description="Who holds the GIL, who waits for it, and why: samples a live CPython process from outside.",
    )
    parser.add_argument("--version", action=_VersionAction, help="show the version and exit")
    sub = parser.add_subparsers(dest="command_name", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        if only is not None and name != only:
            continue
        module = command_module(name)
        doc = (module.__doc__ or "").strip()
        command_parser = sub.add_parser(
            name,
            help=doc.splitlines()[0] if doc else None,
            description=doc or None,
            formatter_class=_RawDescriptionFormatter,
        )
        module.prepare_parser(command_parser)
    return parser


def split_child_command(argv: list) -> tuple:
    """Split ``record --duration 5 -- python app.py`` at the first ``--``: (gilty args, CMD or None).

    Done before argparse, whose REMAINDER handling of ``--`` varies between Python versions.
    """
    if "--" not in argv:
        return argv, None
    at = argv.index("--")
    return argv[:at], argv[at + 1 :]


def join_negative_values(argv: list) -> list:
    """``--ramp -10:10:5`` → ``--ramp=-10:10:5``: argparse takes a value that starts with ``-`` and is
    not a plain number for an option, so a negative value would be reported as a missing one."""
    out: list = []
    for word in argv:
        if out and out[-1].startswith("--") and "=" not in out[-1] and _NEGATIVE_VALUE.match(word):
            out[-1] = f"{out[-1]}={word}"
        else:
            out.append(word)
    return out


def _is_native_error(error: BaseException) -> bool:
    # Looked up in sys.modules, not imported: a missing extension must not break error handling.
    native = sys.modules.get("gilty._native")
    error_type = getattr(native, "GiltyError", None) if native is not None else None
    return isinstance(error_type, type) and isinstance(error, error_type)


def _fail(message: str) -> None:
    # Messages name the target's executable, libraries and threads, which its owner chose (with -s,
    # any descendant's): written out as the outputs show them, never acted on by root's terminal.
    from gilty._visible import visible

    print(f"gilty: error: {visible(message, 0)}", file=sys.stderr)


def _one_line(text: str) -> str:
    return " ".join(str(text).split()) or "(no message)"


def _parse(args_list: list) -> tuple:
    """(the command's module, its parsed arguments with ``child_argv``: the command after `--` or None)."""
    own_args, child_argv = split_child_command(args_list)
    own_args = join_negative_values(own_args)
    # The command is the first word that is not an option (the top level's only options take no value).
    first = next((a for a in own_args if not a.startswith("-")), None)
    only = first if first in COMMAND_MODULES and "-h" not in own_args[: own_args.index(first)] else None
    args = build_parser(only).parse_args(own_args)
    module = command_module(args.command_name)
    if child_argv is not None and not getattr(module, "ACCEPTS_CHILD_COMMAND", False):
        raise UsageError(f"`gilty {args.command_name}` does not take a command after `--`")
    if child_argv is not None and not child_argv:
        raise UsageError("no command after `--`")
    args.child_argv = child_argv
    return module, args


def parse_options(argv: Sequence[str]):
    """The typed options `gilty ARGV` would run with, without running it: the program's parse step on
    its own (beside ``main``, the CLI's one other entry; tests read a command line through it)."""
    module, args = _parse(list(argv))
    build = getattr(module, "build_options", None)
    if build is None:
        raise UsageError(f"`gilty {args.command_name}` has no options object")
    return build(args)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        module, args = _parse(args_list)
        return module.run(args)
    except CommandError as e:
        _fail(_one_line(e.message))
        return e.exit_code
    except KeyboardInterrupt:
        # A record handles Ctrl-C itself and still prints its summary; this is any other moment.
        print("gilty: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `gilty dump | head`: the reader left. Point stdout at /dev/null so the exit flush is quiet.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except SystemExit as e:  # argparse --help / --version
        return e.code if isinstance(e.code, int) else EXIT_OK
    except Exception as e:  # noqa: BLE001 - the one place every failure becomes one line
        if _is_native_error(e):
            _fail(_one_line(str(e)))
            return exit_code_for_kind(getattr(e, "kind", "internal"))
        if os.environ.get("GILTY_DEBUG"):
            import traceback

            traceback.print_exc()
        _fail(f"internal error: {type(e).__name__}: {_one_line(str(e))} (set GILTY_DEBUG=1 for a traceback)")
        return EXIT_INTERNAL
