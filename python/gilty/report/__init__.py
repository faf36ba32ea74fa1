"""Output formats: a registry from format name to renderer, and from file extension to format.

Every renderer takes a ``Recording`` and returns the whole output as text, built only through
the Session reading API (``tids``, ``stack_counts``, ``runs``, ``stack``, ``pass_start/end``)
and ``gilty.sampling.analysis.summarise``. Renderer modules are imported when used, so ``gilty top``
does not pay for the HTML template.
"""

from __future__ import annotations

import importlib
import sys

TYPE_CHECKING = False

from gilty._errors import CommandError, UsageError

if TYPE_CHECKING:  # annotations only: `gilty dump` imports a renderer without the session or `typing`
    from typing import Callable, Optional

    from gilty.sampling.session import Recording

# Format name -> ("module:function" under gilty.report, what it is, for docs and errors).
FORMATS = {
    "text": (":_render_text", "the console summary"),
    "json": (":_render_json", "the analysed JSON report, with the recording for `gilty report`"),
    "speedscope": ("speedscope:render", "speedscope profile, one per process and thread"),
    "collapsed": ("collapsed:render", "collapsed stacks for flamegraph.pl / inferno / speedscope"),
    "svg": ("flamegraph_svg:render", "a flame graph drawn by inferno"),
    "chrome": ("chrome_trace:render", "Chrome trace events for Perfetto / chrome://tracing"),
    "html": ("html_report:render", "one self-contained interactive HTML page"),
    "pprof": ("pprof:render", "gzipped pprof profile.proto with state/pid/thread labels, for pprof and Pyroscope"),
}
FORMAT_NAMES = tuple(FORMATS)
# Formats that draw stacks: they take ``report.pictures.PictureOptions`` (--idle, --merge-workers).
PICTURE_FORMATS = ("speedscope", "collapsed", "svg", "html")

# Longest suffix first: `x.speedscope.json` is speedscope, not json.
EXTENSIONS = (
    (".pb.gz", "pprof"),
    (".pprof", "pprof"),
    (".speedscope.json", "speedscope"),
    (".trace.json", "chrome"),
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
        if fmt not in FORMATS:
            raise UsageError(f"unknown format {fmt!r}; choose one of {', '.join(FORMAT_NAMES)}")
        return fmt
    if path is None:
        return "text"
    found = format_for_path(path)
    if found is None:
        known = " ".join(ext for ext, _ in EXTENSIONS)
        raise UsageError(f"cannot tell the format of {path!r} from its extension ({known}); add --format FORMAT")
    return found


def renderer(fmt: str) -> Callable[[Recording], str]:
    spec, _ = FORMATS[fmt]
    module, function = spec.split(":")
    if not module:
        return globals()[function]
    return getattr(importlib.import_module(f"gilty.report.{module}"), function)


def _render_text(recording: Recording) -> str:
    from gilty.report import console

    return console.render_recording(recording)


def _render_json(recording: Recording) -> str:
    from gilty.report import json_report

    return json_report.render_recording(recording)


def render(recording: Recording, fmt: str, options=None) -> str:
    """``options`` (``report.pictures.PictureOptions``) reach the formats that draw stacks."""
    if fmt != "json":
        # Names from the target are made visible once here; the JSON report keeps them whole
        # (JSON escapes every control character and, ASCII-only, every direction override).
        from gilty.report.labels import displayed

        recording = displayed(recording)
    if options is not None and fmt in PICTURE_FORMATS:
        return renderer(fmt)(recording, options=options)
    return renderer(fmt)(recording)


def write(recording: Recording, fmt: str, path: Optional[str], options=None) -> None:
    """Render ``recording`` as ``fmt`` to ``path`` (stdout when None).

    The JSON report is written as it is rendered, a process at a time (its raw recording is most of a
    long recording's memory); to a file that is still whole or absent (``emit``).
    """
    from gilty.report.output_file import WritePhase

    with WritePhase(path):  # rendering is most of the wait: a Ctrl-C then does not lose the report either
        if fmt == "json" and path is not None:
            from gilty.report import json_report

            emit(json_report.render_recording_chunks(recording), path)
            return
        emit(render(recording, fmt, options), path)


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
