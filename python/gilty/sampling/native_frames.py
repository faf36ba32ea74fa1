"""C frames of `gilty record --native` among a recording's frames.

A frame is ``(function, file, line)``; a C frame has ``file`` the library's base name and ``line``
``-2 - offset`` (a Python frame's line is at least -1, its "no line"), its offset being its function's start in
the library, or its own address there when the library has no symbol for it (then ``function`` is
``library+0xOFFSET``; ``[unknown]`` with ``file`` empty for an address in no file). Where the library
has DWARF line tables, ``file`` is ``library/source-path:line`` (a base name holds no ``/``), so a
function's frames at different source lines stay apart, as Python frames do.
"""

from __future__ import annotations

from typing import Optional


def is_native(line) -> bool:
    return line is not None and line <= -2


def native_offset(line: int) -> int:
    return -2 - line


def native_parts(file) -> tuple:
    """``(library, source file or None, source line or None)`` of a C frame's ``file``."""
    library, slash, rest = str(file or "").partition("/")
    if not slash:
        return library, None, None
    source, _, line = rest.rpartition(":")
    if not source or not line.isdigit():
        return library, None, None
    return library, source, int(line)


def frame_text(function, file, line, short: bool = False) -> str:
    """``function (file:line)``; a C frame ``function (source.c:line)`` where its library has line
    tables, else ``function (library+0xOFFSET)`` as `gilty dump --native` shows it, or its label alone
    when it has no symbol. ``short``: files by their base names."""
    if is_native(line):
        library, source, source_line = native_parts(file)
        if source is not None:
            return f"{function} ({source.rsplit('/', 1)[-1] if short else source}:{source_line})"
        if not library or str(function).startswith(f"{library}+0x"):
            return str(function)
        return f"{function} ({library}+{native_offset(line):#x})"
    if not file:
        # A stand-in with no place, such as "(inner frames moving)": its name alone.
        return str(function)
    if short:
        file = str(file or "").rsplit("/", 1)[-1]
    return f"{function} ({file}:{line})"


# Why a sample kept its Python stack alone (native::record::NativeCounts), as the report says it.
MISSING_REASONS = (
    ("native_missing_moved", "the Python stack moved between two reads"),
    ("native_missing_no_sample", "no kernel sample between two equal reads"),
    ("native_missing_unmatched", "the C stack did not match the Python one"),
)


def native_stacks_line(errors: dict) -> Optional[str]:
    """The report's line on `--native`: samples joined, those without C frames by why, threads with no
    Python stack given their C stack, kernel samples lost. None for a recording without `--native`."""
    if "native_matched" not in errors:
        return None
    missing = int(errors.get("native_missing", 0))
    why = [f"{int(errors[key])} {text}" for key, text in MISSING_REASONS if errors.get(key)]
    without = f"{missing} without" + (f" ({', '.join(why)})" if why else "")
    bare = int(errors.get("native_bare", 0))
    return (
        f"native stacks: {errors['native_matched']} samples with their C frames "
        f"({errors['native_partial']} cut short at [unknown]), {without}; "
        + (f"{bare} samples of threads without a Python stack given their C stack; " if bare else "")
        + f"{errors['native_lost']} kernel samples lost"
    )
