"""The Knowledge Engine: ordering, threshold/top-K order, session cache, keyword fallback, never raising."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ktui.core import engine
from ktui.core.engine import (
    MAX_EMBED_CHARS,
    RankedMatch,
    RankResult,
    clear_session_cache,
    cosine_similarity,
    keyword_tokens,
    rank_docs_by_embedding,
)
from tests.support.embedding_server import deterministic_vectors


@pytest.fixture(autouse=True)
def _fresh_cache():
    clear_session_cache()
    yield
    clear_session_cache()


class CountingEmbedder:
    """A real (deterministic bag-of-words) embedder that records every call."""

    def __init__(self, dims: int = 64):
        self.dims = dims
        self.calls: list[list[str]] = []

    async def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return deterministic_vectors(texts, self.dims)


DOCS = [
    {"id": "a", "text": "Ollama serves local embedding models over HTTP"},
    {"id": "b", "text": "The cat sat on the mat in the sun"},
    {"id": "c", "text": "Embedding models turn text into vectors for semantic search"},
    {"id": "d", "text": "Recipes for sourdough bread and pizza"},
]


def content(doc: dict) -> str:
    return doc["text"]


# --- cosine -----------------------------------------------------------------


def test_cosine_basic_values():
    assert cosine_similarity([1, 0], [1, 0]) == pytest.approx(1.0)
    assert cosine_similarity([1, 0], [0, 1]) == pytest.approx(0.0)
    assert cosine_similarity([1, 2, 3], [-1, -2, -3]) == pytest.approx(-1.0)
    assert cosine_similarity(np.array([3.0, 4.0]), [6, 8]) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "a,b",
    [([], []), ([1, 2], [1, 2, 3]), ([0, 0], [1, 1]), ([1, 1], [0, 0]), ([math.nan, 1], [1, 1]),
     ([math.inf, 1], [1, 1]), (None, [1]), ("abc", "abd"), ([[1, 2]], [[1, 2]]),
     (object(), object()), ([1, "x"], [1, 2])],
)
def test_cosine_degenerate_inputs_give_zero(a, b):
    assert cosine_similarity(a, b) == 0.0


def test_cosine_huge_and_tiny_components_do_not_overflow():
    assert cosine_similarity([1e308, 1e308], [1e308, 1e308]) == pytest.approx(1.0)
    assert cosine_similarity([1e-320, 0.0], [5e-324, 0.0]) == pytest.approx(1.0)


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=8),
       st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=8))
def test_cosine_never_nan_never_raises(a, b):
    s = cosine_similarity(a, b)
    assert isinstance(s, float) and math.isfinite(s) and -1.0 <= s <= 1.0


# --- ranking ----------------------------------------------------------------


async def test_ranks_by_similarity_with_ranks_and_scores():
    res = await rank_docs_by_embedding("embedding models", DOCS, content=content, embedder=CountingEmbedder())
    assert isinstance(res, RankResult) and res.degraded is False
    ids = [m.candidate["id"] for m in res.matches]
    assert ids[:2] == ["c", "a"] or ids[:2] == ["a", "c"]
    assert set(ids[2:]) == {"b", "d"}
    assert [m.rank for m in res.matches] == [1, 2, 3, 4]
    scores = [m.score for m in res.matches]
    assert scores == sorted(scores, reverse=True)
    assert isinstance(res.matches[0], RankedMatch)


async def test_threshold_applies_before_top_k():
    emb = CountingEmbedder()
    full = await rank_docs_by_embedding("embedding models vectors", DOCS, content=content, embedder=emb)
    cut = full.matches[1].score  # keep exactly the two best
    res = await rank_docs_by_embedding("embedding models vectors", DOCS, content=content, embedder=emb,
                                       min_score=cut, top_k=3)
    assert [m.candidate for m in res.matches] == [m.candidate for m in full.matches[:2]]
    assert all(m.score >= cut for m in res.matches)
    top1 = await rank_docs_by_embedding("embedding models vectors", DOCS, content=content, embedder=emb, top_k=1)
    assert [m.candidate for m in top1.matches] == [full.matches[0].candidate]
    none = await rank_docs_by_embedding("embedding models vectors", DOCS, content=content, embedder=emb, top_k=0)
    assert none.matches == [] and not none.degraded


async def test_everything_below_threshold_falls_back_to_keywords():
    res = await rank_docs_by_embedding("sourdough pizza", DOCS, content=content, embedder=CountingEmbedder(),
                                       min_score=0.9999)
    assert res.degraded is True
    assert [m.candidate["id"] for m in res.matches] == ["d"]
    assert res.matches[0].score == 1.0 and res.matches[0].rank == 1


async def test_no_embedder_uses_keyword_fraction():
    res = await rank_docs_by_embedding("Embedding, models & HTTP!", DOCS, content=content)
    assert res.degraded is True
    by_id = {m.candidate["id"]: m.score for m in res.matches}
    assert by_id == {"a": pytest.approx(1.0), "c": pytest.approx(2 / 3)}
    assert [m.candidate["id"] for m in res.matches] == ["a", "c"]


def test_keyword_tokens_split_and_drop_short():
    assert keyword_tokens("The cat, on a MAT... foo_bar x1 über-cool") == ["the", "cat", "mat", "foo", "bar", "über", "cool"]
    assert keyword_tokens("a b c") == []


async def test_failing_embedder_degrades():
    async def broken(texts):
        raise RuntimeError("connection refused")

    res = await rank_docs_by_embedding("cat mat", DOCS, content=content, embedder=broken, top_k=5)
    assert res.degraded is True and "connection refused" in (res.reason or "")
    assert [m.candidate["id"] for m in res.matches] == ["b"]


@pytest.mark.parametrize("answer", [[[]] * 5, [[1.0, 2.0]], None, [[math.nan] * 4] * 5, "nope", [["x"]] * 5])
async def test_empty_or_malformed_vectors_degrade(answer):
    async def bad(texts):
        return answer

    res = await rank_docs_by_embedding("cat mat", DOCS, content=content, embedder=bad)
    assert res.degraded is True
    assert [m.candidate["id"] for m in res.matches] == ["b"]


async def test_zero_query_vector_degrades():
    async def zeros(texts):
        return [[0.0, 0.0] if i == 0 else [1.0, 0.0] for i, _ in enumerate(texts)]

    res = await rank_docs_by_embedding("cat", DOCS, content=content, embedder=zeros)
    assert res.degraded is True


async def test_long_content_is_truncated_before_embedding():
    emb = CountingEmbedder()
    long_doc = {"id": "x", "text": "word " * 5000}
    await rank_docs_by_embedding("q" * 5000, [long_doc], content=content, embedder=emb)
    assert all(len(t) <= MAX_EMBED_CHARS for call in emb.calls for t in call)
    assert len(emb.calls[0][0]) == MAX_EMBED_CHARS


async def test_session_cache_is_content_keyed_and_shared():
    emb = CountingEmbedder()
    await rank_docs_by_embedding("cats", DOCS, content=content, embedder=emb)
    assert sum(len(c) for c in emb.calls) == 5
    # a second caller (other domain, other candidate objects, same texts) embeds nothing
    other = CountingEmbedder()
    same_texts = [{"text": d["text"], "other": True} for d in DOCS]
    await rank_docs_by_embedding("cats", same_texts, content=lambda d: d["text"], embedder=other)
    assert other.calls == []
    # a changed record misses on its own
    changed = [*DOCS[:3], {"id": "d", "text": "Recipes for sourdough bread"}]
    await rank_docs_by_embedding("cats", changed, content=content, embedder=emb)
    assert emb.calls[-1] == ["Recipes for sourdough bread"]
    assert engine._session_cache.text_key("abc") == "3:abc"


async def test_cache_namespace_keeps_models_apart():
    a, b = CountingEmbedder(64), CountingEmbedder(32)
    a.cache_namespace = "p::a"  # type: ignore[attr-defined]
    b.cache_namespace = "p::b"  # type: ignore[attr-defined]
    ra = await rank_docs_by_embedding("cats", DOCS, content=content, embedder=a)
    rb = await rank_docs_by_embedding("cats", DOCS, content=content, embedder=b)
    assert len(b.calls) == 1 and not ra.degraded and not rb.degraded


async def test_ties_keep_input_order_and_content_errors_are_isolated():
    def flaky(doc):
        if doc["id"] == "b":
            raise KeyError("boom")
        return doc["text"]

    res = await rank_docs_by_embedding("zzz qqq", DOCS, content=flaky, embedder=CountingEmbedder())
    assert not res.degraded and len(res.matches) == 4


async def test_empty_candidates():
    assert (await rank_docs_by_embedding("x", [], content=content, embedder=CountingEmbedder())).matches == []
    assert (await rank_docs_by_embedding("x", [], content=content)).matches == []


async def test_cancellation_propagates():
    started = asyncio.Event()

    async def slow(texts):
        started.set()
        await asyncio.Event().wait()  # never answers

    task = asyncio.ensure_future(rank_docs_by_embedding("x", DOCS, content=content, embedder=slow))
    await started.wait()  # cancelled while the embedder is running
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# --- hostile input: never raises ---------------------------------------------

junk = st.one_of(st.none(), st.integers(), st.floats(), st.text(max_size=50), st.binary(max_size=10),
                 st.lists(st.integers(), max_size=3))


@given(
    query=st.one_of(st.text(max_size=200), junk),
    texts=st.lists(st.one_of(st.text(max_size=300), junk), max_size=12),
    mode=st.sampled_from(["ok", "raise", "empty", "short", "nan", "junk", "none", "ragged"]),
    min_score=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=3)),
    top_k=st.one_of(st.none(), st.integers(-5, 20), st.floats(allow_nan=True), st.text(max_size=3)),
)
async def test_never_raises_on_hostile_input(query, texts, mode, min_score, top_k):
    clear_session_cache()

    async def embedder(batch):
        if mode == "raise":
            raise ValueError("bad")
        if mode == "empty":
            return [[] for _ in batch]
        if mode == "short":
            return deterministic_vectors([str(t) for t in batch], 8)[:-1]
        if mode == "nan":
            return [[math.nan] * 8 for _ in batch]
        if mode == "junk":
            return [object() for _ in batch]
        if mode == "none":
            return None
        if mode == "ragged":
            return [[1.0] * (i % 3 + 1) for i, _ in enumerate(batch)]
        return deterministic_vectors([str(t) for t in batch], 8)

    res = await rank_docs_by_embedding(query, list(range(len(texts))), content=lambda i: texts[i],
                                       embedder=embedder, min_score=min_score, top_k=top_k)
    assert isinstance(res, RankResult)
    assert [m.rank for m in res.matches] == list(range(1, len(res.matches) + 1))
    assert all(math.isfinite(m.score) for m in res.matches)
    scores = [m.score for m in res.matches]
    assert scores == sorted(scores, reverse=True)
    if mode in ("raise", "empty", "nan", "junk", "none") and texts:
        assert res.degraded


async def test_many_candidates_are_scored_off_loop_with_same_result():
    docs = [{"id": i, "text": f"document number {i} about topic {i % 7}"} for i in range(2500)]
    emb = CountingEmbedder(32)
    big = await rank_docs_by_embedding("topic 3 document", docs, content=content, embedder=emb, top_k=5)
    small = await rank_docs_by_embedding("topic 3 document", docs[:1000], content=content, embedder=emb, top_k=5)
    assert not big.degraded and len(big.matches) == 5
    assert big.matches[0].score >= small.matches[0].score - 1e-9
    assert len(emb.calls) == 1  # the second ranking was served entirely from the session cache
