"""StoreManager: the per-base stores under ``<data_dir>/bases``, opened lazily and cached."""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

from ktui.core.errors import StoreDamagedError, StoreError

from .base_store import BaseStore
from .matrix_files import Tuning

_BASE_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


class StoreManager:
    """Owns every open BaseStore of one data directory. Thread-safe."""

    def __init__(self, data_dir: Path, *, tuning: Tuning | None = None, read_only: bool = False):
        """`read_only`: a reader's stores (see BaseStore.open); create, rebuild and
        destroy are refused."""
        self.data_dir = Path(data_dir)
        self.read_only = read_only
        self.bases_dir = self.data_dir / "bases"
        self.tuning = tuning
        self._stores: dict[str, BaseStore] = {}
        self._lock = threading.Lock()
        self._damaged: dict[str, StoreDamagedError] = {}  # base id -> why its store is unusable (this process)

    def path_for(self, base_id: str) -> Path:
        """``bases/<base_id>.sqlite``; refuses ids that could escape the directory."""
        if not isinstance(base_id, str) or not _BASE_ID.match(base_id):
            raise StoreError(f"Invalid base id for a store file name: {base_id!r}")
        return self.bases_dir / f"{base_id}.sqlite"

    def create(self, base_id: str, dimensions: int) -> BaseStore:
        """Create the base's store (StoreError when it already exists)."""
        path = self.path_for(base_id)
        self._refuse_if_read_only(path)
        with self._lock:
            if base_id in self._stores:
                raise StoreError(f"Vector store file {path} already exists")
            self._check_bases_dir()
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
        """The open store of a base (opened on first use).

        StoreDamagedError when the file is missing, corrupt or not a ktui store: a damaged
        file is moved aside first (``<id>.sqlite.corrupt-<stamp>``, never deleted), so the
        base reports "needs rebuild" until a forced reindex creates a fresh store.
        """
        path = self.path_for(base_id)
        with self._lock:
            store = self._stores.get(base_id)
            if store is not None and store.damaged is not None:
                self._stores.pop(base_id, None)
                store.close()
                self._damaged[base_id] = StoreDamagedError(str(path), store.damaged, self._set_aside(path, base_id))
                store = None
            if store is not None:
                if store.dimensions != dimensions:
                    raise StoreError(
                        f"Vector store file {path} holds {store.dimensions}-dimension vectors, not {dimensions}"
                    )
                return store
            known = self._damaged.get(base_id)
            if known is not None and not path.exists():
                raise known
            self._check_bases_dir()
            try:
                store = BaseStore.open(path, dimensions, create=False, tuning=self.tuning, read_only=self.read_only)
            except StoreDamagedError as exc:
                if self.read_only:  # setting the file aside is the holder's job (a reader never writes)
                    raise
                kept = self._set_aside(path, base_id) if path.exists() else None
                damaged = StoreDamagedError(str(path), exc.reason, kept) if kept else exc
                self._damaged[base_id] = damaged
                raise damaged from exc
            self._damaged.pop(base_id, None)
            self._stores[base_id] = store
            return store

    def where_of(self, base_id: str) -> str:
        return str(self.path_for(base_id))

    def exists(self, base_id: str) -> bool:
        return self.path_for(base_id).exists()

    def problem(self, base_id: str) -> str | None:
        """Why the base's store cannot be used right now (None when it can, or when that is
        not known without opening it): cheap — a dict look-up and at most one stat."""
        store = self._stores.get(base_id)
        if store is not None:
            return None if store.damaged is None else f"store {store.damaged}"
        path = self.path_for(base_id)
        known = self._damaged.get(base_id)
        if known is not None and not path.exists():
            return f"store {known.reason}" + (f" (kept as {Path(known.kept).name})" if known.kept else "")
        try:
            if not path.exists():
                return f"store {path} is missing"
        except OSError as exc:
            return f"store {path} cannot be checked: {exc.strerror or exc}"
        return None

    def _check_bases_dir(self) -> None:
        if self.bases_dir.exists() and not self.bases_dir.is_dir():
            raise StoreError(
                f"{self.bases_dir} is a file, not a folder: ktui keeps the bases' stores there; "
                "move the file away"
            )

    def _set_aside(self, path: Path, base_id: str) -> str | None:
        """Rename the SQLite file (with its WAL/SHM: SQLite must never replay a stale WAL
        into a new file) to ``*.corrupt-<stamp>``; delete the derived matrix files."""
        stamp = time.strftime("%Y%m%dT%H%M%S")
        moved: Path | None = None
        for suffix in ("", "-wal", "-shm"):
            old = path.with_name(path.name + suffix)
            if old.exists():
                target = path.with_name(f"{path.name}.corrupt-{stamp}{suffix}")
                n = 1
                while target.exists():
                    target = path.with_name(f"{path.name}.corrupt-{stamp}.{n}{suffix}")
                    n += 1
                os.replace(old, target)
                moved = moved or target
        for p in self.bases_dir.glob(f"{base_id}.vectors*"):
            p.unlink(missing_ok=True)
        return str(moved) if moved else None

    def rebuild(self, base_id: str, dimensions: int) -> Path | None:
        """Set an unreadable (corrupt or missing) store aside and create an empty one.

        The damaged SQLite file and its WAL/SHM are renamed to
        ``<id>.sqlite.corrupt-<stamp>[-wal|-shm]`` (kept for inspection; `destroy`
        removes them with the base); the derived matrix files are deleted. Returns
        where the old file went (None when there was none). A stale WAL must never
        sit next to the new file: SQLite would replay it into the fresh database.
        """
        path = self.path_for(base_id)
        self._refuse_if_read_only(path)
        with self._lock:
            store = self._stores.pop(base_id, None)
            if store is not None:
                store.close()
            moved = self._set_aside(path, base_id)
            self._check_bases_dir()
            store = BaseStore.open(path, dimensions, create=True, tuning=self.tuning)
            self._damaged.pop(base_id, None)
            self._stores[base_id] = store
            return Path(moved) if moved else None

    def set_aside(self, base_id: str, reason: str) -> str | None:
        """Close the base's store and move its file aside as damaged (the base then needs a
        rebuild). Returns where the file went."""
        path = self.path_for(base_id)
        with self._lock:
            store = self._stores.pop(base_id, None)
            if store is not None:
                store.close()
            kept = self._set_aside(path, base_id)
            self._damaged[base_id] = StoreDamagedError(str(path), reason, kept)
            return kept

    def drop_matrix(self, base_id: str) -> list[Path]:
        """Close the store and delete its derived vector files: the next open rebuilds
        them from the SQLite rows. Returns the files removed."""
        with self._lock:
            store = self._stores.pop(base_id, None)
            if store is not None:
                store.close()
            removed = []
            for p in self.bases_dir.glob(f"{base_id}.vectors*"):
                p.unlink(missing_ok=True)
                removed.append(p)
            return removed

    def stray_files(self, known_ids: set[str]) -> list[Path]:
        """Files under bases/ that belong to no base in `known_ids`: leftovers of a base
        delete or create that was killed half-way (or files someone put there)."""
        if not self.bases_dir.is_dir():
            return []
        return sorted(p for p in self.bases_dir.iterdir() if p.name.split(".", 1)[0] not in known_ids)

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
        self._refuse_if_read_only(self.path_for(base_id))
        with self._lock:
            store = self._stores.pop(base_id, None)
            if store is not None:
                store.close()
            self._damaged.pop(base_id, None)
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

    def _refuse_if_read_only(self, path: Path) -> None:
        if self.read_only:
            raise StoreError(f"Vector store file {path}: opened read-only (a reader never changes a store)")

    def close_all(self) -> None:
        with self._lock:
            stores, self._stores = list(self._stores.values()), {}
        for store in stores:
            store.close()

    def __contains__(self, base_id: str) -> bool:
        with self._lock:
            return base_id in self._stores
