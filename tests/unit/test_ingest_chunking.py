"""Chunking invariants (hypothesis, arbitrary Unicode incl. CJK) and heading metadata."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ktui.core.errors import ValidationError
from ktui.core.ingest.chunking import MARKDOWN_CONTENT_TYPE, chunk_documents, split_text
from ktui.core.ingest.tokens import _ASCII_TOKEN_RE, estimate_tokens, token_starts
from ktui.core.models import Document, ItemType

_WS = re.compile(r"\s+")

# Text that mixes every kind of character the splitter treats differently.
_pieces = st.one_of(
    st.text(min_size=0, max_size=40),  # arbitrary Unicode (all planes, controls, marks)
    st.text(alphabet="这是一个测试中文文本。！？，日本語のテキストです한국어", max_size=60),
    st.sampled_from(["\n\n", "\n", " ", ". ", "! ", "# Title\n", "## Sub\n", "```\n# code\n```\n", "\t", "\u3000"]),
    st.text(alphabet="abcdefghij", min_size=20, max_size=120),  # long words
    st.lists(st.sampled_from(["alpha", "beta", "gamma.", "delta,", "epsilon!"]), max_size=40).map(" ".join),
)
texts = st.lists(_pieces, max_size=25).map("".join)
sizes = st.integers(min_value=1, max_value=60).flatmap(
    lambda size: st.tuples(st.just(size), st.integers(min_value=0, max_value=size - 1))
)


def _chunks(text: str, size: int, overlap: int, md: bool):
    meta = {"content_type": MARKDOWN_CONTENT_TYPE} if md else {}
    return chunk_documents([Document(text, meta)], chunk_size=size, chunk_overlap=overlap,
                           item_id="it", item_type=ItemType.FILE, source="/src")


@given(text=texts, sz=sizes, md=st.booleans())
def test_chunk_invariants(text: str, sz: tuple[int, int], md: bool) -> None:
    size, overlap = sz
    chunks = _chunks(text, size, overlap, md)
    if text.strip() == "":
        assert chunks == []
        return
    assert chunks, "non-blank text must give at least one chunk"
    for i, c in enumerate(chunks):
        assert c.text.strip() == c.text and c.text, "no empty or unstripped chunks"
        assert c.metadata["chunk_index"] == i, "indices contiguous from 0"
        assert c.metadata["token_count"] == estimate_tokens(c.text)
        assert 0 < c.metadata["token_count"] <= size, "never exceeds chunk_size"
        assert {"item_id", "item_type", "source"} <= c.metadata.keys()
    # No text lost: every non-space character of the input is in some chunk.
    joined = "".join(c.text for c in chunks)
    assert set(_WS.sub("", text)) <= set(joined)


@given(text=texts, sz=sizes, md=st.booleans())
def test_spans_cover_text_in_order_and_overlap_is_bounded(text: str, sz: tuple[int, int], md: bool) -> None:
    size, overlap = sz
    spans = split_text(text, size, overlap, markdown_aware=md)
    covered = 0  # every non-space character before this offset is in some chunk
    for prev, span in zip([None, *spans], spans, strict=False):
        assert text[covered : span.own_start].strip() == "", "a gap between chunks lost text"
        if prev is not None:
            assert prev.start < span.start <= span.own_start, "chunks advance"
            assert span.own_start >= prev.end, "new text starts after the previous chunk"
            shared = text[span.start : prev.end]
            assert estimate_tokens(shared) <= overlap, "overlap within chunk_overlap"
        covered = span.end
    assert text[covered:].strip() == ""


@given(text=texts, size=st.integers(min_value=1, max_value=50))
def test_without_overlap_chunks_partition_the_text(text: str, size: int) -> None:
    chunks = _chunks(text, size, 0, False)
    assert "".join(_WS.sub("", c.text) for c in chunks) == _WS.sub("", text)


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=300))
def test_ascii_fast_path_matches_vectorised_estimator(text: str) -> None:
    assert len(_ASCII_TOKEN_RE.findall(text)) == int(token_starts(text).sum())


def test_estimator_rules() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("   \n\t") == 0
    assert estimate_tokens("setup") == 1
    assert estimate_tokens("configuration") == 2  # one token per started 10 characters
    assert estimate_tokens("Hello, world!") == 4
    assert estimate_tokens("你好世界") == 4  # each CJK character is one token
    assert estimate_tokens("日本語のテキスト") == 8
    assert estimate_tokens("x" * 10_000 + " " + "你" * 3000) == 1000 + 3000  # long path, numpy


def test_overlap_is_present_between_sentence_chunks() -> None:
    text = " ".join(f"Sentence number {i} talks about topic {i}." for i in range(200))
    chunks = _chunks(text, 64, 16, False)
    assert len(chunks) > 5
    for a, b in itertools.pairwise(chunks):
        # The next chunk starts with whole sentences from the end of the previous one.
        head = b.text.split(".")[0] + "."
        assert head in a.text and a.text.endswith(".")
        assert b.text.startswith("Sentence number")
        assert 0 < estimate_tokens(a.text[a.text.index(head):]) <= 16


def test_chunk_index_runs_across_documents_and_pages_stay_apart() -> None:
    docs = [Document(f"page {p} " + "word " * 30, {"page": p}) for p in (1, 2, 3)]
    chunks = chunk_documents(docs, chunk_size=16, chunk_overlap=4, item_id="x", item_type="file", source="/a.pdf")
    assert [c.metadata["chunk_index"] for c in chunks] == list(range(len(chunks)))
    pages = [c.metadata["page"] for c in chunks]
    assert pages == sorted(pages) and set(pages) == {1, 2, 3}
    for c in chunks:
        assert f"page {c.metadata['page']}" in c.text or "page" not in c.text
    assert chunks[0].metadata == {"item_id": "x", "item_type": "file", "source": "/a.pdf", "chunk_index": 0,
                                  "token_count": chunks[0].metadata["token_count"], "page": 1}


MD = """Preamble before any heading.

