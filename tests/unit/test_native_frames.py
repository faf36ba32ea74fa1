"""C frames of `record --native` as the reports name them (gilty/sampling/native_frames.py)."""

from __future__ import annotations

from gilty.sampling.native_frames import frame_text, native_parts

LIB = "native_chain.cpython-312-x86_64-linux-gnu.so"


def test_source_line_splits_from_library():
    assert native_parts(f"{LIB}//src/ext/native_chain.c:14") == (LIB, "/src/ext/native_chain.c", 14)
    assert native_parts(f"{LIB}/ext/a:b.c:7") == (LIB, "ext/a:b.c", 7)
    assert native_parts(LIB) == (LIB, None, None)
    assert native_parts("") == ("", None, None)
    # Not a source line: the library alone.
    assert native_parts(f"{LIB}/x.c:") == (LIB, None, None)


def test_text_with_and_without_line_tables():
    offset_line = -2 - 0x1181
    assert frame_text("inner_spin", f"{LIB}//src/ext/native_chain.c:14", offset_line) == "inner_spin (/src/ext/native_chain.c:14)"
    assert (
        frame_text("inner_spin", f"{LIB}//src/ext/native_chain.c:14", offset_line, short=True) == "inner_spin (native_chain.c:14)"
    )
    assert frame_text("inner_spin", LIB, offset_line) == f"inner_spin ({LIB}+0x1181)"
    assert frame_text(f"{LIB}+0x1181", LIB, offset_line) == f"{LIB}+0x1181"
    assert frame_text("[unknown]", "", -2) == "[unknown]"
    assert frame_text("spin", "/app/x.py", 20, short=True) == "spin (x.py:20)"
    assert frame_text("spin", "/app/x.py", 20) == "spin (/app/x.py:20)"


def test_pictures_and_no_lines():
    from gilty.report.pictures import FrameNames
    from gilty.report.recording.collapsed import _whole_path

    with_line = ("inner_spin", f"{LIB}//src/ext/native_chain.c:14", -2 - 0x1181)
    without = ("inner_spin", LIB, -2 - 0x1181)
    python = ("spin", "/app/x.py", 20)
    names = FrameNames([with_line, without, python])
    assert names.short(with_line) == "inner_spin (native_chain.c:14)"
    assert names.full(with_line) == "inner_spin (/src/ext/native_chain.c:14)"
    assert names.short(without) == f"inner_spin ({LIB}+0x1181)"
    assert names.short(python) == "spin (x.py:20)"
    # --no-lines: a C frame's source line goes as a Python frame's does; without one it stays.
    no_lines = FrameNames([with_line, without, python], lines=False)
    assert no_lines.short(with_line) == "inner_spin (native_chain.c)"
    assert no_lines.short(without) == f"inner_spin ({LIB}+0x1181)"
    assert _whole_path(with_line) == "inner_spin (/src/ext/native_chain.c)"
    assert _whole_path(without) == f"inner_spin ({LIB})"
