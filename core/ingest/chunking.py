"""Split documents into chunks of at most `chunk_size` estimated tokens.

How a document is cut (a recursive splitter with greedy packing):

1. Markdown documents are first divided into heading sections; other documents
   are one section.
2. A unit that fits in `chunk_size` tokens is an *atom* and is never cut. A unit
   that does not fit is divided at the next finer level: sections → paragraphs
   (blank lines) → sentences and lines → words (whitespace) → tokens (only for a
   single "word" longer than a chunk, e.g. unspaced CJK text or a base64 blob).
   Word groups hold at most chunk_size - chunk_overlap tokens so the overlap fits
   in front of them. A heading line is never cut from the text right after it.
3. Atoms are packed greedily, in order, while the chunk stays within
   `chunk_size`. So chunks end at the coarsest boundary that lets them fill up,
   and a section that fits is kept whole when it does not fit the chunk's rest.
4. Each chunk after the first of a document starts with an overlap copied from
   the end of the previous chunk: the longest tail of at most `chunk_overlap`
   tokens that starts at a sentence boundary, else at a word, else at a token.
   The overlap shrinks when it would push the chunk over `chunk_size`, and it
   never spans a whole previous chunk. Chunks never cross documents (PDF pages,
   sheets, slides stay apart).
5. Documents over 2 × _BLOCK_CHARS characters are cut in blocks first (bounded
   memory); chunks do not cross blocks and heading paths carry over.

Sizes come from `core.ingest.tokens` (documented there): one prefix-sum array per
document gives the token count of any span in O(1), so the text is scanned a
constant number of times whatever the chunk size. Chunk texts are slices of the
document (stripped), so nothing is rewritten and no non-space character is lost.

Heading metadata: a chunk's `heading` is the deepest heading path ("Intro >
Setup") that contains all of the chunk's own text (its overlap prefix aside);
headings-only sections do not widen it. It is omitted when empty.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ktui.core.errors import ValidationError
from ktui.core.ingest import markdown
from ktui.core.ingest.tokens import (
    DENSE,
    SPACE,
    WORD,
    char_classes,
    estimate_tokens,
    starts_from_classes,
)
from ktui.core.models import Chunk, Document, ItemType

__all__ = ["MARKDOWN_CONTENT_TYPE", "Span", "chunk_documents", "estimate_tokens", "split_text"]

MARKDOWN_CONTENT_TYPE = "text/markdown"
"""Document.metadata["content_type"] value that turns on heading-aware chunking."""

PASS_THROUGH_KEYS = ("page", "sheet", "slide", "chapter", "title", "ocr", "ocr_confidence")
"""Document metadata copied to each of its chunks when present."""

_PARAGRAPH_RE = re.compile(r"\n[ \t\r\f\v]*\n\s*")
_SENTENCE_RE = re.compile(
    r"[.!?\u2026]+[\"'\u201d\u2019\u00bb)\]]*\s+"  # Latin-style terminator, then whitespace
    r"|[\u3002\uff01\uff1f\uff1b]+[\u300d\u300f\u201d\u2019)\uff09]*\s*"  # CJK terminators
    r"|\n\s*"  # line breaks (lists, code, verse)
)
_SECTION, _PARAGRAPH, _SENTENCE, _WORD = range(4)


@dataclass(frozen=True, slots=True)
class Span:
    """One chunk of a document: text[start:end] (stripped) holds `tokens` tokens."""

    start: int
    end: int
    tokens: int
    own_start: int  # where the chunk's new text begins (start + overlap)
    heading: tuple[str, ...]


_BLOCK_CHARS = 1 << 20
"""Documents longer than twice this are split in blocks of about this many characters
(at a paragraph, line or word boundary) so that memory stays bounded (~15 bytes per
character of a block) for a 100 MB spreadsheet as for a 4 KB note. Chunks do not
cross block boundaries and the first chunk of a block has no overlap."""


def split_text(text: str, chunk_size: int, chunk_overlap: int, *, markdown_aware: bool = False) -> list[Span]:
    """Cut one document's text into spans; see the module docstring for the rules."""
    _check_sizes(chunk_size, chunk_overlap)
    if not text or text.isspace():
        return []
    sections = markdown.sections(text) if markdown_aware else [markdown.Section(0, (), True)]
    if len(text) <= 2 * _BLOCK_CHARS:
        return _Splitter(text, chunk_size, chunk_overlap, sections).run()
    spans: list[Span] = []
    start = 0
    while start < len(text):
        end = _block_end(text, start)
        block = text[start:end]
        local = _rebase(sections, start, end)
        for s in _Splitter(block, chunk_size, chunk_overlap, local).run():
            spans.append(Span(s.start + start, s.end + start, s.tokens, s.own_start + start, s.heading))
        start = end
    return spans


