"""Reads and searches of a base store: chunk rows, nearest vectors, FTS5 matches.

Nothing here writes. The vector search takes an immutable snapshot of the matrix
under the lock and does its math outside it, so searches never wait on each other's
arithmetic.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable, Sequence

import numpy as np

from ktui.core.errors import StoreDamagedError, StoreError
from ktui.core.models import ChunkRecord
from ktui.core.search.keyword import fts_match_expression

from .hybrid import HybridSearch
from .rows import StoredRows, batches, id_list, is_corruption, record
from .sidecar import MatrixSidecar
from .vector_search import normalise, search_snapshot

log = logging.getLogger(__name__)


class ChunkQueries(HybridSearch, MatrixSidecar):
    """Chunk reads and the three primitive searches (see the module docstring)."""

    def list_chunks(self, item_ids: Iterable[str]) -> list[ChunkRecord]:
        """Chunks of these items: items in the given order, each by chunk_index."""
        wanted = list(dict.fromkeys(id_list(item_ids)))
        by_item: dict[str, list[ChunkRecord]] = {i: [] for i in wanted}
        with self._lock, self._sql("list chunks"):
            for part in batches(wanted):
                marks = ",".join("?" * len(part))
                for row in self._con.execute(
                    f"SELECT id, item_id, chunk_index, text, metadata FROM chunk WHERE item_id IN ({marks}) "
                    "ORDER BY item_id, chunk_index",
                    part,
                ):
                    by_item[row[1]].append(record(row))
        return [rec for item in wanted for rec in by_item[item]]

    def get_chunk(self, chunk_id: str) -> ChunkRecord | None:
        with self._lock, self._sql(f"read chunk {chunk_id}"):
            row = self._con.execute(
                "SELECT id, item_id, chunk_index, text, metadata FROM chunk WHERE id = ?",
                (chunk_id,),
            ).fetchone()
        return record(row) if row else None

    def fetch(self, chunk_ids: Sequence[str]) -> list[ChunkRecord]:
        """Records for ``chunk_ids`` in the given order; unknown ids are skipped."""
        found: dict[str, ChunkRecord] = {}
        unique = list(dict.fromkeys(chunk_ids))
        with self._lock, self._sql("fetch chunks"):
            for part in batches(unique):
                marks = ",".join("?" * len(part))
                for row in self._con.execute(
                    f"SELECT id, item_id, chunk_index, text, metadata FROM chunk WHERE id IN ({marks})",
                    part,
                ):
                    found[row[0]] = record(row)
        return [found[c] for c in chunk_ids if c in found]

    def item_ids(self) -> set[str]:
        with self._lock, self._sql("list item ids"):
            return {
                r[0] for r in self._con.execute("SELECT DISTINCT item_id FROM chunk")
            }

    def count(self) -> int:
        with self._lock, self._sql("count chunks"):
            return int(self._con.execute("SELECT count(*) FROM chunk").fetchone()[0])

    def count_vectors(self) -> int:
        """Chunks whose stored vector has this store's width (all of them in a healthy store)."""
        with self._lock, self._sql("count vectors"):
            return int(self._con.execute(
                "SELECT count(*) FROM chunk WHERE length(vector) = ?", (self.dimensions * 4,)
            ).fetchone()[0])

    def read_rows(self, after: int = 0, limit: int = 1000) -> StoredRows:
        """Up to ``limit`` chunk rows after insertion position ``after``, in insertion order,
        exactly as stored (ids, metadata text, vectors): one page of a whole-store copy."""
        with self._lock, self._sql("read chunk rows"):
            rows = self._con.execute(
                "SELECT seq, id, item_id, chunk_index, text, metadata, vector FROM chunk WHERE seq > ? "
                "ORDER BY seq LIMIT ?", (int(after), int(limit)),
            ).fetchall()
        width = self.dimensions * 4
        for row in rows:
            if not isinstance(row[6], bytes) or len(row[6]) != width:
                raise StoreError(f"Vector store file {self.path}: chunk {row[1]} has no vector of {self.dimensions} "
                                 "dimensions (run `ktui doctor`)")
        vectors = np.frombuffer(b"".join(r[6] for r in rows), dtype=np.float32).reshape(len(rows), self.dimensions)
        return StoredRows([int(r[0]) for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                          [int(r[3]) for r in rows], [r[4] for r in rows], [r[5] for r in rows], vectors)

    # --------------------------------------------------------------- search

    def search_vector(self, query: np.ndarray, k: int) -> list[tuple[str, float]]:
        """Top-``k`` chunks by cosine similarity to ``query``, best first: ``(chunk_id, similarity)``."""
        q = self._check_vectors(
            np.asarray(query, dtype=np.float32).reshape(1, -1), 1, what="query vector"
        )[0]
        if k <= 0:
            return []
        with self._lock, self._sql("load vectors"):
            snap = self._ensure_index().snapshot()
        seqs, scores = search_snapshot(
            snap, normalise(q[None, :])[0], int(k), self.tuning
        )
        if not len(seqs):
            return []
        ids = self._ids_for_seqs(seqs.tolist())
        return [
            (ids[s], float(sc))
            for s, sc in zip(seqs.tolist(), scores.tolist(), strict=True)
            if s in ids
        ]

    def search_bm25(self, query: str, k: int) -> list[tuple[str, float]]:
        """Top-``k`` chunks by FTS5 bm25, best first; score = -bm25 (higher is better).

        Any text is accepted: it is reduced to quoted terms OR-ed together
        (see :mod:`core.store.fts`); text without letters or digits finds nothing.
        """
        expr = fts_match_expression(query)
        if expr is None or k <= 0:
            return []
        sql = (
            "SELECT c.id, f.rank FROM (SELECT rowid, rank FROM chunk_fts WHERE chunk_fts MATCH ? "
            "ORDER BY rank LIMIT ?) AS f JOIN chunk AS c ON c.seq = f.rowid ORDER BY f.rank, c.seq"
        )
        with self._lock:
            self._check_open()
            try:
                rows = self._con.execute(sql, (expr, int(k))).fetchall()
            except sqlite3.OperationalError as exc:
                if "fts5" in str(exc).lower() or "syntax" in str(exc).lower():
                    log.warning("bm25 query %r rejected by FTS5: %s", expr, exc)
                    return []
                raise StoreError(
                    f"Vector store file {self.path}: full-text search failed: {exc}"
                ) from exc
            except sqlite3.Error as exc:
                if is_corruption(exc):
                    self.damaged = f"is corrupt: full-text search failed: {exc}"
                    raise StoreDamagedError(str(self.path), self.damaged) from exc
                raise StoreError(
                    f"Vector store file {self.path}: full-text search failed: {exc}"
                ) from exc
        return [(cid, -float(rank)) for cid, rank in rows]
