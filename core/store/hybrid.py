"""The store-level hybrid search every chunk store shares: both sides' candidates, fused.

A store provides ``search_vector`` and ``search_bm25``; this mixin adds
``search_hybrid`` on top of them with the one fusion of :mod:`core.search.fusion`, so
the SQLite and the PostgreSQL store fuse exactly alike.
"""

from __future__ import annotations

import numpy as np

from ktui.core.search.fusion import CANDIDATE_POOL, fuse_scores


class HybridSearch:
    """``search_hybrid`` for a store that has ``search_vector`` and ``search_bm25``."""

    def search_vector(self, query: np.ndarray, k: int) -> list[tuple[str, float]]:
        raise NotImplementedError  # every store defines it; the mixin only declares it for type checking

    def search_bm25(self, query: str, k: int) -> list[tuple[str, float]]:
        raise NotImplementedError

    def search_hybrid(
        self, query_vec: np.ndarray, query: str, k: int, alpha: float
    ) -> list[tuple[str, float]]:
        """Both sides' best ``max(CANDIDATE_POOL, k)`` fused (core.search.fusion); ``alpha`` weights vector.

        The search itself (``core.search.run_search``) does the same with filters,
        rerank and relevance; this is the store-level shortcut for tests and benchmarks.
        """
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"hybrid alpha must be within 0..1, got {alpha!r}")
        if k <= 0:
            return []
        pool = max(CANDIDATE_POOL, int(k))
        vector = self.search_vector(query_vec, pool)
        keyword = self.search_bm25(query, pool)
        return fuse_scores(vector, keyword, alpha=alpha, limit=int(k))
