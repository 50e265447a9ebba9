"""Per-base vector + full-text store, exact vector search and rank fusion.

See docs/store.md. Public API: StoreManager, BaseStore, reciprocal_rank_fusion.
"""

from .base_store import BaseStore, MatrixInfo, VectorShapeError
from .fts import fts_match_expression
from .fusion import RRF_K, reciprocal_rank_fusion
from .manager import StoreManager
from .matrix import Tuning

__all__ = [
    "RRF_K",
    "BaseStore",
    "MatrixInfo",
    "StoreManager",
    "Tuning",
    "VectorShapeError",
    "fts_match_expression",
    "reciprocal_rank_fusion",
]
