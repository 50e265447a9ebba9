"""The "similar items" domain wrapper over the Knowledge Engine."""

from __future__ import annotations

import pytest

from ktui.core.engine import MAX_EMBED_CHARS, clear_session_cache
from ktui.core.models import (
    FileItemData,
    ItemStatus,
    ItemType,
    KnowledgeItem,
    NoteItemData,
    UrlItemData,
)
from ktui.core.search.similar import format_item_for_embedding, rank_similar_items
from tests.support.embedding_server import deterministic_vectors


@pytest.fixture(autouse=True)
def _fresh_cache():
    clear_session_cache()


def item(iid: str, type_: ItemType, data) -> KnowledgeItem:
    return KnowledgeItem(iid, "base", None, type_, data, ItemStatus.COMPLETED, None, None, "t", "t")


ITEMS = [
    item("f1", ItemType.FILE, FileItemData("/docs/ollama.md", "/docs/ollama.md")),
    item("f2", ItemType.FILE, FileItemData("/docs/bread.md", "/docs/bread.md")),
    item("u1", ItemType.URL, UrlItemData("https://example.org/embeddings", "https://example.org/embeddings")),
    item("n1", ItemType.NOTE, NoteItemData("Vectors note\nmore", "note", "https://x.org")),
]
TEXTS = {
    "f1": ["Local embedding models for semantic search.", "Pull a model first."],
    "f2": ["Sourdough bread needs flour, water and time."],
    "u1": ["Embedding models map text to vectors; similar text gives similar vectors."],
    "n1": ["Vectors and embedding models for semantic search."],
}


async def embedder(texts):
    return deterministic_vectors(texts, 128)


def test_format_has_header_and_chunks_and_is_bounded():
    text = format_item_for_embedding(ITEMS[0], TEXTS["f1"])
    assert text.startswith("file: ollama.md (/docs/ollama.md)")
    assert "Pull a model first." in text
    assert format_item_for_embedding(ITEMS[2], []).startswith("url: https://example.org/embeddings")
    assert format_item_for_embedding(ITEMS[3], []) == "note: Vectors note (https://x.org)"
    big = format_item_for_embedding(ITEMS[0], ["x" * 2000] * 10)
    assert len(big) <= MAX_EMBED_CHARS


async def test_similar_items_excludes_target_and_ranks_related_first():
    res = await rank_similar_items(ITEMS[3], ITEMS, TEXTS, embedder)
    ids = [m.candidate.id for m in res.matches]
    assert "n1" not in ids and not res.degraded
    assert ids[0] == "u1" and "f2" not in ids[:2] and len(ids) == 3


async def test_similar_items_top_k_and_fallback():
    res = await rank_similar_items(ITEMS[3], ITEMS, TEXTS, embedder, top_k=1)
    assert len(res.matches) == 1
    res = await rank_similar_items(ITEMS[3], ITEMS, TEXTS, None)
    assert res.degraded and res.matches and all(m.candidate.id != "n1" for m in res.matches)


async def test_similar_items_never_raises_on_bad_candidates():
    res = await rank_similar_items(ITEMS[0], [ITEMS[1], None], TEXTS, embedder)  # type: ignore[list-item]
    assert res.degraded and res.matches == []
