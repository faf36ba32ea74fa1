"""C frames of `gilty record --native` among a recording's frames.

A frame is ``(function, file, line)``; a C frame has ``file`` the library's base name and ``line``
``-2 - offset`` (a Python frame's line is at least -1, its "no line"), its offset being its function's start in
the library, or its own address there when the library has no symbol for it (then ``function`` is
``library+0xOFFSET``; ``[unknown]`` with ``file`` empty for an address in no file).
"""

from __future__ import annotations


def is_native(line) -> bool:
    return line is not None and line <= -2


def native_offset(line: int) -> int:
    return -2 - line


def frame_text(function, file, line) -> str:
    """``function (file:line)``; a C frame ``function (library+0xOFFSET)`` as `gilty dump --native`
    shows it, or its label alone when it has no symbol."""
    if is_native(line):
        if not file or str(function).startswith(f"{file}+0x"):
            return str(function)
        return f"{function} ({file}+{native_offset(line):#x})"
    return f"{function} ({file}:{line})"