# Intro

Intro paragraph one. It explains things.

## Setup

Install with pip. Then configure it.

```sh
# this is a shell comment, not a heading
pip install ktui
```

## Usage

Run ktui and press keys.

Reference
=========

The reference section, in setext style.
"""


def test_markdown_heading_paths() -> None:
    chunks = _chunks(MD, 20, 0, True)
    by_text = {c.text.splitlines()[0]: c.metadata.get("heading") for c in chunks}
    assert by_text["Preamble before any heading."] is None
    headings = [c.metadata.get("heading") for c in chunks]
    assert "Intro > Setup" in headings and "Intro > Usage" in headings and "Reference" in headings
    assert not any("shell comment" in (h or "") for h in headings)
    setup = next(c for c in chunks if "pip install ktui" in c.text)
    assert setup.metadata["heading"] == "Intro > Setup"
    # A heading is never left alone at the end of a chunk.
    assert not any(c.text.splitlines()[-1].startswith("#") for c in chunks)


def test_markdown_small_sections_merge_under_their_common_parent() -> None:
    chunks = _chunks(MD, 1024, 200, True)
    assert len(chunks) == 1
    assert "heading" not in chunks[0].metadata  # preamble + sections: no common heading
    only_sections = MD.split("\n\n", 1)[1]
    chunk = _chunks(only_sections.split("Reference")[0], 1024, 200, True)[0]
    assert chunk.metadata["heading"] == "Intro"


def test_plain_text_is_not_heading_aware() -> None:
    chunks = _chunks("# not a heading in a .py file\nprint(1)\n", 100, 0, False)
    assert "heading" not in chunks[0].metadata


@pytest.mark.parametrize("size,overlap", [(0, 0), (10, 10), (10, -1), (5, 9)])
def test_bad_sizes_are_refused(size: int, overlap: int) -> None:
    with pytest.raises(ValidationError):
        _chunks("text", size, overlap, False)


@given(text=texts, sz=sizes, md=st.booleans())
def test_huge_documents_are_cut_in_blocks_with_the_same_guarantees(text: str, sz: tuple[int, int], md: bool) -> None:
    size, overlap = sz
    from ktui.core.ingest import chunking

    saved = chunking._BLOCK_CHARS
    chunking._BLOCK_CHARS = 64  # every text of more than 128 characters goes through blocks
    try:
        spans = split_text(text, size, overlap, markdown_aware=md)
    finally:
        chunking._BLOCK_CHARS = saved
    covered = 0
    for span in spans:
        assert text[covered : span.own_start].strip() == ""
        piece = text[span.start : span.end]
        assert 0 < span.tokens == estimate_tokens(piece) <= size
        covered = max(covered, span.end)
    assert text[covered:].strip() == ""


def test_heading_carries_across_a_block_boundary(monkeypatch) -> None:
    from ktui.core.ingest import chunking

    monkeypatch.setattr(chunking, "_BLOCK_CHARS", 200)
    body = "\n\n".join(f"Paragraph {i} says something useful." for i in range(40))
    text = f"# Top\n\n## Long section\n\n{body}\n\n## Next\n\nTail."
    chunks = _chunks(text, 30, 5, True)
    assert len(text) > 4 * 200
    headings = [c.metadata.get("heading") for c in chunks]
    assert headings[0] == "Top > Long section"
    assert headings.count("Top > Long section") >= len(chunks) - 2
    assert headings[-1] in ("Top", "Top > Next")  # "Tail." may share a chunk with the section before
    assert "".join(_WS.sub("", c.text) for c in _chunks(text, 30, 0, True)) == _WS.sub("", text)
