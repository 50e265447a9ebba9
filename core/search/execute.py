"""Retrieval: embed the query, search the base's store, rerank, threshold.

Order of operations (DESIGN, Store): candidates by mode → rerank (when the base has
a rerank model) → threshold → top-K. The threshold applies to scores that are
similarities: cosine scores, or rerank scores when reranked; RRF and bm25 scores
are ranks, not similarities, so a threshold does not filter them.

If the query cannot be embedded, the search answers from bm25 and says
`degraded=True` (with the reason) instead of failing.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from ktui.core.embeddings import EmbeddingService
from ktui.core.errors import KnowledgeError
from ktui.core.models import KnowledgeBase, KnowledgeSearchResult, ScoreKind, SearchMode, SearchResponse

if TYPE_CHECKING:
    from ktui.core.store import BaseStore

log = logging.getLogger(__name__)

RERANK_CANDIDATES_FACTOR = 5


async def run_search(
    base: KnowledgeBase,
    store: BaseStore,
    embeddings: EmbeddingService,
    query: str,
    *,
    top_k: int,
    mode: SearchMode,
) -> SearchResponse:
    reranking = base.rerank_model_id is not None
    fetch_k = top_k * RERANK_CANDIDATES_FACTOR if reranking else top_k
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

    if mode == SearchMode.DEFAULT:
        hits = await asyncio.to_thread(store.search_vector, query_vec, fetch_k)
        kind = ScoreKind.COSINE
    elif mode == SearchMode.BM25:
        hits = await asyncio.to_thread(store.search_bm25, query, fetch_k)
        kind = ScoreKind.BM25
    else:
        alpha = base.hybrid_alpha if base.hybrid_alpha is not None else 0.5
        hits = await asyncio.to_thread(store.search_hybrid, query_vec, query, fetch_k, alpha)
        kind = ScoreKind.RRF

    records = {r.id: r for r in await asyncio.to_thread(store.fetch, [cid for cid, _ in hits])}
    scored = [(records[cid], score) for cid, score in hits if cid in records]

    if reranking and scored:
        try:
            ranking = await embeddings.rerank(
                base.rerank_model_id, query, [r.text for r, _ in scored], top_n=len(scored)
            )
            scored = [(scored[i][0], float(s)) for i, s in sorted(ranking, key=lambda p: -p[1]) if 0 <= i < len(scored)]
            kind = ScoreKind.RERANK
        except Exception as exc:
            rerank_down = f"Rerank unavailable ({exc}); results are not reranked"
            reason = f"{reason}; {rerank_down}" if reason else rerank_down
            if not isinstance(exc, KnowledgeError):
                log.exception("rerank failed")

    if base.threshold is not None and kind in (ScoreKind.COSINE, ScoreKind.RERANK):
        scored = [(r, s) for r, s in scored if s >= base.threshold]
    scored = scored[:top_k]
    results = [
        KnowledgeSearchResult(
            page_content=record.text,
            score=float(score),
            score_kind=kind,
            rank=rank,
            metadata=record.metadata,
            item_id=record.item_id,
            chunk_id=record.id,
        )
        for rank, (record, score) in enumerate(scored, start=1)
    ]
    return SearchResponse(results, degraded=degraded, reason=reason, mode=mode)
