"""Names from the target made safe to show (gilty.report.labels): what is written out, what is kept."""

from __future__ import annotations

import random
import re

from gilty.report import labels
from gilty.report.labels import terminal_text, visible

HIDDEN = re.compile(labels._HIDDEN_CHARS)
HIDDEN_IN_TEXT = re.compile(labels._HIDDEN_IN_TEXT)


def _reference(regex: re.Pattern, text: str) -> str:
    return regex.sub(labels._escape, text)


def test_every_hidden_character_is_one_isprintable_refuses():
    # visible() skips its regex for a text str.isprintable() accepts: that is only right if no
    # character of the class is printable, in this interpreter's Unicode tables.
    hidden = [c for c in range(0x110000) if HIDDEN.match(chr(c))]
    assert len(hidden) == 32 + 33 + 1 + 2 + 7 + 4 + 1 + 2048
    printable = [hex(c) for c in hidden if chr(c).isprintable()]
    assert not printable


def test_controls_and_direction_marks_are_written_out():
    assert visible("a\x1b[31mb") == "a\\x1b[31mb"
    assert visible("evil\u202etxt.py") == "evil\\u202etxt.py"
    assert visible("x\ny\tz\r") == "x\\ny\\tz\\r"
    assert visible("bad\udcffname") == "bad\\udcffname"
    assert visible("\ufeffbom\u2028") == "\\ufeffbom\\u2028"


def test_printable_and_other_unprintable_characters_are_kept():
    # Not printable to Python, yet nothing a terminal acts on: a no-break space, an ideographic
    # space, an unassigned code point; and printable ones of every width.
    for text in ("a\u00a0b", "\u3000name", "x\U000e0080y", "Функция", "𝒇𝒖𝒏𝒄", "🐍.py", "plain"):
        assert visible(text, 0) == text


def test_terminal_text_keeps_newlines_and_tabs():
    assert terminal_text("one\ttwo\nthree\n") == "one\ttwo\nthree\n"
    assert terminal_text("one\x1b]0;title\x07\n\u202e") == "one\\x1b]0;title\\x07\n\\u202e"


def test_same_as_the_class_on_random_text():
    alphabet = [chr(c) for c in (*range(0, 0x30), *range(0x7c, 0xa3), 0x61c, 0x200d, 0x200e, 0x2027, 0x2028,
                                 0x202e, 0x202f, 0x2065, 0x2066, 0x3000, 0xd7ff, 0xd800, 0xdfff, 0xe000, 0xfeff,
                                 0x1f40d, 0xe0080)]
    rng = random.Random(20)
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))
        assert visible(text, 0) == _reference(HIDDEN, text), repr(text)
        assert terminal_text(text) == _reference(HIDDEN_IN_TEXT, text), repr(text)


def test_long_names_are_cut():
    assert visible("x" * 500) == "x" * 199 + "…"
    assert visible("x" * 500, 0) == "x" * 500
