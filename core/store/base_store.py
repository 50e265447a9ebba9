"""One base's chunk store: SQLite rows + FTS5 index + the vector matrix.

SQLite (``bases/<base_id>.sqlite``, WAL) is the source of truth: every chunk
row carries its text, metadata and float32 vector BLOB, and an FTS5
external-content index over the text is kept in step by triggers inside the
same transaction. The vector matrix (:mod:`core.store.matrix`) is derived data:
loaded lazily, updated after each committed write, rebuilt from the BLOBs when
its files do not match the store's write generation.

Thread safety: every method may be called from any thread. One re-entrant lock
guards the SQLite connection and matrix mutations; the search math itself runs
on an immutable snapshot outside the lock.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import tempfile
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import numpy as np

from ktui.core.errors import StoreDamagedError, StoreError
from ktui.core.models import Chunk, ChunkRecord
from ktui.core.search.fusion import CANDIDATE_POOL, fuse_scores
from ktui.core.search.keyword import FTS_TOKENIZER, fts_match_expression, has_terms, index_text
from ktui.core.storage_faults import rollback_quietly, storage_error

from .matrix import (
    Expected,
    MatrixFiles,
    StaleMatrix,
    Tuning,
    VectorIndex,
    normalise,
    quantise,
    search_snapshot,
)

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2
_BATCH = 500  # ids per IN (...) query

_FTS_STATEMENTS = (
    f"CREATE VIRTUAL TABLE chunk_fts USING fts5(text, content='', tokenize='{FTS_TOKENIZER}')",
    """CREATE TRIGGER chunk_ai AFTER INSERT ON chunk BEGIN
    INSERT INTO chunk_fts(rowid, text) VALUES (new.seq, coalesce(new.fts_text, new.text));
END""",
    """CREATE TRIGGER chunk_ad AFTER DELETE ON chunk BEGIN
    INSERT INTO chunk_fts(chunk_fts, rowid, text) VALUES ('delete', old.seq, coalesce(old.fts_text, old.text));
END""",
    """CREATE TRIGGER chunk_au AFTER UPDATE OF text, fts_text ON chunk BEGIN
    INSERT INTO chunk_fts(chunk_fts, rowid, text) VALUES ('delete', old.seq, coalesce(old.fts_text, old.text));
    INSERT INTO chunk_fts(rowid, text) VALUES (new.seq, coalesce(new.fts_text, new.text));
END""",
)
_FTS_SCHEMA = "".join(statement + ";\n" for statement in _FTS_STATEMENTS)

# Schema 2: the FTS index is contentless and indexes `fts_text` (the text with CJK
# runs segmented into bigrams, see core.search.keyword.index_text) when it is set,
# else `text`; no stemmer. Schema 1 stores are migrated at open (_migrate).
_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value NOT NULL);
CREATE TABLE chunk (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    item_id TEXT NOT NULL,
    chunk_index INTEGER NOT NULL,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    vector BLOB NOT NULL,
    fts_text TEXT,
    UNIQUE (item_id, chunk_index)
);
""" + _FTS_SCHEMA


class VectorShapeError(StoreError, ValueError):
    """Vectors handed to the store do not have the base's width (or are not finite)."""


@dataclass(frozen=True, slots=True)
class MatrixInfo:
    """How the vector matrix was obtained and what it holds (for tests, benchmarks, diagnostics)."""

    loaded: bool
    source: (
        str | None
    )  # "file" (persisted matrix reused) | "rebuilt" (from the BLOBs) | None
    reason: str | None  # why it was rebuilt
    rows: int  # matrix rows including tombstones
    live: int
    resident_bytes: int  # RAM held by the int8 copy, scales and row table
    float32_bytes: int  # live * dimensions * 4, what a plain float32 matrix would hold