def _block_end(text: str, start: int) -> int:
    """A cut near start + _BLOCK_CHARS at the best boundary available (never mid-word if avoidable)."""
    limit = start + _BLOCK_CHARS
    if len(text) - start <= 2 * _BLOCK_CHARS:
        return len(text)
    floor = start + _BLOCK_CHARS // 2
    for sep in ("\n\n", "\n", " "):
        cut = text.rfind(sep, floor, limit)
        if cut >= 0:
            return cut + len(sep)
    return limit


def _rebase(sections: list[markdown.Section], start: int, end: int) -> list[markdown.Section]:
    """The sections overlapping text[start:end], with offsets relative to `start`."""
    out: list[markdown.Section] = []
    for s in sections:
        if s.start >= end:
            break
        shifted = markdown.Section(max(s.start - start, 0), s.path, s.has_body,
                                   s.body_start - start if s.body_start >= start else -1)
        if s.start <= start:
            out = [shifted]  # the section already open when the block begins
        else:
            out.append(shifted)
    return out or [markdown.Section(0, (), True)]


def chunk_documents(
    documents: list[Document],
    *,
    chunk_size: int,
    chunk_overlap: int,
    item_id: str,
    item_type: ItemType | str,
    source: str,
) -> list[Chunk]:
    """Chunk every document of one item; `chunk_index` runs across all of them.

    Pure CPU and synchronous: call it through `asyncio.to_thread` from async code.
    Documents without text produce no chunks (an empty result is the caller's to judge).
    """
    _check_sizes(chunk_size, chunk_overlap)
    kind = item_type.value if isinstance(item_type, ItemType) else str(item_type)
    chunks: list[Chunk] = []
    for doc in documents:
        is_md = doc.metadata.get("content_type") == MARKDOWN_CONTENT_TYPE
        extra = {k: doc.metadata[k] for k in PASS_THROUGH_KEYS if doc.metadata.get(k) is not None}
        for span in split_text(doc.text, chunk_size, chunk_overlap, markdown_aware=is_md):
            meta = {
                "item_id": item_id,
                "item_type": kind,
                "source": source,
                "chunk_index": len(chunks),
                "token_count": span.tokens,
                **extra,
            }
            if span.heading:
                meta["heading"] = markdown.HEADING_SEPARATOR.join(span.heading)
            chunks.append(Chunk(text=doc.text[span.start : span.end].strip(), metadata=meta))
    return chunks


def _check_sizes(chunk_size: int, chunk_overlap: int) -> None:
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValidationError.field("chunk_size", "must be a positive integer")
    if not isinstance(chunk_overlap, int) or chunk_overlap < 0:
        raise ValidationError.field("chunk_overlap", "must be a non-negative integer")
    if chunk_overlap >= chunk_size:
        raise ValidationError.field("chunk_overlap", "must be smaller than chunk_size")


