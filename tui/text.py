"""The one boundary between user/document text and the screen.

Names of bases, groups and items, file names, note bodies, chunk text, error
messages, URLs and settings values are *data*: they are never parsed as Textual
or Rich markup (`[link=…]`, `[@click=app.quit]`, `[/]`) and never reach the
terminal as escape sequences. Every widget in `ktui.tui` gets such text through
this module:

* `clean(text)` makes a string safe to draw: ESC and the other C0/C1 control
  characters become visible pictures (`␛[31m` instead of a colour change),
  tabs become spaces, bidi overrides/isolates (which reorder what follows them)
  and lone surrogates (undecodable file names) are replaced, and runs of
  combining marks are capped so "zalgo" text keeps its line. With
  `one_line=True` line breaks become `⏎` so a label stays one row high.
* `literal(text, style)` returns a Textual `Content` of the cleaned text; a
  `Content` is drawn as is, so markup in it is just characters.
* `rich_literal(text, style)` is the same for the widgets that take Rich
  `Text` (tree labels, option prompts built piecewise).
* `assemble(*parts)` joins literal pieces and (text, style) pairs into one
  `Content`, for lines that mix our own styling with user text.

`tests/tui/test_text_boundary.py` checks the source of `ktui.tui` so that no
widget is handed an f-string or a bare `str` that could hold user text.
"""

from __future__ import annotations

import re
import unicodedata

from rich.text import Text
from textual.content import Content

__all__ = ["assemble", "clean", "literal", "rich_literal", "shorten"]

_ANSI_MAX_COMBINING = 2  # combining marks kept after one base character

# Bidi embeddings, overrides and isolates (Trojan-source characters): dropped.
_BIDI_CONTROLS = {0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069}
_LINE_BREAKS = {"\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"}
_BREAK_RE = re.compile(r"\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _picture(ch: str) -> str:
    code = ord(ch)
    if code < 0x20:
        return chr(0x2400 + code)  # ␀ … ␟ (ESC shows as ␛)
    if code == 0x7F:
        return "␡"
    return "�"  # C1 controls, lone surrogates


def _safe_char(ch: str) -> str:
    code = ord(ch)
    if ch == "\t":
        return "    "
    if code < 0x20 or 0x7F <= code < 0xA0:
        return _picture(ch)
    if code in _BIDI_CONTROLS:
        return ""
    if 0xD800 <= code <= 0xDFFF:
        return "�"
    return ch


def _clean_line(line: str) -> str:
    if line.isascii() and line.isprintable():
        return line  # the common case, fast
    out: list[str] = []
    combining = 0
    for ch in line:
        if unicodedata.combining(ch):
            combining += 1
            if combining > _ANSI_MAX_COMBINING:
                continue
        else:
            combining = 0
        out.append(_safe_char(ch))
    return "".join(out)


def clean(text: object, *, one_line: bool = False) -> str:
    """`text` (any object, str() of it) made safe to draw literally in a terminal."""
    s = text if isinstance(text, str) else str(text)
    lines = _BREAK_RE.split(s)
    cleaned = [_clean_line(line) for line in lines]
    return " ⏎ ".join(cleaned) if one_line else "\n".join(cleaned)


def shorten(text: str, limit: int) -> str:
    """At most `limit` characters, an ellipsis marking the cut (keeps huge texts cheap to lay out)."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def literal(text: object, style: str = "", *, one_line: bool = False) -> Content:
    """User or document text as a Textual `Content`: drawn literally, never parsed as markup."""
    return Content.styled(clean(text, one_line=one_line), style) if style else Content(clean(text, one_line=one_line))


def rich_literal(text: object, style: str = "", *, one_line: bool = False) -> Text:
    """The same as `literal` for widgets that take Rich `Text`."""
    return Text(clean(text, one_line=one_line), style=style)


def assemble(*parts: str | Content | tuple[str, str]) -> Content:
    """One `Content` from pieces: a `str` is literal text, `(text, style)` literal styled text,
    a `Content` is kept as is. Nothing is ever parsed as markup."""
    pieces: list[Content] = []
    for part in parts:
        if isinstance(part, Content):
            pieces.append(part)
        elif isinstance(part, tuple):
            pieces.append(literal(part[0], part[1]))
        else:
            pieces.append(literal(part))
    return Content("").join(pieces) if pieces else Content("")
