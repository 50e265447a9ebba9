"""Per-base vector + full-text store, exact vector search and rank fusion.

See docs/store.md. Public API: StoreManager, BaseStore. Query building and fusion
live in `ktui.core.search`.
"""

from .base_store import BaseStore, MatrixInfo, VectorShapeError
from .manager import StoreManager
from .matrix import Tuning

__all__ = [
    "BaseStore",
    "MatrixInfo",
    "StoreManager",
    "Tuning",
    "VectorShapeError",
]
