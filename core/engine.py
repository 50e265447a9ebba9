"""The Knowledge Engine: rank any list of candidates by embedding similarity to a query.

`rank_docs_by_embedding()` is the one generic "stage 1" ranking function. A domain
supplies its candidates and a `content(candidate) -> str` formatter; the engine
embeds the query and every candidate's content (truncated to `MAX_EMBED_CHARS`),
scores candidates by cosine similarity, sorts, applies `min_score`, then `top_k`
(in that order, so a weak match never takes a slot a stronger one deserved), and
falls back to keyword matching whenever the embedding path cannot produce a
result. It never raises: the worst case is `RankResult([], degraded=True)`.

Session cache: vectors are kept for the life of the process, keyed by the text
itself (`f"{len(text)}:{text}"`), not by a caller's id — a changed record misses
on its own and different domains share entries safely. Entries are additionally
namespaced by the embedder's `cache_namespace` attribute when it has one (the
`EmbeddingService` adapter sets it to the model id), so switching models never
serves a vector from the other model. The cache is bounded (LRU,
`SESSION_CACHE_ENTRIES`) and never persisted.

See core/search/similar.py for the pattern a domain wrapper follows.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_EMBED_CHARS = 3000
"""Longer content is truncated before embedding: local models have small context windows."""

SESSION_CACHE_ENTRIES = 20_000
MIN_KEYWORD_LEN = 3
_OFF_LOOP_CANDIDATES = 2_000  # above this many, scoring runs in a worker thread

Vector = Sequence[float] | np.ndarray
Embedder = Callable[[list[str]], Awaitable[Sequence[Vector] | np.ndarray]]
"""An async callable: texts -> one vector per text (same order)."""


@dataclass(frozen=True, slots=True)
class RankedMatch(Generic[T]):
    candidate: T
    score: float  # cosine similarity, or the keyword fraction when degraded
    rank: int  # 1-based


@dataclass(frozen=True, slots=True)
class RankResult(Generic[T]):
    matches: list[RankedMatch[T]]
    degraded: bool = False  # True: the matches come from the keyword fallback
    reason: str | None = field(default=None, compare=False)  # why it degraded, for logs / the user


# --- similarity -------------------------------------------------------------


def _as_vector(v: Any) -> np.ndarray | None:
    """A finite 1-D float64 array, or None for anything unusable."""
    try:
        arr = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return None
    if arr.ndim != 1 or arr.size == 0 or not np.isfinite(arr).all():
        return None
    return arr


def cosine_similarity(a: Any, b: Any) -> float:
    """Cosine of two vectors; 0.0 for degenerate input (empty, length mismatch, zero norm,
    non-numeric, NaN/inf). Never NaN, never raises."""
    try:
        va, vb = _as_vector(a), _as_vector(b)
        if va is None or vb is None or va.shape != vb.shape:
            return 0.0
        ma, mb = float(np.max(np.abs(va))), float(np.max(np.abs(vb)))
        if not (ma > 0.0 and mb > 0.0):
            return 0.0
        va, vb = va / ma, vb / mb  # scale first: huge components must not overflow the norm
        na, nb = float(np.linalg.norm(va)), float(np.linalg.norm(vb))
        score = float(np.dot(va, vb) / (na * nb))
        if not math.isfinite(score):
            return 0.0
        return max(-1.0, min(1.0, score))
    except Exception:  # noqa: BLE001 - the contract is "never raises"
        return 0.0


def _cosine_many(query: np.ndarray, vectors: Sequence[np.ndarray | None]) -> list[float]:
    """Cosine of `query` against each vector (None -> 0.0); vectorised when widths agree."""
    width = query.shape[0]
    rows = [i for i, v in enumerate(vectors) if v is not None and v.shape == (width,)]
    scores = [0.0] * len(vectors)
    if not rows:
        return scores
    matrix = np.stack([vectors[i] for i in rows])  # type: ignore[misc]
    norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(query)
    with np.errstate(all="ignore"):
        sims = (matrix @ query) / norms
    for i, s in zip(rows, sims.tolist(), strict=True):
        scores[i] = max(-1.0, min(1.0, s)) if math.isfinite(s) else 0.0
    return scores


# --- session cache ----------------------------------------------------------


class _SessionCache:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self._data: OrderedDict[tuple[str | None, str], np.ndarray] = OrderedDict()

    @staticmethod
    def text_key(text: str) -> str:
        return f"{len(text)}:{text}"

    def get(self, namespace: str | None, text: str) -> np.ndarray | None:
        key = (namespace, self.text_key(text))
        v = self._data.get(key)
        if v is not None:
            self._data.move_to_end(key)
        return v

    def put(self, namespace: str | None, text: str, vec: np.ndarray) -> None:
        key = (namespace, self.text_key(text))
        self._data[key] = vec
        self._data.move_to_end(key)
        while len(self._data) > self.capacity:
            self._data.popitem(last=False)

    def clear(self) -> None:
        self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


_session_cache = _SessionCache(SESSION_CACHE_ENTRIES)


def clear_session_cache() -> None:
    """Forget every cached vector (tests; or after changing the embedding model)."""
    _session_cache.clear()


def session_cache_size() -> int:
    return len(_session_cache)


# --- keyword fallback -------------------------------------------------------

_SPLIT = re.compile(r"[\W_]+", re.UNICODE)


def keyword_tokens(text: str) -> list[str]:
    """Lower-cased tokens split on whitespace and punctuation, shorter than 3 chars dropped, unique."""
    if not isinstance(text, str):
        return []
    return list(dict.fromkeys(t for t in _SPLIT.split(text.lower()) if len(t) >= MIN_KEYWORD_LEN))


def keyword_score(query_tokens: Sequence[str], content: str) -> float:
    """Fraction of the query tokens that `content` contains (case-insensitive substring)."""
    if not query_tokens:
        return 0.0
    lowered = content.lower()
    return sum(1 for t in query_tokens if t in lowered) / len(query_tokens)


def _keyword_rank(query: Any, items: list[tuple[Any, str]], top_k: int | None, reason: str) -> RankResult[Any]:
    """Score by keyword fraction; candidates containing no query token are left out.

    `min_score` is not applied here: it is a cosine threshold and means nothing for
    keyword fractions (and a threshold miss is one of the reasons we got here).
    """
    try:
        tokens = keyword_tokens(query if isinstance(query, str) else "")
        scored = [(keyword_score(tokens, text), i) for i, (_, text) in enumerate(items)]
        scored = [(s, i) for s, i in scored if s > 0.0]
        scored.sort(key=lambda p: (-p[0], p[1]))
        if top_k is not None:
            scored = scored[: max(0, top_k)]
        matches = [RankedMatch(items[i][0], s, r) for r, (s, i) in enumerate(scored, start=1)]
        return RankResult(matches, degraded=True, reason=reason)
    except Exception as exc:  # noqa: BLE001
        log.debug("keyword fallback failed: %s", exc)
        return RankResult([], degraded=True, reason=f"{reason}; keyword fallback failed: {exc}")


# --- the ranking function ---------------------------------------------------


def _safe_text(content: Callable[[T], str], candidate: T) -> str:
    try:
        text = content(candidate)
    except Exception:  # noqa: BLE001 - a bad record must not sink the whole ranking
        return ""
    return text if isinstance(text, str) else ("" if text is None else str(text))


def _clean_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _clean_float(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return f if math.isfinite(f) else None


async def _embed_all(embedder: Embedder, texts: list[str]) -> list[np.ndarray] | None:
    """Vectors for `texts` via the session cache; None if the embedder failed or gave junk."""
    namespace = getattr(embedder, "cache_namespace", None)
    namespace = namespace if isinstance(namespace, str) else None
    vectors: dict[str, np.ndarray] = {}
    todo: list[str] = []
    for t in texts:
        if t in vectors:
            continue
        v = _session_cache.get(namespace, t)
        if v is not None:
            vectors[t] = v
        elif t not in todo:
            todo.append(t)
    if todo:
        answer = await embedder(list(todo))
        answer = list(answer)
        if len(answer) != len(todo):
            return None
        for t, raw in zip(todo, answer, strict=True):
            v = _as_vector(raw)
            if v is None:  # an empty / non-numeric vector: the embedding path failed
                return None
            vectors[t] = v
            _session_cache.put(namespace, t, v)
    return [vectors[t] for t in texts]


async def rank_docs_by_embedding(
    query: str,
    candidates: Iterable[T],
    *,
    content: Callable[[T], str],
    embedder: Embedder | None = None,
    min_score: float | None = None,
    top_k: int | None = None,
) -> RankResult[T]:
    """Rank `candidates` by cosine similarity of `content(candidate)` to `query`.

    Sort by score (ties keep input order) -> drop scores below `min_score` ->
    keep `top_k`. Falls back to keyword matching (`degraded=True`) when there is
    no embedder, the embed call fails or returns an empty / unusable vector, or
    every candidate falls below `min_score`. Never raises.
    """
    try:
        items: list[tuple[T, str]] = [(c, _safe_text(content, c)) for c in candidates]
    except Exception as exc:  # noqa: BLE001 - an iterable that fails part-way
        return RankResult([], degraded=True, reason=f"candidates could not be read: {exc}")
    k = _clean_int(top_k)
    threshold = _clean_float(min_score)
    q = query if isinstance(query, str) else ("" if query is None else str(query))
    if not items:
        return RankResult([], degraded=embedder is None, reason=None if embedder else "no embedder")
    if embedder is None:
        return _keyword_rank(q, items, k, "no embedding model configured")

    try:
        texts = [q[:MAX_EMBED_CHARS]] + [text[:MAX_EMBED_CHARS] for _, text in items]
        vectors = await _embed_all(embedder, texts)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - any embedder failure degrades, never propagates
        log.debug("embedding failed, keyword fallback: %s", exc)
        return _keyword_rank(q, items, k, f"embedding failed: {exc}")
    if vectors is None:
        return _keyword_rank(q, items, k, "the embedder returned an empty or malformed vector")

    try:
        query_vec, cand_vecs = vectors[0], list(vectors[1:])
        if not float(np.linalg.norm(query_vec)) > 0.0:
            return _keyword_rank(q, items, k, "the query embedded to a zero vector")
        if len(items) > _OFF_LOOP_CANDIDATES:
            scores = await asyncio.to_thread(_cosine_many, query_vec, cand_vecs)
        else:
            scores = _cosine_many(query_vec, cand_vecs)
        order = sorted(range(len(items)), key=lambda i: (-scores[i], i))
        if threshold is not None:
            order = [i for i in order if scores[i] >= threshold]
            if not order:
                return _keyword_rank(q, items, k, f"no candidate reached min_score {threshold:g}")
        if k is not None:
            order = order[: max(0, k)]
        matches = [RankedMatch(items[i][0], float(scores[i]), r) for r, i in enumerate(order, start=1)]
        return RankResult(matches, degraded=False)
    except Exception as exc:  # noqa: BLE001
        return _keyword_rank(q, items, k, f"scoring failed: {exc}")


# --- adapter ----------------------------------------------------------------


class ServiceEmbedder:
    """Adapts `EmbeddingService` + a model id to the engine's `Embedder` callable.

    Goes through the service's persistent content-keyed cache as well, and sets
    `cache_namespace` so the engine's session cache never mixes models.
    """

    def __init__(self, service: Any, model_id: str, *, dimensions: int | None = None):
        self.service = service
        self.model_id = model_id
        self.dimensions = dimensions
        self.cache_namespace = model_id

    async def __call__(self, texts: list[str]) -> np.ndarray:
        vectors: np.ndarray = await self.service.embed(self.model_id, texts, dimensions=self.dimensions)
        return vectors


def service_embedder(service: Any, model_id: str, *, dimensions: int | None = None) -> ServiceEmbedder:
    """`embedder=service_embedder(ks_embeddings, "builtin::wordllama")` for rank_docs_by_embedding."""
    return ServiceEmbedder(service, model_id, dimensions=dimensions)


__all__ = [
    "MAX_EMBED_CHARS",
    "Embedder",
    "RankResult",
    "RankedMatch",
    "ServiceEmbedder",
    "clear_session_cache",
    "cosine_similarity",
    "keyword_score",
    "keyword_tokens",
    "rank_docs_by_embedding",
    "service_embedder",
]


@asynccontextmanager
async def settings_embedder(settings: Any, model_id: str) -> AsyncIterator[ServiceEmbedder]:
    """An embedder for `model_id` built from settings alone, for ranking outside any base
    (`ktui rank`): the embedding service lives as long as the context.

    An unknown provider raises ValidationError at once (a mistake, not a reason to
    degrade); failures while embedding degrade the ranking as usual.
    """
    from ktui.core.embeddings import EmbeddingService

    async with EmbeddingService(settings) as service:
        service.parse_model_id(model_id)
        yield service_embedder(service, model_id)