class _Splitter:
    """State for splitting one document (its token prefix sums and atoms)."""

    def __init__(self, text: str, size: int, overlap: int, sections: list[markdown.Section]):
        self.text = text
        self.size = size
        self.overlap = overlap
        self.classes = char_classes(text)
        self.starts = starts_from_classes(self.classes)
        self.total = int(np.count_nonzero(self.starts))
        self.cum: np.ndarray = np.empty(0, dtype=np.int64)  # filled only when the text must be cut
        self.sections = sections
        # Atoms as parallel lists: start, end, section index.
        self.a_start: list[int] = []
        self.a_end: list[int] = []
        self.a_section: list[int] = []

    def tokens(self, a: int, b: int) -> int:
        return int(self.cum[b] - self.cum[a])

    # --- atoms ------------------------------------------------------------

    def run(self) -> list[Span]:
        if self.total == 0:
            return []
        if self.total <= self.size:  # the common case for notes and small files: one chunk
            return [Span(0, len(self.text), self.total, 0, self._heading_of(range(len(self.sections))))]
        self.cum = np.zeros(len(self.text) + 1, dtype=np.int64)
        np.cumsum(self.starts, out=self.cum[1:])
        bounds = [s.start for s in self.sections] + [len(self.text)]
        for idx in range(len(self.sections)):
            self._unit(bounds[idx], bounds[idx + 1], _SECTION, idx)
        return self._pack()

    def _unit(self, a: int, b: int, level: int, section: int) -> None:
        n = self.tokens(a, b)
        if n == 0:
            return
        if n <= self.size:
            self.a_start.append(a)
            self.a_end.append(b)
            self.a_section.append(section)
            return
        if level == _WORD:
            self._words(a, b, section)
            return
        pattern = _PARAGRAPH_RE if level == _SECTION else _SENTENCE_RE
        # A heading line stays glued to the paragraph after it: a chunk that ends
        # with a bare heading (and a next chunk that starts without it) helps nobody.
        sec = self.sections[section]
        heading_end = sec.body_start if a == sec.start else -1
        cut = a
        for m in pattern.finditer(self.text, a, b):
            end = m.end()
            if end <= cut or end >= b:
                continue
            if heading_end >= 0:
                glue = m.start() <= heading_end + 1  # this cut would leave the heading alone
                heading_end = -1
                if glue:
                    continue
            self._unit(cut, end, level + 1, section)
            cut = end
        self._unit(cut, b, level + 1, section)

    def _words(self, a: int, b: int, section: int) -> None:
        """Greedy groups of whole words, falling back to token cuts inside a giant word.

        Groups hold at most chunk_size - chunk_overlap tokens so that the overlap
        still fits in front of each of them when they are packed.
        """
        cum, size = self.cum, self.size - self.overlap
        pos = a
        while self.tokens(pos, b) > size:
            # Largest e with tokens(pos, e) <= size; a token starts at e.
            e_max = int(np.searchsorted(cum, cum[pos] + size, side="right")) - 1
            spaces = np.flatnonzero(self.classes[pos + 1 : e_max] == SPACE)
            cut = e_max
            if spaces.size:
                cand = pos + 1 + int(spaces[-1]) + 1  # just after the last whitespace
                if self.tokens(pos, cand) > 0:
                    cut = cand
            self.a_start.append(pos)
            self.a_end.append(cut)
            self.a_section.append(section)
            pos = cut
        if self.tokens(pos, b) > 0:
            self.a_start.append(pos)
            self.a_end.append(b)
            self.a_section.append(section)

    # --- packing ----------------------------------------------------------

    def _pack(self) -> list[Span]:
        starts, ends = self.a_start, self.a_end
        size, cum = self.size, self.cum
        spans: list[Span] = []
        n_atoms = len(starts)
        i = 0
        tail: int | None = None  # start of the overlap copied from the previous chunk
        while i < n_atoms:
            own_start = starts[i]
            if tail is not None and self.tokens(tail, ends[i]) > size:
                prev = spans[-1]
                budget = size - self.tokens(own_start, ends[i])
                tail = self._tail(prev.start, prev.end, min(budget, self.overlap)) if budget > 0 else None
            chunk_start = tail if tail is not None else own_start
            base = int(cum[chunk_start])
            limit = base + size
            j = i + 1
            while j < n_atoms and cum[ends[j]] <= limit:
                j += 1
            end = ends[j - 1]
            spans.append(Span(chunk_start, end, int(cum[end]) - base, own_start, self._heading(i, j)))
            i = j
            tail = self._tail(chunk_start, end, self.overlap) if self.overlap and i < n_atoms else None
        return spans

    def _heading(self, i: int, j: int) -> tuple[str, ...]:
        if len(self.sections) == 1:
            return self.sections[0].path
        first, last = self.a_section[i], self.a_section[j - 1]
        if first == last:  # the usual case: the chunk sits inside one section
            return self.sections[first].path
        return self._heading_of(range(first, last + 1))

    def _heading_of(self, idxs: Iterable[int]) -> tuple[str, ...]:
        secs = [self.sections[k] for k in idxs]
        with_body = [s.path for s in secs if s.has_body] or [s.path for s in secs]
        return markdown.common_path(with_body)

    def _tail(self, lower: int, end: int, budget: int) -> int | None:
        """Start of the longest nice tail of text[lower:end] with at most `budget` tokens."""
        if budget <= 0:
            return None
        cum = self.cum
        target = int(cum[end]) - budget
        x0 = max(int(np.searchsorted(cum, target, side="left")), lower + 1)
        if x0 >= end:
            return None
        p: int | None = None
        # 1. a sentence (or line, paragraph, heading) boundary
        for m in _SENTENCE_RE.finditer(self.text, max(lower, x0 - 16), end):
            if m.end() >= x0:
                if m.end() < end:
                    p = m.end()
                break
        # 2. a word boundary
        if p is None:
            spaces = np.flatnonzero(self.classes[x0 - 1 : end - 1] == SPACE)
            if spaces.size:
                p = x0 + int(spaces[0])
        # 3. a token start inside a long word or unspaced (CJK) text; never inside
        #    punctuation runs such as "---", which would make a meaningless overlap
        if p is None:
            k = int(np.searchsorted(cum, cum[x0] + 1, side="left")) - 1
            if k < end and self.classes[k] in (WORD, DENSE):
                p = k
        if p is None or self.tokens(p, end) == 0 or p <= lower:
            return None
        return p
