"""Output: one registry from (result, format) to the renderer that writes it, used by every command.

A command's capability hands back a result object (a ``Recording``, a ``MemorySession``, a
``SpecializationResult``, a ``LoadRun``, a ``Comparison``, a ``Dump``...); ``write(result, fmt, path)``
renders it as ``fmt`` and writes it to ``path`` or stdout. ``RESULTS`` names each result class's kind
and ``RENDERERS`` maps (kind, format) to ``"module:function"`` under ``gilty.report``: the function
takes the result (a recording's picture formats also ``options``) and returns the whole output as
text (or bytes). Adding a format to a result is one renderer module, ``report/<result>/<format>.py``,
and one ``RENDERERS`` line (for a recording, an ``EXTENSIONS`` line too if ``-o`` is to pick it by
its extension); a new result is one ``RESULTS`` line more. Shared pieces are in ``report/`` itself:
``labels`` (names made visible), ``pictures`` (stack drawing), ``output_file`` (safe writes),
``saved`` (`gilty report` of a saved non-recording report) and ``html/`` (the page's CSS and JS).
Renderer modules are imported when used, so ``gilty top`` does not pay for the HTML template;
classes are named, not imported, for the same reason.
"""

from __future__ import annotations

import importlib
import sys

TYPE_CHECKING = False

from gilty._errors import CommandError, UsageError

if TYPE_CHECKING:  # annotations only: `gilty dump` imports a renderer without the session or `typing`
    from typing import Callable, Optional

# A result's kind, by its class's full name.
RESULTS = {
    "gilty.sampling.session.Recording": "recording",
    "gilty.memory.session.MemorySession": "memory",
    "gilty.specialization.result.SpecializationResult": "specialization",
    "gilty.specialization.result.OpcacheResult": "opcache",
    "gilty.load.result.LoadRun": "load",
    "gilty.load.result.LocustResult": "locust",
    "gilty.load.comparison.Comparison": "compare",
    "gilty.sampling.dump.Dump": "dump",
}

# What each kind is called in an error about its formats.
NOUNS = {
    "recording": "a recording",
    "memory": "the memory report",
    "specialization": "the specialization report",
    "opcache": "the Python 3.10 opcache report",
    "load": "a load run",
    "locust": "a Locust run",
    "compare": "a comparison",
    "dump": "a dump",
}

# (kind, format) -> "module:function" under gilty.report; a recording's formats say what they are.
RENDERERS = {
    ("recording", "text"): "recording.text:render_recording",  # the console summary
    ("recording", "json"): "recording.json:render_recording",  # the analysed JSON report, with the recording for `gilty report`
    ("recording", "speedscope"): "recording.speedscope:render",  # speedscope profile, one per process and thread
    ("recording", "collapsed"): "recording.collapsed:render",  # collapsed stacks for flamegraph.pl / inferno / speedscope
    ("recording", "svg"): "recording.svg:render",  # a flame graph drawn by inferno
    ("recording", "chrome"): "recording.chrome_trace:render",  # Chrome trace events for Perfetto / chrome://tracing
    ("recording", "html"): "recording.html:render",  # one self-contained interactive HTML page
    ("recording", "gecko"): "recording.gecko:render",  # Gecko profile for the Firefox Profiler, states as markers
    # gzipped pprof profile.proto with state/pid/thread labels, for pprof and Pyroscope
    ("recording", "pprof"): "recording.pprof:render",
    ("memory", "text"): "memory.text:render",
    ("memory", "json"): "memory.json:render",
    ("memory", "html"): "memory.html:render",
    ("specialization", "text"): "specialization.text:render_result",
    ("specialization", "json"): "specialization.json:render_result",
    ("specialization", "html"): "specialization.html:render_result",
    ("opcache", "text"): "specialization.text:render_opcache_result",
    ("opcache", "json"): "specialization.json:render_opcache_result",
    ("load", "text"): "load.text:render",
    ("load", "json"): "load.json:render",
    ("load", "html"): "load.html:render",
    ("locust", "text"): "load.locust_text:render",
    ("locust", "json"): "load.locust_json:render",
    ("locust", "html"): "load.locust_html:render",
    ("compare", "text"): "compare.text:render",
    ("compare", "json"): "compare.json:render",
    ("compare", "svg"): "compare.svg:render",
    ("compare", "html"): "compare.html:render",
    ("dump", "text"): "dump.text:render",
    ("dump", "json"): "dump.json:render",
}


# A recording's formats (`gilty record`, `gilty report`), in the registry's order.
FORMAT_NAMES = tuple(fmt for kind, fmt in RENDERERS if kind == "recording")
# Formats that draw stacks: they take ``report.pictures.PictureOptions`` (--idle, --merge-workers).
PICTURE_FORMATS = ("speedscope", "collapsed", "svg", "html")

