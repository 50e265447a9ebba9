"""What the runtime, the workflow and the doctor need of a data directory's chunk stores,
whichever backend holds them: `StoreManager` (SQLite files under ``bases/``) and
``ktui.core.store.postgres.PgStoreManager`` (tables of one PostgreSQL schema) both satisfy
`Stores`; their stores satisfy `ChunkStore`. Defined here without importing either backend
(a SQLite user never imports psycopg)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from ktui.core.models import Chunk, ChunkRecord
from ktui.core.store.rows import StoredRows


class ChunkStore(Protocol):
    """One base's chunks: vectors and full text, written in whole transactions."""

    @property
    def dimensions(self) -> int: ...

    def replace_items(self, entries: Sequence[tuple[str, Sequence[Chunk], np.ndarray]]) -> list[list[str]]: ...

    def delete_items(self, item_ids: Iterable[str]) -> int: ...

    def delete_chunk(self, chunk_id: str) -> ChunkRecord | None: ...

    def list_chunks(self, item_ids: Iterable[str]) -> list[ChunkRecord]: ...

    def get_chunk(self, chunk_id: str) -> ChunkRecord | None: ...

    def fetch(self, chunk_ids: Sequence[str]) -> list[ChunkRecord]: ...

    def item_ids(self) -> set[str]: ...

    def count(self) -> int: ...

    def count_vectors(self) -> int:
        """Chunks with a vector of the store's width (counted from the rows)."""
        ...

    def read_rows(self, after: int = 0, limit: int = 1000) -> StoredRows:
        """Chunk rows after insertion position `after`, exactly as stored (ids and vectors)."""
        ...

    def write_rows(self, rows: StoredRows, *, settle: bool = True) -> int:
        """Append rows another store's `read_rows` gave, keeping ids and vectors, in one transaction."""
        ...

    def search_vector(self, query: np.ndarray, k: int) -> list[tuple[str, float]]: ...

    def search_bm25(self, query: str, k: int) -> list[tuple[str, float]]: ...

    def integrity_check(self) -> list[str]: ...

    def check_invariants(self) -> list[str]: ...


class Stores(Protocol):
    """The chunk stores of one data directory (thread-safe; blocking calls run in threads)."""

    def create(self, base_id: str, dimensions: int) -> ChunkStore: ...

    def get(self, base_id: str, dimensions: int) -> ChunkStore: ...

    def get_if_open(self, base_id: str, dimensions: int) -> ChunkStore | None:
        """The store if already open, without blocking (no I/O): for the event loop."""
        ...

    def problem(self, base_id: str) -> str | None:
        """Why the base's store cannot be used right now, when that is known cheaply."""
        ...

    def where_of(self, base_id: str) -> str:
        """How messages and the doctor name the base's store (a file, a table)."""
        ...

    def exists(self, base_id: str) -> bool: ...

    def rebuild(self, base_id: str, dimensions: int) -> Path | None:
        """Set an unusable store aside (where it went, if anywhere) and start an empty one."""
        ...

    def set_aside(self, base_id: str, reason: str) -> str | None: ...

    def drop_matrix(self, base_id: str) -> list[Path]:
        """Delete derived vector files (rebuilt from the rows); nothing on a backend without them."""
        ...

    def stray_files(self, known_ids: set[str]) -> list[Path]:
        """Local files of no known base; none on a backend without files."""
        ...

    def destroy(self, base_id: str) -> list[str]: ...

    def close_all(self) -> None: ...
