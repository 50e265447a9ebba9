"""Per-base vector + full-text store, exact vector search and rank fusion.

See docs/store.md. Public API: StoreManager, BaseStore. Query building and fusion
live in `ktui.core.search`.
"""

from .base_store import BaseStore
from .connection import VectorShapeError
from .manager import StoreManager
from .matrix_files import Tuning
from .protocol import ChunkStore, Stores
from .sidecar import MatrixInfo

__all__ = [
    "BaseStore",
    "ChunkStore",
    "MatrixInfo",
    "StoreManager",
    "Stores",
    "Tuning",
    "VectorShapeError",
]
