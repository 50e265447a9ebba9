"""Content-keyed embedding cache: an in-memory LRU in front of a bounded SQLite file.

Key: `sha256(model_id + "\\0" + text)` — the model id plus the exact text, so
unchanged text is never embedded twice (reindexing costs no provider work), a
changed text misses by itself, and two models never share vectors. The hash keeps
keys small (32 bytes) whatever the chunk length; the NUL separator keeps
("a::b", "c") and ("a::", "bc") apart.

Persistent layer: `embedding-cache.sqlite` in the data directory, one row per key
with the float32 vector as a BLOB, bounded to `persistent_entries` rows (the
oldest inserted rows are evicted first). All SQLite work runs on the cache's own
connection thread (`ktui.core.sqlite_thread`, the helper the catalogue uses too) in
batches of at most 500 keys, so the event loop never waits on disk. The cache is an optimisation: if the file cannot be opened or
written (read-only disk, corruption), it is switched off with a warning and
embedding carries on.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np

from ktui.core.sqlite_thread import ThreadConnection
from ktui.core.storage_faults import rollback_quietly

T = TypeVar("T")

log = logging.getLogger(__name__)

_SQL_BATCH = 500  # keys per SELECT ... IN (...); well under SQLite's variable limit
_SCHEMA = """
CREATE TABLE IF NOT EXISTS embedding_cache (
    id     INTEGER PRIMARY KEY,           -- insertion order: smallest = oldest
    key    BLOB NOT NULL UNIQUE,          -- sha256(model_id + NUL + text)
    dims   INTEGER NOT NULL,
    vector BLOB NOT NULL,                 -- float32, little-endian
    created_at INTEGER NOT NULL
);
"""


def cache_key(model_id: str, text: str) -> bytes:
    """The 32-byte key of (model id, exact text)."""
    return hashlib.sha256(
        model_id.encode("utf-8", "surrogatepass") + b"\0" + text.encode("utf-8", "surrogatepass")
    ).digest()


class MemoryLRU:
    """A plain LRU of key -> vector (`OrderedDict`; get/put are O(1))."""

    def __init__(self, capacity: int):
        self.capacity = max(0, capacity)
        self._data: OrderedDict[bytes, np.ndarray] = OrderedDict()

    def get(self, key: bytes) -> np.ndarray | None:
        vec = self._data.get(key)
        if vec is not None:
            self._data.move_to_end(key)
        return vec

    def put(self, key: bytes, vec: np.ndarray) -> None:
        if self.capacity == 0:
            return
        self._data[key] = vec
        self._data.move_to_end(key)
        while len(self._data) > self.capacity:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        self._data.clear()


class DiskCache:
    """The SQLite layer, on its own thread: the connection lives on one worker thread
    (`ktui.core.sqlite_thread.ThreadConnection`, the helper the catalogue uses too),
    opened on first use; every call is one hop to it, so calls never overlap."""

    def __init__(self, path: Path, max_entries: int):
        self.path = path
        self.max_entries = max_entries
        self._thread: ThreadConnection | None = None
        self._opening = asyncio.Lock()
        self._count: int | None = None
        self.disabled = max_entries <= 0

    def _connect(self) -> sqlite3.Connection:
        """Runs on the connection's own thread."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=10.0, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
            self._count = conn.execute("SELECT COUNT(*) FROM embedding_cache").fetchone()[0]
        except BaseException:
            conn.close()
            raise
        return conn

    async def _guard(self, what: str, fn: Callable[[sqlite3.Connection], T]) -> T | None:
        if self.disabled:
            return None
        try:
            async with self._opening:
                if self._thread is None:
                    self._thread = await ThreadConnection.open(self._connect, name="ktui-embedding-cache")
            return await self._thread.call(fn)
        except (sqlite3.Error, OSError) as exc:
            log.warning("embedding cache %s disabled after a failed %s: %s", self.path, what, exc)
            self.disabled = True
            await self.close()
            return None

    async def get_many(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        def run(conn: sqlite3.Connection) -> dict[bytes, np.ndarray]:
            found: dict[bytes, np.ndarray] = {}
            for i in range(0, len(keys), _SQL_BATCH):
                part = keys[i : i + _SQL_BATCH]
                marks = ",".join("?" * len(part))
                for key, dims, blob in conn.execute(
                    f"SELECT key, dims, vector FROM embedding_cache WHERE key IN ({marks})", part
                ):
                    vec = np.frombuffer(blob, dtype="<f4")
                    if vec.size == dims and dims > 0:
                        found[bytes(key)] = vec.astype(np.float32)  # own, writable copy
            return found

        return await self._guard("read", run) or {}

    async def put_many(self, items: Sequence[tuple[bytes, np.ndarray]]) -> None:
        if not items:
            return

        def run(conn: sqlite3.Connection) -> None:
            now = int(time.time())
            rows = [(k, int(v.size), np.ascontiguousarray(v, dtype="<f4").tobytes(), now) for k, v in items]
            conn.execute("BEGIN IMMEDIATE")
            try:
                before = conn.total_changes
                conn.executemany(
                    "INSERT OR IGNORE INTO embedding_cache(key, dims, vector, created_at) VALUES (?,?,?,?)", rows
                )
                added = conn.total_changes - before
                self._count = (self._count or 0) + added
                excess = self._count - self.max_entries
                if excess > 0:
                    conn.execute(
                        "DELETE FROM embedding_cache WHERE id IN "
                        "(SELECT id FROM embedding_cache ORDER BY id LIMIT ?)",
                        (excess,),
                    )
                    self._count = conn.execute("SELECT COUNT(*) FROM embedding_cache").fetchone()[0]
                conn.execute("COMMIT")
            except BaseException:
                rollback_quietly(conn)
                raise

        await self._guard("write", run)

    async def count(self) -> int:
        def run(conn: sqlite3.Connection) -> int:
            return int(conn.execute("SELECT COUNT(*) FROM embedding_cache").fetchone()[0])

        return await self._guard("count", run) or 0

    async def close(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            await thread.close()


class EmbeddingCache:
    """Memory LRU + optional disk layer, with async batch get/put for the service."""

    def __init__(self, path: Path | None, *, memory_entries: int, persistent_entries: int):
        self.memory = MemoryLRU(memory_entries)
        self.disk = DiskCache(path, persistent_entries) if path is not None and persistent_entries > 0 else None
        self._buffer: list[tuple[bytes, np.ndarray]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def get_many(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """Vectors found for `keys` (memory first, then disk; disk hits are promoted)."""
        found: dict[bytes, np.ndarray] = {}
        missing: list[bytes] = []
        for k in keys:
            v = self.memory.get(k)
            if v is None:
                missing.append(k)
            else:
                found[k] = v
        if missing and self.disk is not None and not self.disk.disabled:
            from_disk = await self.disk.get_many(list(dict.fromkeys(missing)))
            for k, v in from_disk.items():
                self.memory.put(k, v)
            found.update(from_disk)
        return found

    async def put_many(self, items: Iterable[tuple[bytes, np.ndarray]]) -> None:
        """Store vectors: in memory at once, on disk behind the caller's back.

        Disk writes are buffered and flushed by one background task, so an indexing
        burst pays one thread hop and one transaction per flush instead of per call,
        and no caller waits for the disk. `flush()` / `aclose()` drain the buffer.
        """
        items = list(items)
        for k, v in items:
            self.memory.put(k, v)
        if self.disk is not None and not self.disk.disabled and items:
            self._buffer.extend(items)
            if self._flusher is None or self._flusher.done():
                self._flusher = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        while self._buffer and self.disk is not None:
            batch, self._buffer = self._buffer, []
            await self.disk.put_many(batch)

    async def flush(self) -> None:
        """Wait until every buffered vector is on disk."""
        while self._flusher is not None and not self._flusher.done():
            await asyncio.shield(self._flusher)
        if self._buffer:
            await self._drain()

    async def aclose(self) -> None:
        await self.flush()
        if self.disk is not None:
            await self.disk.close()