class BaseStore:
    """See the module docstring. Create with :meth:`open`."""

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

    # ------------------------------------------------------------- opening

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
        con: sqlite3.Connection | None = None
        try:
            if read_only:
                con = sqlite3.connect(
                    f"{path.resolve().as_uri()}?mode=ro",
                    uri=True,
                    check_same_thread=False,
                    isolation_level=None,
                    timeout=10.0,
                )
                con.execute("PRAGMA query_only=ON")
            else:
                con = sqlite3.connect(
                    path, check_same_thread=False, isolation_level=None, timeout=10.0
                )
                con.execute("PRAGMA journal_mode=WAL")
                con.execute("PRAGMA synchronous=NORMAL")
            con.execute("PRAGMA temp_store=MEMORY")
            if create:
                store_uuid = uuid.uuid4().hex  # hex only: safe to inline below
                con.executescript(
                    "BEGIN IMMEDIATE;"
                    + _SCHEMA
                    + "INSERT INTO meta(key, value) VALUES "
                    + f"('schema_version', {SCHEMA_VERSION}), ('dimensions', {int(dimensions)}), "
                    + f"('uuid', '{store_uuid}'), ('generation', 0);"
                    + "COMMIT;"
                )
            else:
                meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
                missing = {
                    "schema_version",
                    "dimensions",
                    "uuid",
                    "generation",
                } - meta.keys()
                if missing:
                    raise StoreDamagedError(str(path), f"is not a ktui store (meta lacks {sorted(missing)})")
                if int(meta["schema_version"]) > SCHEMA_VERSION:
                    raise StoreError(
                        f"Vector store file {path} was written by a newer ktui (schema {meta['schema_version']})"
                    )
                if int(meta["dimensions"]) != dimensions:
                    raise StoreError(
                        f"Vector store file {path} holds {meta['dimensions']}-dimension vectors, not {dimensions}"
                    )
                if int(meta["schema_version"]) < SCHEMA_VERSION:
                    try:
                        if read_only:  # the one write a reader makes: a transactional, one-time upgrade
                            writer = sqlite3.connect(path, isolation_level=None, timeout=10.0)
                            try:
                                _migrate(writer, path)
                            finally:
                                writer.close()
                        else:
                            _migrate(con, path)
                    except sqlite3.Error as exc:
                        raise StoreError(
                            f"Vector store file {path} could not be upgraded to store schema {SCHEMA_VERSION} "
                            f"(nothing was changed; it is retried on the next open): {exc}"
                        ) from exc
                con.execute(
                    "SELECT seq, id, item_id, chunk_index, text, metadata, vector, fts_text FROM chunk LIMIT 0"
                ).fetchall()
                con.execute("SELECT rowid FROM chunk_fts LIMIT 0").fetchall()
                store_uuid = str(meta["uuid"])
        except StoreError:
            if con is not None:
                con.close()
            if create:
                _remove_quietly(path)
            raise
        except (sqlite3.Error, ValueError, OSError) as exc:
            if con is not None:
                con.close()
            fault = storage_error(exc, path)
            if create:
                _remove_quietly(path)
                if fault is not None:
                    raise fault from exc
                raise StoreError(
                    f"Vector store file {path} could not be created: {exc}"
                ) from exc
            if fault is not None:
                raise fault from exc
            raise StoreDamagedError(str(path), f"is corrupt or unreadable: {exc}") from exc
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
                _remove_quietly(path)
                raise StoreError(
                    f"Vector store {path}: cannot write its matrix files: {exc}"
                ) from exc
        return store

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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --------------------------------------------------------------- writes

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
        rows = []
        ids: list[list[str]] = []
        arrays: list[np.ndarray] = []
        for item_id, chunks, vectors in entries:
            chunks = list(chunks)
            arr = self._check_vectors(vectors, len(chunks), what=f"vectors for item {item_id}")
            arrays.append(arr)
            item_ids: list[str] = []
            for index, chunk in enumerate(chunks):
                text = getattr(chunk, "text", None)
                if not isinstance(text, str):
                    raise TypeError(f"chunk {index} of item {item_id} has no text")
                chunk_id = uuid.uuid4().hex
                item_ids.append(chunk_id)
                rows.append(
                    (
                        chunk_id,
                        item_id,
                        index,
                        text,
                        _dump_metadata(getattr(chunk, "metadata", None)),
                        arr[index].tobytes(),
                        index_text(text),
                    )
                )
            ids.append(item_ids)
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
                first = con.execute("SELECT coalesce(max(seq), 0) FROM chunk").fetchone()[0]
                con.executemany(
                    "INSERT INTO chunk(id, item_id, chunk_index, text, metadata, vector, fts_text) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                new = [r[0] for r in con.execute("SELECT seq FROM chunk WHERE seq > ? ORDER BY seq", (first,))]
                generation = self._bump_generation()
                con.execute("COMMIT")
            except BaseException:
                rollback_quietly(con)
                raise
            arr = np.concatenate(arrays) if len(arrays) > 1 else arrays[0]
            self._apply(index_, old, np.asarray(new, np.int64), arr, generation)
        return ids

    def delete_items(self, item_ids: Iterable[str]) -> int:
        """Delete every chunk of these items in one transaction; returns how many were deleted."""
        wanted = list(dict.fromkeys(_ids(item_ids)))
        if not wanted:
            return 0
        with self._lock, self._sql("delete items"):
            index_ = self._ensure_index()
            con = self._con
            con.execute("BEGIN IMMEDIATE")
            try:
                old: list[int] = []
                for part in _batches(wanted):
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
            self._apply(
                index_,
                old,
                np.empty(0, np.int64),
                np.empty((0, self.dimensions), np.float32),
                generation,
            )
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
            self._apply(
                index_,
                [row[0]],
                np.empty(0, np.int64),
                np.empty((0, self.dimensions), np.float32),
                generation,
            )
            return _record(row[1:])

    # ---------------------------------------------------------------- reads

    def list_chunks(self, item_ids: Iterable[str]) -> list[ChunkRecord]:
        """Chunks of these items: items in the given order, each by chunk_index."""
        wanted = list(dict.fromkeys(_ids(item_ids)))
        by_item: dict[str, list[ChunkRecord]] = {i: [] for i in wanted}
        with self._lock, self._sql("list chunks"):
            for part in _batches(wanted):
                marks = ",".join("?" * len(part))
                for row in self._con.execute(
                    f"SELECT id, item_id, chunk_index, text, metadata FROM chunk WHERE item_id IN ({marks}) "
                    "ORDER BY item_id, chunk_index",
                    part,
                ):
                    by_item[row[1]].append(_record(row))
        return [rec for item in wanted for rec in by_item[item]]

    def get_chunk(self, chunk_id: str) -> ChunkRecord | None:
        with self._lock, self._sql(f"read chunk {chunk_id}"):
            row = self._con.execute(
                "SELECT id, item_id, chunk_index, text, metadata FROM chunk WHERE id = ?",
                (chunk_id,),
            ).fetchone()
        return _record(row) if row else None

    def fetch(self, chunk_ids: Sequence[str]) -> list[ChunkRecord]:
        """Records for ``chunk_ids`` in the given order; unknown ids are skipped."""
        found: dict[str, ChunkRecord] = {}
        unique = list(dict.fromkeys(chunk_ids))
        with self._lock, self._sql("fetch chunks"):
            for part in _batches(unique):
                marks = ",".join("?" * len(part))
                for row in self._con.execute(
                    f"SELECT id, item_id, chunk_index, text, metadata FROM chunk WHERE id IN ({marks})",
                    part,
                ):
                    found[row[0]] = _record(row)
        return [found[c] for c in chunk_ids if c in found]

    def item_ids(self) -> set[str]:
        with self._lock, self._sql("list item ids"):
            return {
                r[0] for r in self._con.execute("SELECT DISTINCT item_id FROM chunk")
            }

    def count(self) -> int:
        with self._lock, self._sql("count chunks"):
            return int(self._con.execute("SELECT count(*) FROM chunk").fetchone()[0])

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
                if _is_corruption(exc):
                    self.damaged = f"is corrupt: full-text search failed: {exc}"
                    raise StoreDamagedError(str(self.path), self.damaged) from exc
                raise StoreError(
                    f"Vector store file {self.path}: full-text search failed: {exc}"
                ) from exc
        return [(cid, -float(rank)) for cid, rank in rows]

    def search_hybrid(
        self, query_vec: np.ndarray, query: str, k: int, alpha: float
    ) -> list[tuple[str, float]]:
        """Both sides' best ``max(CANDIDATE_POOL, k)`` fused (core.search.fusion); ``alpha`` weights vector.

        The search itself (``core.search.run_search``) does the same with filters,
        rerank and relevance; this is the store-level shortcut for tests and benchmarks.
        """
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"hybrid alpha must be within 0..1, got {alpha!r}")
        if k <= 0:
            return []
        pool = max(CANDIDATE_POOL, int(k))
        vector = self.search_vector(query_vec, pool)
        keyword = self.search_bm25(query, pool)
        return fuse_scores(vector, keyword, alpha=alpha, limit=int(k))

    # ----------------------------------------------------------- invariants

    def matrix_info(self) -> MatrixInfo:
        with self._lock:
            idx = self._index
            return MatrixInfo(
                loaded=idx is not None,
                source=self._matrix_source,
                reason=self._matrix_reason,
                rows=idx.rows if idx else 0,
                live=idx.live if idx else 0,
                resident_bytes=idx.resident_bytes() if idx else 0,
                float32_bytes=(idx.live if idx else 0) * self.dimensions * 4,
            )

    def load_matrix(self) -> MatrixInfo:
        """Load (or rebuild) the matrix now instead of on the first search."""
        with self._lock, self._sql("load vectors"):
            self._ensure_index()
        return self.matrix_info()

    def integrity_check(self) -> list[str]:
        """SQLite's own `PRAGMA integrity_check` of the file: [] when it says "ok"."""
        with self._lock:
            self._check_open()
            try:
                rows = [str(r[0]) for r in self._con.execute("PRAGMA integrity_check(20)")]
            except sqlite3.DatabaseError as exc:
                return [f"integrity check failed: {exc}"]
        return [] if rows == ["ok"] else rows

    def check_invariants(self) -> list[str]:
        """Human-readable violations of the store's invariants (empty when healthy).

        Checks: FTS index internally consistent and in step with the chunk rows
        (no FTS document without its chunk, no indexable chunk missing), no
        (item_id, chunk_index) twice, every BLOB of the base's width, and the
        matrix in step with the rows (same live chunks, same generation, every
        float32/int8 row equal to its normalised/quantised BLOB).
        """
        problems: list[str] = []
        with self._lock, self._sql("check invariants"):
            con = self._con
            try:
                con.execute(
                    "INSERT INTO chunk_fts(chunk_fts) VALUES ('integrity-check')"
                )
            except sqlite3.DatabaseError as exc:
                problems.append(f"FTS index fails its integrity check: {exc}")
            con.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunk_fts_docs USING fts5vocab(main, chunk_fts, instance)"
            )
            fts_docs = {
                r[0]
                for r in con.execute("SELECT DISTINCT doc FROM temp.chunk_fts_docs")
            }
            chunk_rows = {
                seq: (cid, text)
                for seq, cid, text in con.execute("SELECT seq, id, text FROM chunk")
            }
            for doc in sorted(fts_docs - chunk_rows.keys()):
                problems.append(f"FTS row {doc} has no chunk")
            for seq in sorted(chunk_rows.keys() - fts_docs):
                cid, text = chunk_rows[seq]
                if has_terms(text):
                    problems.append(f"chunk {cid} is missing from the FTS index")
            for item_id, chunk_index, n in con.execute(
                "SELECT item_id, chunk_index, count(*) FROM chunk GROUP BY item_id, chunk_index HAVING count(*) > 1"
            ):
                problems.append(
                    f"chunk {chunk_index} of item {item_id} is stored {n} times"
                )
            for (cid,) in con.execute(
                "SELECT id FROM chunk WHERE length(vector) != ?", (self.dimensions * 4,)
            ):
                problems.append(
                    f"chunk {cid} has a vector that is not {self.dimensions} float32 values"
                )
            try:
                index_ = self._ensure_index()
            except StoreError as exc:
                problems.append(f"matrix cannot be built: {exc}")
                return problems
            generation = self._generation()
            if index_.generation != generation:
                problems.append(
                    f"matrix generation {index_.generation} != store generation {generation}"
                )
            live = set(index_.live_seqs().tolist())
            if live != chunk_rows.keys():
                extra, missing = (
                    len(live - chunk_rows.keys()),
                    len(chunk_rows.keys() - live),
                )
                problems.append(
                    f"matrix out of step with rows: {extra} rows without chunk, {missing} chunks without row"
                )
            problems += self._check_matrix_rows(index_)
        return problems

    # ------------------------------------------------------------ internals

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
            if _is_corruption(exc):
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
        try:
            arr = np.asarray(vectors, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise VectorShapeError(f"{what}: not a numeric matrix ({exc})") from exc
        if n == 0 and arr.size == 0:
            return np.empty((0, self.dimensions), np.float32)
        if arr.ndim != 2 or arr.shape[0] != n:
            raise VectorShapeError(
                f"{what}: expected {n} row(s) of {self.dimensions} values, got shape {arr.shape}"
            )
        if arr.shape[1] != self.dimensions:
            raise VectorShapeError(
                f"{what}: vectors are {arr.shape[1]} wide but this base stores {self.dimensions}-dimension vectors"
            )
        if not np.isfinite(arr).all():
            raise VectorShapeError(f"{what}: vectors contain NaN or infinity")
        return np.ascontiguousarray(arr)

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

    def _ensure_index(self) -> VectorIndex:
        """The loaded matrix; loads the persisted one or rebuilds it from the BLOBs. Lock held."""
        if self.read_only:
            return self._ensure_reader_index()
        if self._index is not None:
            return self._index
        expected = Expected(
            dims=self.dimensions,
            generation=self._generation(),
            store_uuid=self._uuid,
            live=int(self._con.execute("SELECT count(*) FROM chunk").fetchone()[0]),
        )
        try:
            self._index = VectorIndex.load(
                self.files, expected, self.tuning, self._fetch_raw
            )
            self._matrix_source, self._matrix_reason = "file", None
        except PermissionError as exc:
            raise StoreError(
                f"Vector store {self.path}: cannot open its matrix files: {exc}"
            ) from exc
        except StaleMatrix as exc:
            log.info("rebuilding vector matrix of %s: %s", self.path.name, exc)
            try:
                self._index = VectorIndex.build(
                    self.files,
                    self.dimensions,
                    self._uuid,
                    expected.generation,
                    self.tuning,
                    self._iter_blobs(),
                )
            except OSError as os_exc:
                raise StoreError(
                    f"Vector store {self.path}: cannot write its matrix files: {os_exc}"
                ) from os_exc
            self._matrix_source, self._matrix_reason = "rebuilt", str(exc)
        return self._index

    def _ensure_reader_index(self) -> VectorIndex:
        """A reader's matrix, as of the store's latest committed write generation.

        One read transaction pins the snapshot: the generation, the live count,
        the sample rows checked against the persisted files and (when those files
        belong to another generation, because the writer is between its SQLite
        commit and its matrix update, or compacting) the BLOBs a private matrix
        is built from. A matrix of an older generation is dropped and loaded again.
        """
        generation = self._generation()
        if self._index is not None and self._index.generation == generation:
            return self._index
        if self._index is not None:
            self._index.close()
            self._index = None
        self._con.execute("BEGIN")
        try:
            expected = Expected(
                dims=self.dimensions,
                generation=self._generation(),
                store_uuid=self._uuid,
                live=int(self._con.execute("SELECT count(*) FROM chunk").fetchone()[0]),
            )
            try:
                self._index = VectorIndex.load(
                    self.files, expected, self.tuning, self._fetch_raw, read_only=True
                )
                self._matrix_source, self._matrix_reason = "file", None
            except (StaleMatrix, OSError) as exc:
                if self._scratch is None:
                    self._scratch = tempfile.TemporaryDirectory(prefix="ktui-reader-")
                files = MatrixFiles.next_to(Path(self._scratch.name) / self.path.name)
                try:
                    self._index = VectorIndex.build(
                        files,
                        self.dimensions,
                        self._uuid,
                        expected.generation,
                        self.tuning,
                        self._iter_blobs(),
                    )
                except OSError as os_exc:
                    raise StoreError(
                        f"Vector store {self.path}: cannot build a reader's matrix: {os_exc}"
                    ) from os_exc
                self._matrix_source, self._matrix_reason = "rebuilt", str(exc)
        finally:
            self._con.execute("COMMIT")
        return self._index

    def _apply(
        self,
        index_: VectorIndex,
        removed: Sequence[int],
        added: np.ndarray,
        vectors: np.ndarray,
        generation: int,
    ) -> None:
        """Bring the matrix in step with a committed write; on failure drop it so the next use rebuilds."""
        try:
            index_.remove(removed)
            index_.append(added, vectors)
            index_.commit(generation)
        except Exception as exc:  # noqa: BLE001 - rows are committed; derived data must not fail the write
            log.warning(
                "vector matrix of %s dropped after a failed update: %s",
                self.path.name,
                exc,
            )
            index_.close()
            self._index = None
            self._matrix_source, self._matrix_reason = None, f"update failed: {exc}"

    def _iter_blobs(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        cur = self._con.execute("SELECT seq, id, vector FROM chunk ORDER BY seq")
        width = self.dimensions * 4
        while rows := cur.fetchmany(4096):
            for _seq, cid, blob in rows:
                if not isinstance(blob, bytes) or len(blob) != width:
                    raise StoreError(
                        f"Vector store file {self.path}: chunk {cid} has a vector of "
                        f"{len(blob) if isinstance(blob, bytes) else 0} bytes, expected {width}"
                    )
            seqs = np.fromiter((r[0] for r in rows), np.int64, len(rows))
            vecs = np.frombuffer(
                b"".join(r[2] for r in rows), dtype=np.float32
            ).reshape(len(rows), self.dimensions)
            yield seqs, vecs

    def _fetch_raw(self, seqs: list[int]) -> dict[int, np.ndarray]:
        out: dict[int, np.ndarray] = {}
        width = self.dimensions * 4
        for part in _batches(seqs):
            marks = ",".join("?" * len(part))
            for seq, blob in self._con.execute(
                f"SELECT seq, vector FROM chunk WHERE seq IN ({marks})", part
            ):
                if isinstance(blob, bytes) and len(blob) == width:
                    out[seq] = np.frombuffer(blob, dtype=np.float32)
        return out

    def _ids_for_seqs(self, seqs: list[int]) -> dict[int, str]:
        out: dict[int, str] = {}
        with self._lock, self._sql("resolve chunk ids"):
            for part in _batches(seqs):
                marks = ",".join("?" * len(part))
                out.update(
                    self._con.execute(
                        f"SELECT seq, id FROM chunk WHERE seq IN ({marks})", part
                    ).fetchall()
                )
        return out

    def _check_matrix_rows(self, index_: VectorIndex) -> list[str]:
        problems: list[str] = []
        snap = index_.snapshot()
        if snap.f32 is None:
            return problems
        alive = np.ones(len(snap.seq), bool)
        alive[snap.dead] = False
        positions = np.flatnonzero(alive)
        if len(positions) > 20000:  # keep the check affordable on big bases
            positions = np.random.default_rng(0).choice(positions, 20000, replace=False)
        raw = self._fetch_raw(snap.seq[positions].tolist())
        for p in positions.tolist():
            seq = int(snap.seq[p])
            if seq not in raw:
                continue  # reported as out of step above
            expect = normalise(raw[seq][None, :])
            if not np.allclose(np.asarray(snap.f32[p]), expect[0], atol=1e-5):
                problems.append(
                    f"matrix float32 row of chunk seq {seq} differs from its BLOB"
                )
            elif not np.array_equal(quantise(expect)[0][0], snap.i8[p]):
                problems.append(
                    f"matrix int8 row of chunk seq {seq} differs from its BLOB"
                )
        return problems


def _migrate(con: sqlite3.Connection, path: Path) -> None:
    """Bring an older store to SCHEMA_VERSION in one transaction (nothing changes on failure).

    1 → 2: the FTS index is rebuilt from the chunk rows without the Porter stemmer and
    with CJK bigrams (a new `fts_text` column holds the segmented text where it differs).
    Another process may be migrating the same file: the version is re-read under the
    write lock, so the work is done once.
    """
    con.execute("BEGIN IMMEDIATE")
    try:
        current = int(con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0])
        if current < 2:
            log.info("migrating %s from store schema %d: rebuilding its full-text index", path.name, current)
            con.execute("ALTER TABLE chunk ADD COLUMN fts_text TEXT")
            for trigger in ("chunk_ai", "chunk_ad", "chunk_au"):
                con.execute(f"DROP TRIGGER IF EXISTS {trigger}")
            con.execute("DROP TABLE IF EXISTS chunk_fts")
            segmented = [
                (segmented_text, seq)
                for seq, text in con.execute("SELECT seq, text FROM chunk")
                if (segmented_text := index_text(text)) is not None
            ]
            con.executemany("UPDATE chunk SET fts_text = ? WHERE seq = ?", segmented)
            for statement in _FTS_STATEMENTS:
                con.execute(statement)
            con.execute("INSERT INTO chunk_fts(rowid, text) SELECT seq, coalesce(fts_text, text) FROM chunk")
            con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (SCHEMA_VERSION,))
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def _ids(values: Iterable[str]) -> Iterable[str]:
    """A lone string is one id, not an iterable of characters."""
    return [values] if isinstance(values, str) else values


