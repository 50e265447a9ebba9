"""One base's chunk store: SQLite rows + FTS5 index + the vector matrix.

SQLite (``bases/<base_id>.sqlite``, WAL) is the source of truth: every chunk
row carries its text, metadata and float32 vector BLOB, and an FTS5
external-content index over the text is kept in step by triggers inside the
same transaction. The vector matrix (:mod:`core.store.matrix`) is derived data:
loaded lazily, updated after each committed write, rebuilt from the BLOBs when
its files do not match the store's write generation.

its files do not match the store's write generation.

The store is one class put together from one module per job: the file format and
opening (``schema.py``), shared state and error mapping (``connection.py``), the
matrix sidecar (``sidecar.py``), chunk writes (``writes.py``), reads and searches
(``queries.py``) and health checks (``checks.py``).

Thread safety: every method may be called from any thread. One re-entrant lock
guards the SQLite connection and matrix mutations; the search math itself runs
on an immutable snapshot outside the lock.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Self

from ktui.core.errors import StoreDamagedError, StoreError

from .checks import StoreChecks
from .matrix import VectorIndex
from .matrix_files import Tuning
from .queries import ChunkQueries
from .schema import connect, remove_store_files
from .writes import ChunkWrites


class BaseStore(ChunkWrites, ChunkQueries, StoreChecks):
    """See the module docstring. Create with :meth:`open`."""

    @classmethod
    def open(
        cls,
        path: Path,
        dimensions: int,
        *,
        create: bool = False,
        tuning: Tuning | None = None,
        read_only: bool = False,
    ) -> BaseStore:
        """Open (or with ``create=True`` create) the store at ``path``.

        Raises StoreError naming the file when it is missing, already exists
        (create), is not a ktui store, is corrupt, or was made for another width.

        ``read_only``: a reader beside the process that writes the store. It sees
        committed state through the WAL, never writes (``query_only``), and
        reloads its matrix when the store's write generation moves on.
        """
        if read_only and create:
            raise StoreError(f"Vector store file {path}: a read-only store cannot be created")
        path = Path(path)
        if (
            isinstance(dimensions, bool)
            or not isinstance(dimensions, int)
            or dimensions <= 0
        ):
            raise ValueError(
                f"dimensions must be a positive integer, got {dimensions!r}"
            )
        tuning = tuning or Tuning()
        if create:
            if path.exists():
                raise StoreError(f"Vector store file {path} already exists")
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))  # private; -wal/-shm follow
        elif not path.is_file():
            raise StoreDamagedError(str(path), "is missing")
        con, store_uuid = connect(path, dimensions, create=create, read_only=read_only)
        store = cls(path, dimensions, con, store_uuid, tuning, read_only)
        if create:
            try:
                with store._lock:
                    store._index = VectorIndex.build(
                        store.files, dimensions, store_uuid, 0, tuning, []
                    )
                    store._matrix_source = "file"
            except OSError as exc:
                store.close()
                remove_store_files(path)
                raise StoreError(
                    f"Vector store {path}: cannot write its matrix files: {exc}"
                ) from exc
        return store

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

