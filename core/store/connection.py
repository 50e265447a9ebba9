"""The state every part of a base store shares: its connection, lock and error mapping.

:class:`StoreConnection` holds one SQLite connection (WAL) behind one re-entrant lock,
turns SQLite failures into StoreError naming the file (and marks the store damaged on
corruption, so the manager sets the file aside), checks vectors against the base's
width, and reads / bumps the write generation that keeps the matrix in step.
The store's jobs are its subclasses: the matrix sidecar (``sidecar.py``), chunk
writes (``writes.py``), reads and searches (``queries.py``), checks (``checks.py``).
"""

from __future__ import annotations

import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ktui.core.errors import StoreDamagedError, StoreError
from ktui.core.storage_faults import storage_error

from .matrix import VectorIndex
from .matrix_files import MatrixFiles, Tuning
from .rows import is_corruption


class VectorShapeError(StoreError, ValueError):
    """Vectors handed to the store do not have the base's width (or are not finite)."""



def check_vectors(vectors: Any, n: int, dimensions: int, *, what: str) -> np.ndarray:
    """``vectors`` as a contiguous float32 ``(n, dimensions)`` matrix of finite values, or
    VectorShapeError saying what is wrong (every backend's writes and queries use it)."""
    try:
        arr = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise VectorShapeError(f"{what}: not a numeric matrix ({exc})") from exc
    if n == 0 and arr.size == 0:
        return np.empty((0, dimensions), np.float32)
    if arr.ndim != 2 or arr.shape[0] != n:
        raise VectorShapeError(
            f"{what}: expected {n} row(s) of {dimensions} values, got shape {arr.shape}"
        )
    if arr.shape[1] != dimensions:
        raise VectorShapeError(
            f"{what}: vectors are {arr.shape[1]} wide but this base stores {dimensions}-dimension vectors"
        )
    if not np.isfinite(arr).all():
        raise VectorShapeError(f"{what}: vectors contain NaN or infinity")
    return np.ascontiguousarray(arr)


class StoreConnection:
    """One base store's connection and shared state; see the module docstring."""

    def __init__(
        self,
        path: Path,
        dimensions: int,
        con: sqlite3.Connection,
        store_uuid: str,
        tuning: Tuning,
        read_only: bool = False,
    ):
        self.path = path
        self.read_only = read_only
        self.dimensions = dimensions
        self.tuning = tuning
        self._con = con
        self._uuid = store_uuid
        self._lock = threading.RLock()
        self._closed = False
        self.damaged: str | None = None  # set when SQLite reported corruption; the manager sets the file aside
        self._index: VectorIndex | None = None
        self._matrix_source: str | None = None
        self._matrix_reason: str | None = None
        self.files = MatrixFiles.next_to(path)
        # A reader never writes next to the store: a matrix it must build from the
        # BLOBs goes to a private temporary folder, removed at close.
        self._scratch: tempfile.TemporaryDirectory[str] | None = None

    def close(self) -> None:
        """Close the connection and the matrix files. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._index is not None:
                self._index.close()
                self._index = None
            if not self.read_only:
                try:
                    self._con.execute("PRAGMA optimize")
                except sqlite3.Error:
                    pass
            self._con.close()
            if self._scratch is not None:
                self._scratch.cleanup()
                self._scratch = None

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"Vector store {self.path} is closed")

    @contextmanager
    def _sql(self, action: str) -> Iterator[None]:
        """Turn SQLite failures into StoreError naming the file (the caller holds the lock)."""
        self._check_open()
        try:
            yield
        except (sqlite3.Error, OSError) as exc:
            fault = storage_error(exc, self.path)
            if fault is not None:
                raise fault from exc
            if isinstance(exc, OSError):
                raise
            if is_corruption(exc):
                self.damaged = f"is corrupt: could not {action}: {exc}"
                raise StoreDamagedError(str(self.path), self.damaged) from exc
            raise StoreError(
                f"Vector store file {self.path}: could not {action}: {exc}"
            ) from exc
        except UnicodeEncodeError as exc:
            raise StoreError(
                f"Vector store file {self.path}: could not {action}: text is not valid Unicode ({exc.reason})"
            ) from exc

    def _check_vectors(self, vectors: Any, n: int, *, what: str) -> np.ndarray:
        return check_vectors(vectors, n, self.dimensions, what=what)

    def _bump_generation(self) -> int:
        row = self._con.execute(
            "UPDATE meta SET value = value + 1 WHERE key = 'generation' RETURNING value"
        ).fetchone()
        return int(row[0])

    def _generation(self) -> int:
        return int(
            self._con.execute(
                "SELECT value FROM meta WHERE key = 'generation'"
            ).fetchone()[0]
        )