# Longest suffix first: `x.speedscope.json` is speedscope, not json.
EXTENSIONS = (
    (".pb.gz", "pprof"),
    (".pprof", "pprof"),
    (".speedscope.json", "speedscope"),
    (".trace.json", "chrome"),
    (".gecko.json", "gecko"),
    (".collapsed", "collapsed"),
    (".folded", "collapsed"),
    (".svg", "svg"),
    (".html", "html"),
    (".htm", "html"),
    (".json", "json"),
    (".txt", "text"),
)


def format_for_path(path: str) -> Optional[str]:
    """The format an output file's name asks for, or None when its extension is not one of ours."""
    lower = path.lower()
    return next((fmt for ext, fmt in EXTENSIONS if lower.endswith(ext)), None)


def output_format(fmt: Optional[str], path: Optional[str]) -> str:
    """The explicit ``--format``, else the one ``-o``'s extension names, else text.

    Raised before anything is recorded or written, so a typo in ``-o`` costs nothing.
    """
    if fmt:
        if fmt not in FORMAT_NAMES:
            raise UsageError(f"unknown format {fmt!r}; choose one of {', '.join(FORMAT_NAMES)}")
        return fmt
    if path is None:
        return "text"
    found = format_for_path(path)
    if found is None:
        known = " ".join(ext for ext, _ in EXTENSIONS)
        raise UsageError(f"cannot tell the format of {path!r} from its extension ({known}); add --format FORMAT")
    return found


def kind_of(result) -> str:
    cls = type(result)
    kind = RESULTS.get(f"{cls.__module__}.{cls.__qualname__}")
    if kind is None:
        raise TypeError(f"no output is registered for a {cls.__qualname__}")
    return kind


def formats(kind: str) -> tuple:
    """The formats a kind of result is written as, in the registry's order."""
    return tuple(fmt for k, fmt in RENDERERS if k == kind)


def check(kind: str, fmt: str) -> None:
    """A format the result is not written as is a one-line usage error, said before any work."""
    if (kind, fmt) not in RENDERERS:
        names = formats(kind)
        choices = " or ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} or {names[-1]}"
        raise UsageError(f"{NOUNS.get(kind, kind)} is {choices}")


def renderer(kind: str, fmt: str) -> Callable:
    check(kind, fmt)
    module, function = RENDERERS[kind, fmt].split(":")
    return getattr(importlib.import_module(f"gilty.report.{module}"), function)


def render(result, fmt: str, options=None):
    """The whole output of ``result`` as ``fmt``; ``options`` (``report.pictures.PictureOptions``)
    reach a recording's formats that draw stacks."""
    kind = kind_of(result)
    function = renderer(kind, fmt)
    if kind != "recording":
        return function(result)
    if fmt != "json":
        # Names from the target are made visible once here; the JSON report keeps them whole
        # (JSON escapes every control character and, ASCII-only, every direction override).
        from gilty.report.labels import displayed

        result = displayed(result)
    if options is not None and fmt in PICTURE_FORMATS:
        return function(result, options=options)
    return function(result)


def write(result, fmt: str, path: Optional[str], options=None) -> None:
    """Render ``result`` as ``fmt`` to ``path`` (stdout when None).

    A recording is rendered inside the write phase (rendering is most of the wait: a Ctrl-C then
    does not lose the report either), and its JSON report is written as it is rendered, a process at
    a time (its raw recording is most of a long recording's memory); to a file that is still whole
    or absent (``emit``).
    """
    if kind_of(result) != "recording":
        emit(render(result, fmt, options), path)
        return
    from gilty.report.output_file import WritePhase

    with WritePhase(path):
        if fmt == "json" and path is not None:
            from gilty.report.recording import json as json_report

            emit(json_report.render_recording_chunks(result), path)
            return
        emit(render(result, fmt, options), path)


def emit(text, path: Optional[str]) -> None:
    """Print to stdout, or write ``path`` and say so on stderr. ``bytes`` (pprof) are written as they are,
    and never to a terminal.

    No control or direction character gets through text (newlines and tabs aside): whatever a
    renderer took from the target unescaped is written out visibly here.
    """
    binary = isinstance(text, bytes)
    if not binary:
        from gilty.report.labels import terminal_text

        if isinstance(text, str):
            text = terminal_text(text)
        elif path is None:  # pieces (a streamed report): stdout gets them whole, as before
            text = terminal_text("".join(text))
        else:
            text = (terminal_text(piece) for piece in text)
    if path is None:
        if binary:
            if sys.stdout.isatty():
                raise CommandError("this format is binary; write it to a file with -o FILE, or pipe stdout elsewhere")
            sys.stdout.buffer.write(text)
        else:
            sys.stdout.write(text)
        sys.stdout.flush()
        return
    from gilty.report import output_file

    # Whole or absent, never through a link someone else planted (output_file's docstring).
    with output_file.WritePhase(path):
        output_file.write_file(path, [text] if isinstance(text, (str, bytes)) else text)
        output_file.WritePhase.written()
    print(f"gilty: wrote {path}", file=sys.stderr)
