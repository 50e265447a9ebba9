"""Fusing a vector ranking and a keyword ranking into one.

Two methods, both deterministic (ties: better vector rank, then keyword rank, then id):

* **RRF** (reciprocal-rank fusion, Cormack et al., 2009): each list contributes
  ``weight / (k + rank)``; only ranks matter, so it needs no score calibration.
* **Convex combination of normalised scores** (``fuse_scores``): each side's scores
  are divided by that side's best score (``max``: best = 1, zero stays zero, absent
  = 0) or min-max normalised over the candidate list (``minmax``: worst = 0), then
  ``alpha * vector + (1 - alpha) * keyword``. Unlike RRF it keeps *how much* better
  the first candidates are, so a clear winner on one side is not dragged down by
  chunks that are mediocre on both.

Measured on the search benchmark's dev half (built-in model, doc-level MRR@10,
English / multilingual): ``max`` ≥ ``minmax`` > RRF at every alpha; ``minmax`` also
turns the last of a short candidate list into 0 however close it was, which upset
small bases. ``max`` is the default (`DEFAULT_FUSION`).

`alpha` weights the vector side. Both functions see only the candidate lists they
are given: the caller asks both sides for a pool that does not depend on how many
results are wanted, so the first k results never change with top_k.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

RRF_K = 60
CANDIDATE_POOL = 200  # chunks asked of each side, whatever top_k is


class FusionMethod(StrEnum):
    RRF = "rrf"
    MINMAX = "minmax"
    MAX = "max"


DEFAULT_FUSION = FusionMethod.MAX


def _check(alpha: float) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be within 0..1, got {alpha!r}")


def _first_ranks(ranking: Sequence[tuple[str, float]]) -> dict[str, tuple[int, float]]:
    """id → (1-based rank, score) at its best (first) position."""
    out: dict[str, tuple[int, float]] = {}
    for rank, (doc_id, score) in enumerate(ranking, start=1):
        if doc_id not in out:
            out[doc_id] = (rank, float(score))
    return out


def _ordered(fused: dict[str, float], vrank: dict[str, tuple[int, float]], krank: dict[str, tuple[int, float]],
             limit: int) -> list[tuple[str, float]]:
    missing = (float("inf"), 0.0)
    order = sorted(fused, key=lambda d: (-fused[d], vrank.get(d, missing)[0], krank.get(d, missing)[0], d))
    return [(d, fused[d]) for d in order[:limit]]


def reciprocal_rank_fusion(
    vector: Sequence[tuple[str, float]],
    keyword: Sequence[tuple[str, float]],
    *,
    k: int = RRF_K,
    alpha: float = 0.5,
    limit: int,
) -> list[tuple[str, float]]:
    """Fuse two best-first rankings by RRF, best first, at most ``limit`` long.

    ``vector`` and ``keyword`` are ``(id, score)`` lists already sorted best first;
    only their order matters. A document repeated within one list counts at its
    best (first) rank.
    """
    _check(alpha)
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k!r}")
    if limit <= 0:
        return []
    vrank, krank = _first_ranks(vector), _first_ranks(keyword)
    fused: dict[str, float] = {}
    for d, (rank, _) in vrank.items():
        fused[d] = fused.get(d, 0.0) + alpha / (k + rank)
    for d, (rank, _) in krank.items():
        fused[d] = fused.get(d, 0.0) + (1.0 - alpha) / (k + rank)
    return _ordered(fused, vrank, krank, limit)


def _minmax(ranks: dict[str, tuple[int, float]]) -> dict[str, float]:
    if not ranks:
        return {}
    scores = [s for _, s in ranks.values()]
    hi, lo = max(scores), min(scores)
    if hi - lo <= 1e-12:
        return dict.fromkeys(ranks, 1.0)
    return {d: (s - lo) / (hi - lo) for d, (_, s) in ranks.items()}


def _max(ranks: dict[str, tuple[int, float]]) -> dict[str, float]:
    """Scores divided by the best one, negatives as 0: the scale's zero stays zero."""
    if not ranks:
        return {}
    hi = max(s for _, s in ranks.values())
    if hi <= 1e-12:
        return dict.fromkeys(ranks, 0.0)
    return {d: max(0.0, s) / hi for d, (_, s) in ranks.items()}


def fuse_scores(
    vector: Sequence[tuple[str, float]],
    keyword: Sequence[tuple[str, float]],
    *,
    alpha: float = 0.5,
    limit: int,
    normalise: str = "max",
) -> list[tuple[str, float]]:
    """Fuse by a convex combination of normalised scores (0..1), best first."""
    _check(alpha)
    if limit <= 0:
        return []
    vrank, krank = _first_ranks(vector), _first_ranks(keyword)
    norm = _minmax if normalise == "minmax" else _max
    vnorm, knorm = norm(vrank), norm(krank)
    fused = {d: alpha * vnorm.get(d, 0.0) + (1.0 - alpha) * knorm.get(d, 0.0) for d in vnorm.keys() | knorm.keys()}
    return _ordered(fused, vrank, krank, limit)


def fuse(
    vector: Sequence[tuple[str, float]],
    keyword: Sequence[tuple[str, float]],
    *,
    method: FusionMethod,
    alpha: float,
    limit: int,
) -> list[tuple[str, float]]:
    if method == FusionMethod.RRF:
        return reciprocal_rank_fusion(vector, keyword, alpha=alpha, limit=limit)
    return fuse_scores(vector, keyword, alpha=alpha, limit=limit, normalise=method.value)
