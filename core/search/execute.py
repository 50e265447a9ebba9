"""One search of one base: embed the query, gather candidates, fuse, rerank, threshold.

Order of operations (DESIGN, Store): candidates by mode → rerank (when the base has
a rerank model) → threshold → top-K. The threshold applies to scores that are
similarities: cosine scores, or rerank scores when reranked; fused and bm25 scores
are not, so a threshold does not filter them.

The candidate pool does not depend on top_k: each side is asked for the best
``max(CANDIDATE_POOL, top_k)`` chunks and the reranker sees the best
``max(RERANK_POOL, top_k)``, so asking for 5 or 50 results gives the same first 5
(for top_k up to the pool sizes).

If the query cannot be embedded, the search answers from bm25 and says
`degraded=True` (with the reason) instead of failing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from ktui.core.embeddings import EmbeddingService
from ktui.core.errors import KnowledgeError
from ktui.core.models import (
    DEFAULT_HYBRID_ALPHA,
    ChunkRecord,
    KnowledgeBase,
    KnowledgeSearchResult,
    ScoreKind,
    SearchMode,
    SearchResponse,
)

from .fusion import CANDIDATE_POOL, DEFAULT_FUSION, FusionMethod, fuse
from .relevance import (
    consistent_with_rank,
    cosine_relevance,
    hybrid_relevance,
    keyword_relevance,
    rerank_relevance,
)

if TYPE_CHECKING:
    from ktui.core.store import ChunkStore

log = logging.getLogger(__name__)

FILTERED_POOL = 2000  # with a filter, more candidates so enough of them pass it
RERANK_POOL = 50  # best fused candidates the reranker re-scores
FUSION = DEFAULT_FUSION  # measured better than RRF on the search benchmark (core/search/fusion.py)

ItemFilter = Callable[[str], bool]


async def run_search(
    base: KnowledgeBase,
    store: ChunkStore,
    embeddings: EmbeddingService,
    query: str,
    *,
    top_k: int,
    mode: SearchMode,
    item_filter: ItemFilter | None = None,
) -> SearchResponse:
    reranking = base.rerank_model_id is not None
    pool = max(FILTERED_POOL if item_filter else CANDIDATE_POOL, top_k)
    degraded, reason = False, None
    query_vec = None
    if mode != SearchMode.BM25:
        try:
            query_vec = await embeddings.embed_query(base.embedding_model_id, query, dimensions=base.dimensions)
        except Exception as exc:  # any provider failure degrades to keyword search
            degraded, reason = True, f"The query could not be embedded ({exc}); showing keyword (bm25) results"
            mode = SearchMode.BM25
            if not isinstance(exc, KnowledgeError):
                log.exception("query embedding failed")

    vector: list[tuple[str, float]] = []
    keyword: list[tuple[str, float]] = []
    if mode != SearchMode.BM25:
        vector = await asyncio.to_thread(store.search_vector, query_vec, pool)
    if mode != SearchMode.DEFAULT:
        keyword = await asyncio.to_thread(store.search_bm25, query, pool)
    records = {r.id: r for r in await asyncio.to_thread(store.fetch, list({c for c, _ in vector + keyword}))}
    if item_filter is not None:
        records = {cid: r for cid, r in records.items() if item_filter(r.item_id)}
    vector = [(c, s) for c, s in vector if c in records]
    keyword = [(c, s) for c, s in keyword if c in records]

    alpha = base.hybrid_alpha if base.hybrid_alpha is not None else DEFAULT_HYBRID_ALPHA
    if mode == SearchMode.DEFAULT:
        hits, kind = vector, ScoreKind.COSINE
    elif mode == SearchMode.BM25:
        hits, kind = keyword, ScoreKind.BM25
    else:
        hits = fuse(vector, keyword, method=FUSION, alpha=alpha, limit=pool)
        kind = ScoreKind.RRF if FUSION == FusionMethod.RRF else ScoreKind.FUSED
    scored = [(records[cid], score) for cid, score in hits]

    cosines = dict(vector)
    relevance = _side_relevance(query, mode, alpha, cosines)
    if reranking and scored:
        head = scored[: max(RERANK_POOL, top_k)]
        try:
            ranking = await embeddings.rerank(base.rerank_model_id, query, [r.text for r, _ in head], top_n=len(head))
            scored = [(head[i][0], float(s)) for i, s in sorted(ranking, key=lambda p: -p[1]) if 0 <= i < len(head)]
            kind = ScoreKind.RERANK
            relevance = lambda record, score: rerank_relevance(score)  # noqa: E731
        except Exception as exc:
            rerank_down = f"Rerank unavailable ({exc}); results are not reranked"
            reason = f"{reason}; {rerank_down}" if reason else rerank_down
            if not isinstance(exc, KnowledgeError):
                log.exception("rerank failed")

    if base.threshold is not None and kind in (ScoreKind.COSINE, ScoreKind.RERANK):
        scored = [(r, s) for r, s in scored if s >= base.threshold]
    scored = scored[:top_k]
    relevances = consistent_with_rank([relevance(record, score) for record, score in scored])
    results = [
        KnowledgeSearchResult(
            page_content=record.text,
            score=float(score),
            score_kind=kind,
            rank=rank,
            metadata=record.metadata,
            item_id=record.item_id,
            chunk_id=record.id,
            relevance=shown,
            base_id=base.id,
        )
        for rank, ((record, score), shown) in enumerate(zip(scored, relevances, strict=True), start=1)
    ]
    return SearchResponse(results, degraded=degraded, reason=reason, mode=mode)


def _side_relevance(
    query: str, mode: SearchMode, alpha: float, cosines: dict[str, float]
) -> Callable[[ChunkRecord, float], float]:
    """How a result's 0..1 relevance is computed in this mode (see core.search.relevance)."""
    if mode == SearchMode.DEFAULT:
        return lambda record, score: cosine_relevance(score)
    if mode == SearchMode.BM25:
        return lambda record, score: keyword_relevance(query, record.text)
    return lambda record, score: hybrid_relevance(
        alpha, cosine_relevance(cosines.get(record.id, 0.0)), keyword_relevance(query, record.text)
    )
