"""One base's chunks in PostgreSQL: the same interface as the SQLite ``BaseStore``.

Writes (``replace_items``, ``delete_items``, ``delete_chunk``) are one transaction each,
beginning with the bump of the base's write generation in the registry, whose row lock
serialises writers of the same base across processes. Vectors are stored unit-length
(as the SQLite matrix keeps them), so cosine similarity is the inner product and an
all-zero vector scores 0 against everything. Exact search is a sequential scan
ordered by ``<#>``; once the base has ``PgTuning.hnsw_from`` chunks an HNSW index is
built (once, after the write that passed the size) and searches use it with
``hnsw.ef_search`` at least the number of results asked for (exact again when more
than pgvector's 1000 are asked). Keyword search: ``fts @@ tsquery`` ranked by
bm25 as FTS5 computes it (text.py builds both sides).

Every method may be called from any thread; each takes a connection of the pool for
its job. Errors are StoreError naming the server without its password.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Self

import numpy as np
import psycopg
from psycopg import sql

from ktui.core.errors import StoreError
from ktui.core.models import Chunk, ChunkRecord
from ktui.core.store_memory import BUILD_MEMORY, parse_memory

from ..connection import check_vectors
from ..hybrid import HybridSearch
from ..rows import StoredRows, id_list, new_chunk_rows, record
from ..vector_search import normalise
from .connection import Connections, scrub
from .schema import HNSW_MAX_DIMENSIONS, REGISTRY, hnsw_index_name
from .text import Term, indexed, query_plan, tsquery_literal

log = logging.getLogger(__name__)

EF_SEARCH_MAX = 1000  # pgvector's largest hnsw.ef_search
_COLUMNS = sql.SQL("id, item_id, chunk_index, text, metadata")


@dataclass(frozen=True, slots=True)
class PgTuning:
    """When a base gets its HNSW index and how it is searched (see docs/postgres.md)."""

    # chunks; below this an exact scan answers fast enough. Measured with an index built and
    # dropped at each size (2 busy cores, tests/benchmarks/test_bench_postgres.py, p50): at
    # k = 200, the pool every hybrid search asks for, HNSW first beats the exact scan at 10k
    # rows (384 dims: 8.0 vs 12.6 ms; 768: 18.5 vs 20.4 ms) and not at 5k (4.8 vs 2.6; 7.5 vs
    # 5.1); at k = 10 from 5k. From 50k on the exact scan is 2-10x slower (1M x 384: 0.8 s).
    hnsw_from: int = 10_000
    ef_search: int = 100  # at least this, and at least k
    # ...and one more candidate per this many rows: HNSW's recall falls as the graph grows
    # at a fixed ef_search (1M x 384, m 16: recall@10 0.705 at 100, 0.892 at 200, 0.948 at
    # 400, 0.955 at 700, 10-27 ms a query; the exact scan 0.8 s), so 1M rows search at ~714.
    ef_search_rows: int = 1_400
    hnsw_m: int = 16
    hnsw_ef_construction: int = 64
    # maintenance_work_mem while the index is built: the settings' `[store] build_memory`
    # (bounded there, 64MB..64GB); here only its form is checked, so a test may pass less
    build_memory: str = BUILD_MEMORY

    def __post_init__(self) -> None:
        parse_memory(self.build_memory)  # MemorySizeError (a ValueError) unless digits and a unit


def ef_search_for(rows: int, k: int, tuning: PgTuning) -> int:
    """``hnsw.ef_search`` for a top-``k`` search of an indexed base of ``rows`` chunks: at
    least the tuning's floor and ``k``, growing with the base (``ef_search_rows``) so recall
    holds at a million rows, and never above pgvector's limit."""
    return min(EF_SEARCH_MAX, max(tuning.ef_search, k, rows // max(1, tuning.ef_search_rows)))


# bm25 as FTS5 computes it: per term idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg)),
# k1 = 1.2, b = 0.75. Term frequencies come from the tsvector's positions: per candidate
# row the query's lexemes are picked out in C (setweight marks them A, ts_filter keeps
# them: 1.8x faster than unnesting every lexeme, same scores) and joined to the terms by
# equality; the prefix terms of lone CJK characters unnest the row and match by
# starts_with; a phrase counts its occurrences: the positions p of its first word with
# p + i among the positions of its i-th word (one statement per phrase, _phrase_tf).
_BM25 = """
WITH cand AS MATERIALIZED (
    SELECT seq, id, length, fts FROM {t} WHERE fts @@ CAST(%(match)s AS tsquery)
), words AS (
    SELECT * FROM unnest(%(lex)s::text[], %(idf)s::float8[]) AS w(lex, idf)
), prefixes AS (
    SELECT * FROM unnest(%(plex)s::text[], %(pidf)s::float8[]) AS p(lex, idf)
), tf AS (
    SELECT c.seq, c.length, w.idf, array_length(l.positions, 1)::float8 AS tf
    FROM cand AS c CROSS JOIN LATERAL unnest(ts_filter(setweight(c.fts, 'A', %(lex)s::text[]), '{{a}}')) AS l
    JOIN words AS w ON l.lexeme = w.lex
    UNION ALL
    SELECT c.seq, c.length, p.idf, sum(array_length(l.positions, 1))::float8
    FROM cand AS c CROSS JOIN LATERAL unnest(c.fts) AS l JOIN prefixes AS p ON starts_with(l.lexeme, p.lex)
    GROUP BY c.seq, c.length, p.lex, p.idf
    {phrases}
), scored AS (
    SELECT seq, sum(idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / %(avg)s))) AS score FROM tf GROUP BY seq
)
SELECT c.id, s.score FROM scored AS s JOIN cand AS c USING (seq) ORDER BY s.score DESC, s.seq LIMIT %(k)s
"""
CLAMPED_IDF = 1e-6  # FTS5's idf for a term in half the rows or more


def _phrase_tf(term: Term, idf: float) -> sql.Composable:
    """``UNION ALL`` rows (seq, length, idf, tf) for one phrase: how often it occurs in each candidate."""
    positions = sql.SQL(", ").join(
        sql.SQL("(SELECT l.positions FROM unnest(c.fts) AS l WHERE l.lexeme = {}) AS {}").format(
            sql.Literal(word), sql.Identifier(f"p{i}")
        )
        for i, word in enumerate(term.words)
    )
    follows = sql.SQL("").join(
        sql.SQL(" AND p + {} = ANY(ps.{})").format(sql.Literal(i), sql.Identifier(f"p{i}"))
        for i in range(1, len(term.words))
    )
    return sql.SQL(
        " UNION ALL SELECT c.seq, c.length, {idf}::float8, "
        "(SELECT count(*) FROM unnest(ps.p0) AS p WHERE true{follows})::float8 "
        "FROM cand AS c CROSS JOIN LATERAL (SELECT {positions}) AS ps WHERE c.fts @@ CAST({tq} AS tsquery)"
    ).format(idf=sql.Literal(idf), follows=follows, positions=positions, tq=sql.Literal(term.tsquery))


def _idf(n: int, df: int) -> float:
    """FTS5's idf: log((N - n + 0.5) / (n + 0.5)), at least 1e-6 (a term in most rows still counts)."""
    value = math.log((n - df + 0.5) / (df + 0.5))
    return value if value > 0 else CLAMPED_IDF


@contextmanager
def _atomic(con: psycopg.Connection[Any], joined: bool) -> Iterator[None]:
    """One atomic write: its own transaction on a pooled connection, a savepoint of the
    caller's open transaction when `joined`; ``psycopg.Rollback`` undoes it alone.

    Not psycopg's ``transaction()`` when joined: the catalogue's transaction runs in
    pipeline mode and began with a plain ``BEGIN``, and after a statement whose result was
    fetched (the completion guard's ``RETURNING``) the pipeline has not synced since, so
    psycopg reads the connection as idle and opens an outer transaction whose COMMIT ends
    the caller's early (the lease gone with the chunks, the item still `processing`: another
    process claimed it and indexed it twice). Any other failure propagates and the
    caller's transaction rolls back as a whole."""
    if not joined:
        with con.transaction():
            yield
        return
    con.execute("SAVEPOINT ktui_store_write")
    try:
        yield
    except psycopg.Rollback:
        con.execute("ROLLBACK TO SAVEPOINT ktui_store_write")
    con.execute("RELEASE SAVEPOINT ktui_store_write")


class PgBaseStore(HybridSearch):
    """See the module docstring. Opened by :class:`core.store.postgres.PgStoreManager`."""

    read_only = False

    def __init__(self, pool: Connections, base_id: str, table: str, dimensions: int, tuning: PgTuning):
        self.base_id = base_id
        self.dimensions = dimensions
        self.tuning = tuning
        self.table = table
        self.damaged: str | None = None  # a PostgreSQL store is never "damaged" as a file is
        self._pool = pool
        self._t = sql.Identifier(table)
        self._closed = False

    @property
    def where(self) -> str:
        return f"PostgreSQL store {self._pool.where} (schema {self._pool.schema}), base {self.base_id}"

    def close(self) -> None:
        self._closed = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _job(self, action: str) -> Iterator[psycopg.Connection[Any]]:
        """A connection for one job; PostgreSQL failures become StoreError naming the base."""
        if self._closed:
            raise StoreError(f"{self.where} is closed")
        try:
            with self._pool.connection() as con:
                yield con
        except psycopg.Error as exc:
            detail = scrub(str(exc).strip() or type(exc).__name__, self._pool.url)
            raise StoreError(f"{self.where}: could not {action}: {detail}") from exc
        except UnicodeEncodeError as exc:
            raise StoreError(
                f"{self.where}: could not {action}: text is not valid Unicode ({exc.reason})"
            ) from exc

    def _bump(self, con: psycopg.Connection[Any]) -> int:
        row = con.execute(
            sql.SQL("UPDATE {} SET generation = generation + 1 WHERE base_id = %s RETURNING generation").format(
                sql.Identifier(REGISTRY)
            ),
            (self.base_id,),
        ).fetchone()
        if row is None:
            raise StoreError(f"{self.where} no longer exists (the base was deleted)")
        return int(row[0])

    def _delete(self, con: psycopg.Connection[Any], where: sql.Composable, value: Any) -> tuple[int, int]:
        """Delete the rows ``where`` selects; how many and their total length."""
        row = con.execute(
            sql.SQL("WITH d AS (DELETE FROM {} WHERE {} RETURNING length) SELECT count(*), coalesce(sum(length), 0) FROM d").format(
                self._t, where
            ),
            (value,),
        ).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])

    def _add_rows(self, con: psycopg.Connection[Any], delta: int, length: int) -> int:
        row = con.execute(
            sql.SQL(
                "UPDATE {} SET rows = rows + %s, total_length = total_length + %s WHERE base_id = %s RETURNING rows"
            ).format(sql.Identifier(REGISTRY)),
            (delta, length, self.base_id),
        ).fetchone()
        assert row is not None
        return int(row[0])

    # ------------------------------------------------------------------ writes

    def replace_item_chunks(self, item_id: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> list[str]:
        """Replace every chunk of ``item_id`` with ``chunks`` in ONE transaction; returns the new chunk ids."""
        return self.replace_items([(item_id, chunks, vectors)])[0]

    @contextmanager
    def _joined(self, con: psycopg.Connection[Any] | None, action: str) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection for one job, or the caller's `con` with its transaction open
        (the catalogue's, `PgDatabase.run_in_transaction`: an item's chunks and its status
        commit together); failures become StoreError either way."""
        if con is None:
            with self._job(action) as own:
                yield own
            return
        if self._closed:
            raise StoreError(f"{self.where} is closed")
        try:
            yield con
        except psycopg.Error as exc:
            detail = scrub(str(exc).strip() or type(exc).__name__, self._pool.url)
            raise StoreError(f"{self.where}: could not {action}: {detail}") from exc

    def _index_later(self, con: psycopg.Connection[Any], rows: int) -> None:
        """After a write inside the caller's transaction: build the HNSW index, when due, on a
        thread of its own (it waits for that transaction to end; never inside it)."""
        if rows < self.tuning.hnsw_from or self.dimensions > HNSW_MAX_DIMENSIONS or self._index_exists(con):
            return

        def build() -> None:
            try:
                self.build_index()
            except StoreError as exc:
                log.warning("%s: the HNSW index could not be built (searches stay exact): %s", self.where, exc)

        threading.Thread(target=build, name="ktui-hnsw-build", daemon=True).start()

    def replace_items(
        self, entries: Sequence[tuple[str, Sequence[Chunk], np.ndarray]], *, con: psycopg.Connection[Any] | None = None
    ) -> list[list[str]]:
        """Replace the chunks of several items in ONE transaction; on any failure nothing changes.

        With `con` (a connection to the same schema inside an open transaction) the write
        joins that transaction (as a savepoint) and commits or rolls back with it."""
        rows: list[tuple[Any, ...]] = []
        ids: list[list[str]] = []
        for item_id, chunks, vectors in entries:
            chunks = list(chunks)
            arr = normalise(check_vectors(vectors, len(chunks), self.dimensions, what=f"vectors for item {item_id}"))
            new = new_chunk_rows(item_id, chunks)
            for chunk_id, index, text, metadata in new:
                stored = text.replace("\x00", "\ufffd")  # PostgreSQL text cannot hold NUL
                fts, length = indexed(stored)
                rows.append((chunk_id, item_id, index, stored, metadata, arr[index], fts, length))
            ids.append([r[0] for r in new])
        if not entries:
            return ids
        items = [e[0] for e in entries]
        what = f"write chunks of {len(items)} items" if len(items) > 1 else f"write chunks of item {items[0]}"
        joined = con is not None
        with self._joined(con, what) as con:
            with _atomic(con, joined):
                self._bump(con)
                deleted, deleted_length = self._delete(con, sql.SQL("item_id = ANY(%s)"), items)
                self._insert(con, rows)
                total = self._add_rows(con, len(rows) - deleted, sum(r[-1] for r in rows) - deleted_length)
            if joined:
                self._index_later(con, total)
            else:
                self._maybe_build_index(con, total)
        return ids

    def _insert(self, con: psycopg.Connection[Any], rows: list[tuple[Any, ...]]) -> None:
        """Insert chunk rows (id, item, index, text, metadata, vector, tsvector, length)
        inside the caller's transaction."""
        if not rows:
            return
        with con.cursor() as c:
            c.executemany(
                sql.SQL(
                    "INSERT INTO {} (id, item_id, chunk_index, text, metadata, embedding, fts, length) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s::tsvector, %s)"
                ).format(self._t),
                rows,
            )

    def write_rows(self, rows: StoredRows, *, settle: bool = True) -> int:
        """Append chunk rows read from another store (`read_rows`), keeping their ids, items,
        metadata and vectors (normalised, as every write stores them), in ONE transaction;
        the tsvector and length are derived here. A chunk id or (item, index) already
        present fails the whole write. ``settle``: build the HNSW index now if the base is
        past its size (a bulk load passes False until its last batch, so the index is
        built once over every row instead of being updated row by row)."""
        if not len(rows):
            return 0
        arr = normalise(check_vectors(rows.vectors, len(rows), self.dimensions, what="vectors of the copied rows"))
        values: list[tuple[Any, ...]] = []
        for i, (cid, item_id, index, text, metadata) in enumerate(
                zip(rows.ids, rows.item_ids, rows.indexes, rows.texts, rows.metadata, strict=True)):
            stored = text.replace("\x00", "\ufffd")  # PostgreSQL text cannot hold NUL
            fts, length = indexed(stored)
            values.append((cid, item_id, index, stored, metadata.replace("\x00", "\ufffd"), arr[i], fts, length))
        with self._job(f"write {len(values)} copied chunks") as con:
            with con.transaction():
                self._bump(con)
                self._insert(con, values)
                total = self._add_rows(con, len(values), sum(v[-1] for v in values))
            if settle:
                self._maybe_build_index(con, total)
        return len(values)

    def delete_items(self, item_ids: Iterable[str], *, con: psycopg.Connection[Any] | None = None) -> int:
        """Delete every chunk of these items in one transaction; returns how many were deleted.
        With `con`, inside the caller's open transaction (see `replace_items`)."""
        wanted = list(dict.fromkeys(id_list(item_ids)))
        if not wanted:
            return 0
        deleted = 0
        joined = con is not None
        with self._joined(con, "delete items") as con:
            with _atomic(con, joined):
                self._bump(con)
                deleted, length = self._delete(con, sql.SQL("item_id = ANY(%s)"), wanted)
                if deleted == 0:
                    raise psycopg.Rollback()  # nothing changed: the generation stays
                self._add_rows(con, -deleted, -length)
        return deleted

    def delete_chunk(self, chunk_id: str) -> ChunkRecord | None:
        """Delete one chunk; returns what it was, or None when there is no such chunk."""
        row = None
        with self._job(f"delete chunk {chunk_id}") as con:
            with con.transaction():
                self._bump(con)
                row = con.execute(
                    sql.SQL("DELETE FROM {} WHERE id = %s RETURNING {}, length").format(self._t, _COLUMNS), (chunk_id,)
                ).fetchone()
                if row is None:
                    raise psycopg.Rollback()
                self._add_rows(con, -1, -int(row[-1]))
        return record(row[:5]) if row is not None else None

    # ------------------------------------------------------------------ reads

    def list_chunks(self, item_ids: Iterable[str]) -> list[ChunkRecord]:
        """Chunks of these items: items in the given order, each by chunk_index."""
        wanted = list(dict.fromkeys(id_list(item_ids)))
        if not wanted:
            return []
        by_item: dict[str, list[ChunkRecord]] = {i: [] for i in wanted}
        with self._job("list chunks") as con:
            for row in con.execute(
                sql.SQL("SELECT {} FROM {} WHERE item_id = ANY(%s) ORDER BY item_id, chunk_index").format(_COLUMNS, self._t),
                (wanted,),
            ):
                by_item[row[1]].append(record(row))
        return [rec for item in wanted for rec in by_item[item]]

    def get_chunk(self, chunk_id: str) -> ChunkRecord | None:
        with self._job(f"read chunk {chunk_id}") as con:
            row = con.execute(sql.SQL("SELECT {} FROM {} WHERE id = %s").format(_COLUMNS, self._t), (chunk_id,)).fetchone()
        return record(row) if row else None

    def fetch(self, chunk_ids: Sequence[str]) -> list[ChunkRecord]:
        """Records for ``chunk_ids`` in the given order; unknown ids are skipped."""
        unique = list(dict.fromkeys(chunk_ids))
        if not unique:
            return []
        with self._job("fetch chunks") as con:
            found = {
                row[0]: record(row)
                for row in con.execute(sql.SQL("SELECT {} FROM {} WHERE id = ANY(%s)").format(_COLUMNS, self._t), (unique,))
            }
        return [found[c] for c in chunk_ids if c in found]

    def item_ids(self) -> set[str]:
        with self._job("list item ids") as con:
            return {r[0] for r in con.execute(sql.SQL("SELECT DISTINCT item_id FROM {}").format(self._t))}

    def count(self) -> int:
        with self._job("count chunks") as con:
            row = con.execute(
                sql.SQL("SELECT rows FROM {} WHERE base_id = %s").format(sql.Identifier(REGISTRY)), (self.base_id,)
            ).fetchone()
        if row is None:
            raise StoreError(f"{self.where} no longer exists (the base was deleted)")
        return int(row[0])

    def count_vectors(self) -> int:
        """Chunks with a vector of this base's width (the column's type makes it every chunk;
        counted from the table itself, not the registry, so a copy is checked against the rows)."""
        with self._job("count vectors") as con:
            row = con.execute(
                sql.SQL("SELECT count(*) FROM {} WHERE vector_dims(embedding) = %s").format(self._t), (self.dimensions,)
            ).fetchone()
        return int(row[0]) if row else 0

    def read_rows(self, after: int = 0, limit: int = 1000) -> StoredRows:
        """Up to ``limit`` chunk rows after insertion position ``after``, in insertion order,
        exactly as stored (ids, metadata text, unit-length vectors)."""
        with self._job("read chunk rows") as con:
            rows = con.execute(
                sql.SQL("SELECT seq, id, item_id, chunk_index, text, metadata, embedding FROM {} WHERE seq > %s "
                        "ORDER BY seq LIMIT %s").format(self._t),
                (int(after), int(limit)),
            ).fetchall()
        vectors = (np.stack([_array(r[6]) for r in rows]) if rows
                   else np.empty((0, self.dimensions), np.float32))
        return StoredRows([int(r[0]) for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                          [int(r[3]) for r in rows], [r[4] for r in rows], [r[5] for r in rows], vectors)

    def has_hnsw(self) -> bool:
        """Whether searches of this base go through its HNSW index."""
        with self._job("read the store's state") as con:
            row = con.execute(
                sql.SQL("SELECT hnsw FROM {} WHERE base_id = %s").format(sql.Identifier(REGISTRY)), (self.base_id,)
            ).fetchone()
        return bool(row and row[0])

    # ------------------------------------------------------------------ search

    def search_vector(self, query: np.ndarray, k: int, *, exact: bool = False) -> list[tuple[str, float]]:
        """Top-``k`` chunks by cosine similarity to ``query``, best first: ``(chunk_id, similarity)``.

        ``exact``: scan every row even when the base has its HNSW index (recall checks).
        """
        q = check_vectors(np.asarray(query, dtype=np.float32).reshape(1, -1), 1, self.dimensions, what="query vector")[0]
        if k <= 0:
            return []
        unit = normalise(q[None, :])[0]
        with self._job("search vectors") as con:
            with con.transaction():
                indexed_rows = None if exact or k > EF_SEARCH_MAX else self._indexed_rows(con)
                if indexed_rows is not None:
                    ef = ef_search_for(indexed_rows, int(k), self.tuning)
                    con.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(ef)))
                    statement = "SELECT id, -(embedding <#> %(q)s) FROM {} ORDER BY embedding <#> %(q)s LIMIT %(k)s"
                else:  # one distance per row, ties by insertion order
                    con.execute("SET LOCAL enable_indexscan = off")
                    statement = (
                        "SELECT id, -d FROM (SELECT id, seq, embedding <#> %(q)s AS d FROM {}) AS s ORDER BY d, seq LIMIT %(k)s"
                    )
                rows = con.execute(sql.SQL(statement).format(self._t), {"q": unit, "k": int(k)}).fetchall()
        return [(cid, float(score)) for cid, score in rows]

    def search_bm25(self, query: str, k: int) -> list[tuple[str, float]]:
        """Top-``k`` chunks by bm25 (FTS5's formula: k1 = 1.2, b = 0.75), best first; score > 0.

        Any text is accepted (text.py keeps only its words); text without letters or
        digits finds nothing. Scores equal FTS5's for the same chunks (tested).
        """
        plan = query_plan(query)
        if not plan or k <= 0:
            return []
        whole = tsquery_literal(query)
        assert whole is not None  # the plan has terms
        with self._job("search full text") as con:
            with con.transaction():
                stats = con.execute(
                    sql.SQL("SELECT rows, total_length FROM {} WHERE base_id = %s").format(sql.Identifier(REGISTRY)),
                    (self.base_id,),
                ).fetchone()
                if stats is None or int(stats[0]) == 0:
                    return []
                n, total = int(stats[0]), int(stats[1])
                counts = con.execute(
                    sql.SQL("SELECT {}").format(
                        sql.SQL(", ").join(
                            sql.SQL("(SELECT count(*) FROM {} WHERE fts @@ CAST({} AS tsquery))").format(
                                self._t, sql.Literal(t.tsquery)
                            )
                            for t in plan
                        )
                    )
                ).fetchone()
                assert counts is not None
                idf = [_idf(n, int(df)) for df in counts]
                avg = max(total / n, 1e-9)
                # Rows that match only terms in half the base or more score at most
                # CLAMPED_IDF * (k1 + 1) per term: when k rows matching a rarer term beat
                # that bound, they are the answer and the common terms' rows need no scoring.
                rare = [t for t, w in zip(plan, idf, strict=True) if w > CLAMPED_IDF]
                if rare and len(rare) < len(plan):
                    rows = self._bm25(con, plan, idf, " | ".join(t.tsquery for t in rare), avg, k)
                    bound = 2.2 * CLAMPED_IDF * (len(plan) - len(rare))
                    if len(rows) == k and float(rows[-1][1]) > bound:
                        return [(cid, float(score)) for cid, score in rows]
                rows = self._bm25(con, plan, idf, whole, avg, k)
        return [(cid, float(score)) for cid, score in rows]

    def _bm25(
        self, con: psycopg.Connection[Any], plan: list[Term], idf: list[float], match: str, avg: float, k: int
    ) -> list[tuple[str, float]]:
        words = [(t.lexeme, w) for t, w in zip(plan, idf, strict=True) if t.lexeme is not None and not t.prefix]
        prefixes = [(t.lexeme, w) for t, w in zip(plan, idf, strict=True) if t.prefix]
        phrases = sql.SQL("").join(_phrase_tf(t, w) for t, w in zip(plan, idf, strict=True) if t.lexeme is None)
        return [
            (str(cid), float(score))
            for cid, score in con.execute(
                sql.SQL(_BM25).format(t=self._t, phrases=phrases),
                {
                    "match": match,
                    "lex": [w for w, _ in words],
                    "idf": [i for _, i in words],
                    "plex": [w for w, _ in prefixes],
                    "pidf": [i for _, i in prefixes],
                    "avg": avg,
                    "k": int(k),
                },
            )
        ]

    # ------------------------------------------------------------------ the HNSW index

    def _indexed_rows(self, con: psycopg.Connection[Any]) -> int | None:
        """The base's row count when its HNSW index exists, else None (search exactly)."""
        row = con.execute(
            sql.SQL("SELECT hnsw, rows FROM {} WHERE base_id = %s").format(sql.Identifier(REGISTRY)), (self.base_id,)
        ).fetchone()
        return int(row[1]) if row and row[0] else None

    def _index_exists(self, con: psycopg.Connection[Any]) -> bool:
        row = con.execute(
            sql.SQL("SELECT hnsw FROM {} WHERE base_id = %s").format(sql.Identifier(REGISTRY)), (self.base_id,)
        ).fetchone()
        return bool(row and row[0])

    def _maybe_build_index(self, con: psycopg.Connection[Any], rows: int) -> None:
        """Build the HNSW index once the base has passed ``hnsw_from`` chunks (one process does it).

        The write before it has committed: a build that fails must not make the caller
        think the write failed. It is logged, searches stay exact, and the next write
        past the size tries again.
        """
        try:
            if rows < self.tuning.hnsw_from or self.dimensions > HNSW_MAX_DIMENSIONS or self._index_exists(con):
                return
            self.build_index(con)
        except psycopg.Error as exc:
            log.warning("%s: the HNSW index could not be built (searches stay exact): %s",
                        self.where, scrub(str(exc).strip(), self._pool.url))

    def build_index(self, con: psycopg.Connection[Any] | None = None) -> bool:
        """Build the HNSW index now (whatever the size); False when another process is building it
        or the base is too wide for pgvector's HNSW."""
        if self.dimensions > HNSW_MAX_DIMENSIONS:
            return False
        if con is None:
            with self._job("build the vector index") as own:
                return self.build_index(own)
        key = f"ktui hnsw {self._pool.schema}.{self.table}"
        got = con.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (key,)).fetchone()
        if not got or not got[0]:
            return False
        try:
            memory = parse_memory(self.tuning.build_memory)[1]  # rebuilt from its digits and unit
            con.execute(sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(memory)))
            con.execute(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS {} ON {} USING hnsw (embedding vector_ip_ops) "
                    "WITH (m = {}, ef_construction = {})"
                ).format(
                    sql.Identifier(hnsw_index_name(self.table)),
                    self._t,
                    sql.Literal(self.tuning.hnsw_m),
                    sql.Literal(self.tuning.hnsw_ef_construction),
                )
            )
            con.execute(
                sql.SQL("UPDATE {} SET hnsw = true WHERE base_id = %s").format(sql.Identifier(REGISTRY)), (self.base_id,)
            )
            log.info("%s: HNSW index built", self.where)
        finally:
            con.execute("RESET maintenance_work_mem")
            con.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))
        return True

    # ------------------------------------------------------------------ checks

    def integrity_check(self) -> list[str]:
        """The chunk table and its indexes are there and readable: [] when they are."""
        problems: list[str] = []
        with self._job("check the store") as con:
            names = {
                r[0]
                for r in con.execute(
                    "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = %s",
                    (self._pool.schema, self.table),
                )
            }
            if f"{self.table}_fts" not in names:
                problems.append("the full-text (GIN) index is missing")
            if self._index_exists(con) and hnsw_index_name(self.table) not in names:
                problems.append("the HNSW index the registry names is missing")
        return problems

    def check_invariants(self) -> list[str]:
        """Human-readable violations of the store's invariants (empty when healthy).

        Checks: the registry's row count and token sum, every vector unit-length (or zero), every
        row's tsvector equal to the one its text gives (at most 20,000 rows sampled),
        and the integrity check.
        """
        problems = self.integrity_check()
        with self._job("check invariants") as con:
            # One statement, so one snapshot: read in two, a writer committing in between
            # (another process, or this one's indexing) made a healthy store look broken.
            row = con.execute(
                sql.SQL(
                    "SELECT c.n, c.total, r.rows, r.total_length FROM"
                    " (SELECT count(*) AS n, coalesce(sum(length), 0) AS total FROM {}) AS c"
                    " LEFT JOIN {} AS r ON r.base_id = %s"
                ).format(self._t, sql.Identifier(REGISTRY)),
                (self.base_id,),
            ).fetchone()
            assert row is not None  # the aggregate always gives one row
            counted, registry = (row[0], row[1]), (None if row[2] is None else (row[2], row[3]))
            if registry is None or int(counted[0]) != int(registry[0]):
                problems.append(f"registry counts {registry and registry[0]} chunks, the table holds {counted[0]}")
            elif int(counted[1]) != int(registry[1]):
                problems.append(f"registry sums {registry[1]} tokens, the table's chunks hold {counted[1]}")
            for (cid,) in con.execute(
                sql.SQL(
                    "SELECT id FROM {} WHERE vector_norm(embedding) > 0 AND abs(vector_norm(embedding) - 1) > 1e-3"
                ).format(self._t)
            ):
                problems.append(f"chunk {cid} has a vector that is not unit-length")
            for cid, text, fts in con.execute(
                sql.SQL("SELECT id, text, fts::text FROM {} ORDER BY random() LIMIT 20000").format(self._t)
            ):
                if _lexemes(fts) != _lexemes(indexed(text)[0]):
                    problems.append(f"chunk {cid}: its full-text entry does not match its text")
        return problems


def _array(value: Any) -> np.ndarray:
    """A vector column's value as float32 (pgvector hands out numpy arrays, or `Vector`s
    when the binary format is used)."""
    to_numpy = getattr(value, "to_numpy", None)
    return np.asarray(to_numpy() if to_numpy is not None else value, dtype=np.float32)


def _lexemes(tsvector: str) -> dict[str, str]:
    """``'a':1,2 'b':3`` → {"a": "1,2", "b": "3"} (PostgreSQL's output and text.py's literal alike)."""
    return {m.group(1).replace("''", "'"): m.group(2) for m in re.finditer(r"'((?:[^']|'')*)':([0-9,]+)", tsvector)}

