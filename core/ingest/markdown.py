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
from dataclasses import dataclass

# One scan finds every line that can matter (ATX heading, fence, setext underline);
# anchoring on a literal "\n" (searched in "\n" + text) lets the regex engine skip
# ahead with a fast literal search instead of trying `^` at every offset.
_CANDIDATE_RE = re.compile(r"\n(?=[ ]{0,3}(?:#|```|~~~|=+[ \t]*(?:\n|\Z)|-{2,}[ \t]*(?:\n|\Z)))")
_ATX_LINE_RE = re.compile(r"[ ]{0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*(?:[ \t]#+[ \t]*)?")
_FENCE_LINE_RE = re.compile(r"[ ]{0,3}(`{3,}|~{3,})(.*)")
_SETEXT_TEXT_RE = re.compile(r"[ ]{0,3}[^ \t\n#>\-*+|=`~]")
_FRONT_MATTER_RE = re.compile(r"\A---[ \t]*\n.*?^(?:---|\.\.\.)[ \t]*$", re.MULTILINE | re.DOTALL)
_INLINE_MARKUP_RE = re.compile(r"[*_`]+")
_NON_SPACE_RE = re.compile(r"\S")

HEADING_SEPARATOR = " > "


@dataclass(frozen=True, slots=True)
class Section:
    """Text from `start` up to the next section's start, under heading path `path`."""

    start: int
    path: tuple[str, ...]
    has_body: bool  # False when the section is only its heading line
    body_start: int = -1  # end of the heading line(s); -1 when there is no heading


def _clean_title(raw: str) -> str:
    if "*" in raw or "_" in raw or "`" in raw:
        raw = _INLINE_MARKUP_RE.sub("", raw)
    return raw.strip()


def sections(text: str) -> list[Section]:
    """Split Markdown `text` into heading sections (the first may have an empty path)."""
    begin = 0
    if text.startswith("---"):
        fm = _FRONT_MATTER_RE.match(text)
        if fm:
            begin = fm.end()
    found: list[tuple[int, int, int, str]] = []  # (line start, body start, level, title)
    fence: str | None = None  # the opening fence while inside a fenced code block
    n = len(text)
    for m in _CANDIDATE_RE.finditer("\n" + text, begin):
        line_start = m.start()  # the "\n" at i in "\n" + text is the line starting at i in text
        line_end = text.find("\n", line_start)
        if line_end < 0:
            line_end = n
        first = text[line_start : line_start + 4].lstrip(" ")[:1]
        if first in "`~":
            f = _FENCE_LINE_RE.fullmatch(text, line_start, line_end)
            if f is None:
                continue
            marker = f.group(1)
            if fence is None:
                if not (marker[0] == "`" and "`" in f.group(2)):  # CommonMark: no backtick in the info string
                    fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence) and not f.group(2).strip():
                fence = None
            continue
        if fence is not None:
            continue
        if first == "#":
            h = _ATX_LINE_RE.fullmatch(text, line_start, line_end)
            if h is not None:
                found.append((line_start, line_end, len(h.group(1)), _clean_title(h.group(2) or "")))
            continue
        # A setext underline: the previous line is the heading text.
        if line_start == 0:
            continue
        prev_start = text.rfind("\n", 0, line_start - 1) + 1
        if prev_start < begin:
            continue
        line = text[prev_start : line_start - 1]
        if not line.strip() or not _SETEXT_TEXT_RE.match(line):
            continue
        if found and found[-1][0] == prev_start:
            continue
        found.append((prev_start, line_end, 1 if first == "=" else 2, _clean_title(line)))
    if not found:
        return [Section(0, (), True)]
    out: list[Section] = []
    if found[0][0] > 0:
        out.append(Section(0, (), _NON_SPACE_RE.search(text, 0, found[0][0]) is not None))
    stack: list[tuple[int, str]] = []
    for i, (start, body_start, level, title) in enumerate(found):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title or "(untitled)"))
        next_start = found[i + 1][0] if i + 1 < len(found) else n
        has_body = _NON_SPACE_RE.search(text, body_start, max(body_start, next_start)) is not None
        out.append(Section(start, tuple(t for _, t in stack), has_body, body_start))
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
