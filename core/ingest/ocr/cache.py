"""Recognised pages, keyed by content: reindexing an unchanged scan runs no OCR.

The same pattern as the embedding cache (core/embeddings/cache.py): the key is
`sha256(signature + NUL + file sha256 + NUL + page number)`, where the signature
names the engine version, the languages and the render resolution, so a changed
file, another language or a Tesseract upgrade misses by itself. One SQLite file
(`ocr-cache.sqlite` in the data directory), bounded to `max_entries` rows with the
oldest evicted first. It is written by the parse worker processes (WAL, a busy
timeout), and it is only an optimisation: a cache that cannot be opened or
written is switched off with a warning and recognition carries on.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import time
from pathlib import Path

from ktui.core.ingest.ocr.engine import PageText
from ktui.core.ingest.ocr.options import CACHE_FILENAME

__all__ = ["CACHE_FILENAME", "OcrCache", "open_cache", "page_key"]

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS ocr_page (
    id         INTEGER PRIMARY KEY,   -- insertion order: smallest = oldest
    key        BLOB NOT NULL UNIQUE,  -- sha256(signature, file sha256, page)
    text       TEXT NOT NULL,
    confidence REAL,
    words      INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);
"""


def page_key(signature: str, content_sha256: str, page: int) -> bytes:
    return hashlib.sha256(f"{signature}\0{content_sha256}\0{page}".encode()).digest()


class OcrCache:
    """Synchronous; one per worker process and cache file (see `open_cache`)."""

    def __init__(self, path: Path, max_entries: int):
        self.path = path
        self.max_entries = max_entries
        self._conn: sqlite3.Connection | None = None
        self.disabled = max_entries <= 0

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=10.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
            self._conn = conn
        return self._conn

    def _off(self, what: str, exc: Exception) -> None:
        log.warning("OCR cache %s disabled after a failed %s: %s", self.path, what, exc)
        self.disabled = True
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def get(self, key: bytes) -> PageText | None:
        if self.disabled:
            return None
        try:
            row = self._connect().execute(
                "SELECT text, confidence, words FROM ocr_page WHERE key = ?", (key,)
            ).fetchone()
        except (sqlite3.Error, OSError) as exc:
            self._off("read", exc)
            return None
        return PageText(row[0], row[1], row[2]) if row else None

    def put(self, key: bytes, page: PageText) -> None:
        if self.disabled:
            return
        try:
            conn = self._connect()
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(
                    "INSERT OR IGNORE INTO ocr_page(key, text, confidence, words, created_at) VALUES (?,?,?,?,?)",
                    (key, page.text, page.confidence, page.words, int(time.time())),
                )
                conn.execute(
                    "DELETE FROM ocr_page WHERE id <= (SELECT MAX(id) FROM ocr_page) - ?", (self.max_entries,)
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except (sqlite3.Error, OSError) as exc:
            self._off("write", exc)

    def count(self) -> int:
        try:
            return int(self._connect().execute("SELECT COUNT(*) FROM ocr_page").fetchone()[0])
        except (sqlite3.Error, OSError):
            return 0


_OPEN: dict[tuple[str, int], OcrCache] = {}


def open_cache(path: str | None, max_entries: int) -> OcrCache | None:
    """The process's cache for `path` (kept open across files), or None without one."""
    if not path or max_entries <= 0:
        return None
    key = (path, max_entries)
    cache = _OPEN.get(key)
    if cache is None:
        cache = _OPEN[key] = OcrCache(Path(path), max_entries)
    return cache
