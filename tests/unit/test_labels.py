"""Names from the target made safe to show (gilty._visible, used by gilty.report.labels): what is
written out, what is kept."""

from __future__ import annotations

import random
import re
import unicodedata

from gilty import _visible as labels
from gilty.report.labels import terminal_text, visible

HIDDEN = re.compile(labels._HIDDEN_CHARS)
HIDDEN_IN_TEXT = re.compile(labels._HIDDEN_IN_TEXT)
# Characters that act, or show as nothing: controls, format characters, separators, surrogates.
HIDDEN_CATEGORIES = {"Cc", "Cf", "Zl", "Zp", "Cs"}


def _reference(regex: re.Pattern, text: str) -> str:
    return regex.sub(labels._escape, text)


def test_no_hidden_character_is_printable_ascii():
    # visible() skips its regex for a printable ASCII text: that is only right if no character of the
    # class is one.
    assert [hex(c) for c in range(0x80) if HIDDEN.match(chr(c))] == [hex(c) for c in (*range(0x20), 0x7F)]


def test_every_control_format_and_separator_character_is_hidden():
    # Issue 30: zero-width and tag characters passed, so "Main\u200bThread" looked like "MainThread".
    missed = [hex(c) for c in range(0x110000) if unicodedata.category(chr(c)) in HIDDEN_CATEGORIES and not HIDDEN.match(chr(c))]
    assert not missed


def test_controls_and_direction_marks_are_written_out():
    assert visible("a\x1b[31mb") == "a\\x1b[31mb"
    assert visible("evil\u202etxt.py") == "evil\\u202etxt.py"
    assert visible("x\ny\tz\r") == "x\\ny\\tz\\r"
    assert visible("bad\udcffname") == "bad\\udcffname"
    assert visible("\ufeffbom\u2028") == "\\ufeffbom\\u2028"


def test_printable_and_other_unprintable_characters_are_kept():
    # Not printable to Python, yet nothing a terminal acts on: a no-break space, an ideographic
    # space, an unassigned code point; and printable ones of every width.
    for text in ("a\u00a0b", "\u3000name", "x\U000f0080y", "Функция", "𝒇𝒖𝒏𝒄", "🐍.py", "plain", "é\u0301"):
        assert visible(text, 0) == text


def test_zero_width_tag_and_selector_characters_are_written_out():
    # Issue 30: each of these shows as nothing, so a name holding one passes for another.
    assert visible("Main\u200bThread") == "Main\\u200bThread"
    assert visible("a\u200db\u2060c\u200c") == "a\\u200db\\u2060c\\u200c"
    assert visible("tag\U000e0041\U000e007f") == "tag\\U000e0041\\U000e007f"
    assert visible("soft\xadhyphen") == "soft\\xadhyphen"
    # Printable to Python, yet drawn as nothing: variation selectors and fillers.
    assert visible("Main\ufe0fThread") == "Main\\ufe0fThread"
    assert visible("x\U000e0100\u3164\u034f") == "x\\U000e0100\\u3164\\u034f"
    assert terminal_text("row \u200b\n\ufe0f\n") == "row \\u200b\n\\ufe0f\n"


def test_terminal_text_keeps_newlines_and_tabs():
    assert terminal_text("one\ttwo\nthree\n") == "one\ttwo\nthree\n"
    assert terminal_text("one\x1b]0;title\x07\n\u202e") == "one\\x1b]0;title\\x07\n\\u202e"


def test_same_as_the_class_on_random_text():
    alphabet = [
        chr(c)
        for c in (
            *range(0, 0x30),
            *range(0x7C, 0xA3),
            0x61C,
            0x200D,
            0x200E,
            0x2027,
            0x2028,
            0x202E,
            0x202F,
            0x2065,
            0x2066,
            0x3000,
            0xD7FF,
            0xD800,
            0xDFFF,
            0xE000,
            0xFEFF,
            0x1F40D,
            0xE0080,
            0x200B,
            0xFE0F,
            0x3164,
            0xE0041,
            0xE0100,
            0xF0080,
            0xE9,
        )
    ]
    rng = random.Random(20)
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))
        assert visible(text, 0) == _reference(HIDDEN, text), repr(text)
        assert terminal_text(text) == _reference(HIDDEN_IN_TEXT, text), repr(text)


def test_long_names_are_cut():
    assert visible("x" * 500) == "x" * 199 + "…"
    assert visible("x" * 500, 0) == "x" * 500
