"""The one escaper of text a target chose, for every room that shows it.

Function, file, thread and module names, command lines and executable paths come from the target
and may hold ESC, BEL, newlines, right-to-left overrides, zero-width joiners or tag characters.
``visible`` writes every such character out (``\\x1b``, ``\\n``, ``\\u200b``, ``\\U000e0041``);
the report layer (``gilty.report.labels``), `gilty serve`'s metrics and gilty's own error lines
all go through it. It lives outside the report layer so that capabilities may use it too.
"""

from __future__ import annotations

# A longer name (a generated function, a 10 kB file name) is cut: a name is for finding, not reading.
MAX_NAME_CHARS = 200

# Characters shown as nothing, though Python counts them printable: combining grapheme joiner,
# Hangul and Mongolian fillers and selectors, variation selectors. "Main\ufe0fThread" would pass
# for "MainThread" (the rest of Unicode's default-ignorable code points are Cf or unassigned).
_PRINTABLE_IGNORABLE = r"\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\ufe00-\ufe0f\uffa0\U000e0100-\U000e01ef"
# Characters a terminal or a browser acts on instead of showing, or shows as nothing: C1 controls
# and DEL; every format character (Cf: soft hyphen, bidirectional overrides, embeddings, isolates
# and marks, zero-width space and joiners, word joiner, invisible operators, the byte-order mark,
# the tag characters that spell hidden text, and the unassigned rest of U+E0000-U+E0FFF); line and
# paragraph separators; lone surrogates (an undecodable file name); the printable ignorables.
_OTHER_HIDDEN = (
    r"\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u2028-\u202e"
    r"\u2060-\u206f\ud800-\udfff\ufeff\ufff0-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    r"\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff" + _PRINTABLE_IGNORABLE
)
_HIDDEN_CHARS = r"[\x00-\x1f" + _OTHER_HIDDEN + "]"
# The same, but keeping the newline and tab of a whole rendered text (``terminal_text``).
_HIDDEN_IN_TEXT = r"[\x00-\x08\x0b-\x1f" + _OTHER_HIDDEN + "]"
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_compiled: dict = {}


def _regex(pattern: str):
    # Compiled on first need: the two classes cost ~9 M instructions to compile, a tenth of a whole
    # `gilty dump`, and a printable ASCII text (most names) never needs one.
    regex = _compiled.get(pattern)
    if regex is None:
        import re

        regex = _compiled[pattern] = re.compile(pattern)
    return regex


def _escape(match) -> str:
    ch = match.group()
    if ch in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _hidden_in(text: str) -> bool:
    """Whether ``text`` may hold a hidden character: every one is either a character str.isprintable()
    refuses (Cc, Cf, Zl, Zp, Cs, Cn) or a printable ignorable, none of them ASCII, so a printable
    ASCII text, the common case, costs two passes in C and no regex."""
    return not (text.isascii() and text.isprintable())


def visible(text, limit: int = MAX_NAME_CHARS) -> str:
    """``text`` with every control, format or direction character written out (``\\x1b``, ``\\n``,
    ``\\u202e``) and cut to ``limit`` characters: a name from the target, safe on one line of a
    terminal or page."""
    text = str(text)
    if _hidden_in(text):  # the class keeps the rest (a no-break space, say)
        text = _regex(_HIDDEN_CHARS).sub(_escape, text)
    if limit and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def terminal_text(text: str) -> str:
    """A whole rendered output with any control, format or direction character left in it written
    out (newlines and tabs kept): the last guard before text is written, for names no renderer
    passed through ``visible``."""
    if _hidden_in(text.replace("\n", "").replace("\t", "")):
        text = _regex(_HIDDEN_IN_TEXT).sub(_escape, text)
    return text
