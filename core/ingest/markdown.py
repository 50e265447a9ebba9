"""Markdown structure for chunking: where sections start and the heading path of each.

Only what the chunker needs, found with a few regular expressions over the whole
text (no Markdown library per file: parsing a full AST would cost more than the
rest of ingestion together). Recognised: ATX headings (`# Title`, up to six `#`),
setext headings (a line underlined with `===` or `---`), fenced code blocks
(``` or ~~~, whose `#` lines are *not* headings) and a leading YAML front-matter
block.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

# Patterns anchored on a literal "\n" (searched on "\n" + text) let the regex
# engine skip ahead with a fast literal scan instead of trying `^` at every offset.
_ATX_START_RE = re.compile(r"\n(?=[ ]{0,3}#)")
_ATX_LINE_RE = re.compile(r"[ ]{0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*(?:[ \t]#+[ \t]*)?")
_UNDERLINE_RE = re.compile(r"\n[ ]{0,3}(=+|-{2,})[ \t]*(?=\n|\Z)")
_SETEXT_TEXT_RE = re.compile(r"[ ]{0,3}[^ \t\n#>\-*+|=]")
_FENCE_RE = re.compile(r"\n[ ]{0,3}(`{3,}|~{3,})[^\n]*\n.*?(?:\n[ ]{0,3}\1[ \t]*(?=\n|\Z)|\Z)", re.S)
_FRONT_MATTER_RE = re.compile(r"\A---[ \t]*\n.*?^(?:---|\.\.\.)[ \t]*$", re.M | re.S)
_INLINE_MARKUP_RE = re.compile(r"[*_`]+")
_NON_SPACE_RE = re.compile(r"\S")

HEADING_SEPARATOR = " > "


@dataclass(frozen=True, slots=True)
class Section:
    """Text from `start` up to the next section's start, under heading path `path`."""

    start: int
    path: tuple[str, ...]
    has_body: bool  # False when the section is only its heading line


def _clean_title(raw: str) -> str:
    return _INLINE_MARKUP_RE.sub("", raw).strip()


def sections(text: str) -> list[Section]:
    """Split Markdown `text` into heading sections (the first may have an empty path)."""
    has_hash = "#" in text
    underlines = list(_UNDERLINE_RE.finditer(text))
    if not has_hash and not underlines:
        return [Section(0, (), True)]
    nl_text = "\n" + text  # offsets in nl_text are offsets in text + 1
    skip: list[tuple[int, int]] = []
    if "```" in text or "~~~" in text:
        skip.extend((a - 1, b - 1) for a, b in (m.span() for m in _FENCE_RE.finditer(nl_text)))
    fm = _FRONT_MATTER_RE.match(text) if text.startswith("---") else None
    if fm:
        skip.append(fm.span())
    skip.sort()
    skip_starts = [a for a, _ in skip]

    def skipped(pos: int) -> bool:
        i = bisect_right(skip_starts, pos) - 1
        return i >= 0 and pos < skip[i][1]

    found: list[tuple[int, int, int, str]] = []  # (line start, body start, level, title)
    if has_hash:
        for m in _ATX_START_RE.finditer(nl_text):
            line_start = m.start()  # the "\n" in nl_text == the line start in text
            line_end = text.find("\n", line_start)
            if line_end < 0:
                line_end = len(text)
            h = _ATX_LINE_RE.fullmatch(text, line_start, line_end)
            if h is None or (skip and skipped(line_start)):
                continue
            found.append((line_start, line_end, len(h.group(1)), _clean_title(h.group(2) or "")))
    for m in underlines:
        under = m.start()  # the "\n" before the underline ends the heading text line
        line_start = text.rfind("\n", 0, under) + 1
        line = text[line_start:under]
        if not line.strip() or not _SETEXT_TEXT_RE.match(line) or (skip and skipped(line_start)):
            continue
        level = 1 if m.group(1).startswith("=") else 2
        found.append((line_start, m.end(), level, _clean_title(line)))
    if not found:
        return [Section(0, (), True)]
    found.sort()
    out: list[Section] = []
    if found[0][0] > 0:
        out.append(Section(0, (), _NON_SPACE_RE.search(text, 0, found[0][0]) is not None))
    stack: list[tuple[int, str]] = []
    for i, (start, body_start, level, title) in enumerate(found):
        if out and out[-1].start == start:
            continue
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title or "(untitled)"))
        next_start = found[i + 1][0] if i + 1 < len(found) else len(text)
        has_body = _NON_SPACE_RE.search(text, body_start, max(body_start, next_start)) is not None
        out.append(Section(start, tuple(t for _, t in stack), has_body))
    return out


def common_path(paths: list[tuple[str, ...]]) -> tuple[str, ...]:
    """The longest heading path shared by every path in `paths`."""
    if not paths:
        return ()
    first = paths[0]
    n = len(first)
    for p in paths[1:]:
        n = min(n, len(p))
        for i in range(n):
            if p[i] != first[i]:
                n = i
                break
    return first[:n]
