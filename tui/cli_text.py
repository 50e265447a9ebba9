"""Terminal safety for every human-readable line the CLI prints.

File names, note text, chunk text, base and group names and error messages that
quote them are *data*: a note holding ``ESC ] 0 ; title BEL`` must not retitle the
terminal, ``ESC [ 2 J`` must not clear it, and a newline in a file name must not
forge a progress line. `printable` turns every character a terminal could act on
into a visible escape (``\\x1b``, ``\\n``, ``\\u202e``) and leaves all other text,
including non-ASCII letters and emoji, as it is. JSON output is not passed through
here: it stays exact (``json.dumps`` escapes what it must).

What counts as dangerous:

* C0 controls (U+0000–U+001F, including TAB, CR, LF, ESC, BEL) and DEL (U+007F);
* C1 controls (U+0080–U+009F): UTF-8 terminals act on U+009B as CSI, U+009D as OSC;
* line and paragraph separators (U+2028, U+2029) and the bidirectional controls
  (U+200E/F, U+202A–U+202E, U+2066–U+2069) that reorder what a reader sees;
* lone surrogates (U+D800–U+DFFF), which would make the write itself fail.
"""

from __future__ import annotations

import re
import unicodedata

_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every terminal-active character shown as a visible escape.

    Idempotent on its own output only up to backslashes (a literal backslash is
    left alone so that Windows paths stay readable). Cheap on clean text: one
    regex search and the original string back.
    """
    if not isinstance(text, str):
        text = str(text)
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_escape, text)


def cell_width(text: str) -> int:
    """How many terminal columns `text` takes: East Asian wide and fullwidth characters (CJK,
    most emoji) take two, combining marks, format characters (ZWJ, variation selectors) and
    other zero-width ones none. The same figures as `rich.cells.cell_len` for such text, without
    importing rich: a listing must stay cheap to start (tests/cli/test_cli_imports.py)."""
    if text.isascii():
        return len(text)
    width, joined = 0, False
    for ch in text:
        if joined:  # what a zero-width joiner glues on (👩‍💻) shares its cells with what came before
            joined = False
            continue
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf") or ch == "\u200b":
            joined = ch == "\u200d"
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


def pad(text: str, width: int) -> str:
    """`text` followed by spaces up to `width` display columns (never cut)."""
    return text + " " * max(0, width - cell_width(text))


def say(text: str = "") -> None:
    """Print one human-readable line to stdout, escaped."""
    import sys

    sys.stdout.write(printable(text) + "\n")


def warn(text: str) -> None:
    """Print one human-readable line to stderr, escaped."""
    import sys

    sys.stderr.write(printable(text) + "\n")
