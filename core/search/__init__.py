"""Search, in one place: query building, candidate retrieval, fusion, rerank, relevance.

* `keyword`  — user text → a safe FTS5 MATCH expression (and the FTS tokenizer).
* `fusion`   — combining a vector ranking and a keyword ranking.
* `execute`  — one search of one base: embed the query, ask the store for
  candidates, fuse, rerank, threshold, top-K (`run_search`).
* `similar`  — "items similar to this item" over the Knowledge Engine.

The store (`ktui.core.store`) only answers the two primitive questions (nearest
vectors, FTS5 matches); the Knowledge Engine's `rank_docs_by_embedding` stays in
`ktui.core.engine`, its public home.
"""

from .execute import run_search
from .fusion import RRF_K, reciprocal_rank_fusion
from .keyword import fts_match_expression

__all__ = ["RRF_K", "fts_match_expression", "reciprocal_rank_fusion", "run_search"]
