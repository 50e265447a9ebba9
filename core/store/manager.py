"""StoreManager: the per-base stores under ``<data_dir>/bases``, opened lazily and cached."""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

from ktui.core.errors import StoreError

from .base_store import BaseStore
from .matrix import Tuning

_BASE_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


class StoreManager:
    """Owns every open BaseStore of one data directory. Thread-safe."""

    def __init__(self, data_dir: Path, *, tuning: Tuning | None = None):
        self.data_dir = Path(data_dir)
        self.bases_dir = self.data_dir / "bases"
        self.tuning = tuning
        self._stores: dict[str, BaseStore] = {}
        self._lock = threading.Lock()

    def path_for(self, base_id: str) -> Path:
        """``bases/<base_id>.sqlite``; refuses ids that could escape the directory."""
        if not isinstance(base_id, str) or not _BASE_ID.match(base_id):
            raise StoreError(f"Invalid base id for a store file name: {base_id!r}")
        return self.bases_dir / f"{base_id}.sqlite"

    def create(self, base_id: str, dimensions: int) -> BaseStore:
        """Create the base's store (StoreError when it already exists)."""
        path = self.path_for(base_id)
        with self._lock:
            if base_id in self._stores:
                raise StoreError(f"Vector store file {path} already exists")
            store = BaseStore.open(path, dimensions, create=True, tuning=self.tuning)
            self._stores[base_id] = store
            return store

    def get_if_open(self, base_id: str, dimensions: int) -> BaseStore | None:
        """The base's store if it is already open, without blocking (no lock, no I/O):
        callers on the event loop use it before falling back to `get` in a thread."""
        store = self._stores.get(base_id)  # a dict read is atomic; opening happens under the lock
        if store is None or store.dimensions != dimensions:
            return None
        return store

    def get(self, base_id: str, dimensions: int) -> BaseStore:
        """The open store of a base (opened on first use). StoreError when missing or corrupt."""
        path = self.path_for(base_id)
        with self._lock:
            store = self._stores.get(base_id)
            if store is not None:
                if store.dimensions != dimensions:
                    raise StoreError(
                        f"Vector store file {path} holds {store.dimensions}-dimension vectors, not {dimensions}"
                    )
                return store
            store = BaseStore.open(path, dimensions, create=False, tuning=self.tuning)
            self._stores[base_id] = store
            return store

    def rebuild(self, base_id: str, dimensions: int) -> Path | None:
        """Set an unreadable (corrupt or missing) store aside and create an empty one.

        The damaged SQLite file and its WAL/SHM are renamed to
        ``<id>.sqlite.corrupt-<stamp>[-wal|-shm]`` (kept for inspection; `destroy`
        removes them with the base); the derived matrix files are deleted. Returns
        where the old file went (None when there was none). A stale WAL must never
        sit next to the new file: SQLite would replay it into the fresh database.
        """
        path = self.path_for(base_id)
        with self._lock:
            store = self._stores.pop(base_id, None)
            if store is not None:
                store.close()
            stamp = time.strftime("%Y%m%dT%H%M%S")
            moved: Path | None = None
            for suffix in ("", "-wal", "-shm"):
                old = path.with_name(path.name + suffix)
                if old.exists():
                    target = path.with_name(f"{path.name}.corrupt-{stamp}{suffix}")
                    os.replace(old, target)
                    moved = moved or target
            for p in self.bases_dir.glob(f"{base_id}.vectors*"):
                p.unlink(missing_ok=True)
            store = BaseStore.open(path, dimensions, create=True, tuning=self.tuning)
            self._stores[base_id] = store
            return moved

    def files_of(self, base_id: str) -> list[Path]:
        """Every file on disk that belongs to the base (SQLite, WAL/SHM, matrix, temp files)."""
        path = self.path_for(base_id)
        if not self.bases_dir.is_dir():
            return []
        # Base ids contain no dot, so "<id>." cannot prefix another base's files.
        return sorted(
            p
            for p in self.bases_dir.glob(f"{base_id}.*")
            if p.name.startswith(path.stem + ".")
        )

    def destroy(self, base_id: str) -> list[str]:
        """Close the base's store and delete its files; returns the paths that could NOT be removed."""
        with self._lock:
            store = self._stores.pop(base_id, None)
            if store is not None:
                store.close()
            leftovers: list[str] = []
            for p in self.files_of(base_id):
                try:
                    p.unlink()
                except FileNotFoundError:
                    continue
                except OSError:
                    pass
                if p.exists():
                    leftovers.append(str(p))
            return leftovers

    def close_all(self) -> None:
        with self._lock:
            stores, self._stores = list(self._stores.values()), {}
        for store in stores:
            store.close()

    def __contains__(self, base_id: str) -> bool:
        with self._lock:
            return base_id in self._stores
