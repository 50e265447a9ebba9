"""Reciprocal-rank fusion of a vector ranking and a keyword ranking.

Why RRF: cosine similarities and bm25 scores live on unrelated scales, so the
ranks (not the scores) are fused. Each list contributes ``weight / (k + rank)``
per document (rank is 1-based), with ``alpha`` weighting the vector side and
``1 - alpha`` the keyword side. ``k = 60`` is the constant from the original
RRF paper (Cormack et al., 2009); it damps the influence of the very top ranks.
"""

from __future__ import annotations

from collections.abc import Sequence

RRF_K = 60


def reciprocal_rank_fusion(
    vector: Sequence[tuple[str, float]],
    keyword: Sequence[tuple[str, float]],
    *,
    k: int = RRF_K,
    alpha: float = 0.5,
    limit: int,
) -> list[tuple[str, float]]:
    """Fuse two best-first rankings into one, best first, at most ``limit`` long.

    ``vector`` and ``keyword`` are ``(id, score)`` lists already sorted best
    first; only their order matters. A document repeated within one list counts
    at its best (first) rank. Ties in the fused score are broken by the better
    vector rank, then the better keyword rank, then the id, so the result is
    deterministic.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be within 0..1, got {alpha!r}")
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k!r}")
    if limit <= 0:
        return []
    missing = float("inf")
    fused: dict[str, float] = {}
    vrank: dict[str, int] = {}
    krank: dict[str, int] = {}
    for rank, (doc_id, _score) in enumerate(vector, start=1):
        if doc_id in vrank:
            continue
        vrank[doc_id] = rank
        fused[doc_id] = fused.get(doc_id, 0.0) + alpha / (k + rank)
    for rank, (doc_id, _score) in enumerate(keyword, start=1):
        if doc_id in krank:
            continue
        krank[doc_id] = rank
        fused[doc_id] = fused.get(doc_id, 0.0) + (1.0 - alpha) / (k + rank)
    order = sorted(
        fused,
        key=lambda d: (-fused[d], vrank.get(d, missing), krank.get(d, missing), d),
    )
    return [(d, fused[d]) for d in order[:limit]]
