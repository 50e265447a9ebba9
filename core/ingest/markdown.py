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

_ATX_RE = re.compile(r"^[ ]{0,3}(#{1,6})[ \t]+(.+?)[ \t]*(?:[ \t]#+)?[ \t]*$|^[ ]{0,3}(#{1,6})[ \t]*$", re.M)
_SETEXT_RE = re.compile(r"^([ ]{0,3}[^ \t\n#>\-*+|].*)\n[ ]{0,3}(=+|-{2,})[ \t]*$", re.M)
_FENCE_RE = re.compile(r"^[ ]{0,3}(`{3,}|~{3,}).*?(?:^[ ]{0,3}\1[ \t]*$|\Z)", re.M | re.S)
_FRONT_MATTER_RE = re.compile(r"\A---[ \t]*\n.*?^(?:---|\.\.\.)[ \t]*$", re.M | re.S)
_INLINE_MARKUP_RE = re.compile(r"[*_`]+")

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
    if "#" not in text and "\n=" not in text and "\n-" not in text:
        return [Section(0, (), True)]
    skip: list[tuple[int, int]] = []
    if "```" in text or "~~~" in text:
        skip.extend(m.span() for m in _FENCE_RE.finditer(text))
    fm = _FRONT_MATTER_RE.match(text) if text.startswith("---") else None
    if fm:
        skip.append(fm.span())

    def skipped(pos: int) -> bool:
        return any(a <= pos < b for a, b in skip)

    found: list[tuple[int, int, int, str]] = []  # (line start, body start, level, title)
    if "#" in text:
        for m in _ATX_RE.finditer(text):
            if skipped(m.start()):
                continue
            hashes = m.group(1) or m.group(3)
            found.append((m.start(), m.end(), len(hashes), _clean_title(m.group(2) or "")))
    if "\n=" in text or "\n-" in text:
        for m in _SETEXT_RE.finditer(text):
            if skipped(m.start()) or skipped(m.end(1) + 1):
                continue
            # "text\n---" right after a non-blank line that itself continues a paragraph
            # is still a setext heading in CommonMark; we accept that simplification.
            level = 1 if m.group(2).startswith("=") else 2
            found.append((m.start(), m.end(), level, _clean_title(m.group(1))))
    if not found:
        return [Section(0, (), True)]
    found.sort()
    out: list[Section] = []
    if found[0][0] > 0:
        out.append(Section(0, (), bool(text[: found[0][0]].strip())))
    stack: list[tuple[int, str]] = []
    for i, (start, body_start, level, title) in enumerate(found):
        if out and out[-1].start == start:  # an ATX and a setext match on one line
            continue
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title or "(untitled)"))
        next_start = found[i + 1][0] if i + 1 < len(found) else len(text)
        has_body = bool(text[body_start:next_start].strip())
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
