"""Chunk writes of a base store: each one transaction, then the matrix follows.

Every write replaces, deletes or removes rows in ONE SQLite transaction that also
bumps the write generation; only after the commit is the matrix brought in step
(:meth:`MatrixSidecar._apply`), so a failed transaction leaves rows and matrix as
they were.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ktui.core.models import Chunk, ChunkRecord
from ktui.core.search.keyword import index_text
from ktui.core.storage_faults import rollback_quietly

from .rows import StoredRows, batches, id_list, new_chunk_rows, record
from .sidecar import MatrixSidecar


class ChunkWrites(MatrixSidecar):
    """Replacing and deleting chunks (see the module docstring)."""

    def replace_item_chunks(
        self, item_id: str, chunks: Sequence[Chunk], vectors: np.ndarray
    ) -> list[str]:
        """Replace every chunk of ``item_id`` with ``chunks`` in ONE transaction; returns the new chunk ids.

        ``vectors`` must be ``(len(chunks), dimensions)``. On any failure the
        transaction is rolled back and the item's previous chunks stay intact.
        """
        return self.replace_items([(item_id, chunks, vectors)])[0]

    def replace_items(
        self, entries: Sequence[tuple[str, Sequence[Chunk], np.ndarray]]
    ) -> list[list[str]]:
        """Replace the chunks of several items in ONE transaction (a group commit: the
        runtime writes every item that finished embedding while the previous write
        ran). Returns each item's new chunk ids; on any failure nothing changes."""
        rows: list[tuple[Any, ...]] = []
        ids: list[list[str]] = []
        arrays: list[np.ndarray] = []
        for item_id, chunks, vectors in entries:
            chunks = list(chunks)
            arr = self._check_vectors(vectors, len(chunks), what=f"vectors for item {item_id}")
            arrays.append(arr)
            new = new_chunk_rows(item_id, chunks)
            rows.extend((chunk_id, item_id, index, text, metadata, arr[index].tobytes(), index_text(text))
                        for chunk_id, index, text, metadata in new)
            ids.append([r[0] for r in new])
        if not entries:
            return ids
        item_list = [e[0] for e in entries]
        what = f"write chunks of {len(item_list)} items" if len(item_list) > 1 else f"write chunks of item {item_list[0]}"
        with self._lock, self._sql(what):
            index_ = self._ensure_index()
            con = self._con
            con.execute("BEGIN IMMEDIATE")
            try:
                old: list[int] = []
                for item_id in item_list:
                    old.extend(r[0] for r in con.execute("SELECT seq FROM chunk WHERE item_id = ?", (item_id,)))
                    con.execute("DELETE FROM chunk WHERE item_id = ?", (item_id,))
                seqs = _insert_rows(con, rows)
                generation = self._bump_generation()
                con.execute("COMMIT")
            except BaseException:
                rollback_quietly(con)
                raise
            arr = np.concatenate(arrays) if len(arrays) > 1 else arrays[0]
            self._apply(index_, old, np.asarray(seqs, np.int64), arr, generation)
        return ids

    def write_rows(self, rows: StoredRows, *, settle: bool = True) -> int:
        """Append chunk rows read from another store (`read_rows`), keeping their ids, items,
        metadata and vectors, in ONE transaction; the full-text entries are derived here.
        A chunk id or (item, index) already present fails the whole write (StoreError).
        ``settle`` is for backends with an index to build after a bulk load (none here)."""
        if not len(rows):
            return 0
        arr = self._check_vectors(rows.vectors, len(rows), what="vectors of the copied rows")
        values = [(cid, item_id, index, text, metadata, arr[i].tobytes(), index_text(text))
                  for i, (cid, item_id, index, text, metadata) in enumerate(
                      zip(rows.ids, rows.item_ids, rows.indexes, rows.texts, rows.metadata, strict=True))]
        with self._lock, self._sql(f"write {len(values)} copied chunks"):
            index_ = self._ensure_index()
            con = self._con
            con.execute("BEGIN IMMEDIATE")
            try:
                new = _insert_rows(con, values)
                generation = self._bump_generation()
                con.execute("COMMIT")
            except BaseException:
                rollback_quietly(con)
                raise
            self._apply(index_, [], np.asarray(new, np.int64), arr, generation)
        return len(values)

    def delete_items(self, item_ids: Iterable[str]) -> int:
        """Delete every chunk of these items in one transaction; returns how many were deleted."""
        wanted = list(dict.fromkeys(id_list(item_ids)))
        if not wanted:
            return 0
        with self._lock, self._sql("delete items"):
            index_ = self._ensure_index()
            con = self._con
            con.execute("BEGIN IMMEDIATE")
            try:
                old: list[int] = []
                for part in batches(wanted):
                    marks = ",".join("?" * len(part))
                    old += [
                        r[0]
                        for r in con.execute(
                            f"SELECT seq FROM chunk WHERE item_id IN ({marks})", part
                        )
                    ]
                    con.execute(f"DELETE FROM chunk WHERE item_id IN ({marks})", part)
                if not old:
                    con.execute("ROLLBACK")
                    return 0
                generation = self._bump_generation()
                con.execute("COMMIT")
            except BaseException:
                rollback_quietly(con)
                raise
            self._apply_removal(index_, old, generation)
            return len(old)

    def delete_chunk(self, chunk_id: str) -> ChunkRecord | None:
        """Delete one chunk; returns what it was, or None when there is no such chunk."""
        with self._lock, self._sql(f"delete chunk {chunk_id}"):
            index_ = self._ensure_index()
            con = self._con
            con.execute("BEGIN IMMEDIATE")
            try:
                row = con.execute(
                    "SELECT seq, id, item_id, chunk_index, text, metadata FROM chunk WHERE id = ?",
                    (chunk_id,),
                ).fetchone()
                if row is None:
                    con.execute("ROLLBACK")
                    return None
                con.execute("DELETE FROM chunk WHERE seq = ?", (row[0],))
                generation = self._bump_generation()
                con.execute("COMMIT")
            except BaseException:
                rollback_quietly(con)
                raise
            self._apply_removal(index_, [row[0]], generation)
            return record(row[1:])


def _insert_rows(con: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> list[int]:
    """Insert chunk rows (inside the caller's transaction) and return their new `seq`s in
    order: the vector matrix appends its rows in that order."""
    first = con.execute("SELECT coalesce(max(seq), 0) FROM chunk").fetchone()[0]
    con.executemany(
        "INSERT INTO chunk(id, item_id, chunk_index, text, metadata, vector, fts_text) VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    return [r[0] for r in con.execute("SELECT seq FROM chunk WHERE seq > ? ORDER BY seq", (first,))]