def _remove_quietly(path: Path) -> None:
    """Best-effort removal of a half-created store (the SQLite file and its side files)."""
    for p in [
        path,
        *(
            path.with_name(path.name + suffix)
            for suffix in ("-wal", "-shm", "-journal")
        ),
    ]:
        try:
            p.unlink(missing_ok=True)
        except OSError:
            pass
    for p in MatrixFiles.next_to(path).all():
        try:
            p.unlink(missing_ok=True)
        except OSError:
            pass


def _dump_metadata(metadata: Any) -> str:
    if metadata is None:
        return "{}"
    return json.dumps(dict(metadata), ensure_ascii=False, default=str)


def _record(row: Sequence[Any]) -> ChunkRecord:
    cid, item_id, chunk_index, text, metadata = row
    try:
        meta = json.loads(metadata) if metadata else {}
    except ValueError:
        meta = {}
    return ChunkRecord(
        id=cid,
        item_id=item_id,
        chunk_index=int(chunk_index),
        text=text,
        metadata=meta if isinstance(meta, dict) else {},
    )


def _batches(values: Sequence[Any], size: int = _BATCH) -> Iterator[list[Any]]:
    values = list(values)
    for start in range(0, len(values), size):
        yield values[start : start + size]


_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26


def _is_corruption(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return True
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text or "corrupt" in text
