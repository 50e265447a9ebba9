"""What a PostgreSQL chunk store keeps in its schema: the registry and one chunk table per base.

``ktui_chunk_store`` names every base's table and holds its width, write generation,
row count and whether its HNSW index exists. A base's chunks live in ``chunk_<n>``
(``n`` from a sequence: base ids may be 128 characters with hyphens, PostgreSQL names
63): ``seq`` (insertion order, the tie-break), the chunk's id, item, index, text and
metadata (JSON text, as on SQLite), its unit-length vector in a ``vector(<width>)``
column, ``fts``, its ``tsvector`` (core/store/postgres/text.py) under a GIN index, and
``length``, its number of tokens (bm25's document length; the registry keeps the sum).
Writes to one base are serialised across processes by the row lock on its registry row
(every write starts by bumping the generation).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

REGISTRY = "ktui_chunk_store"
SCHEMA_VERSION = 1
INLINE_MAX_DIMENSIONS = 1500  # up to 6 kB of float32: stays in the row's 8 kB page
HNSW_MAX_DIMENSIONS = 2000  # pgvector cannot index wider `vector` columns with HNSW

_REGISTRY_DDL = f"""
CREATE TABLE IF NOT EXISTS {REGISTRY} (
    base_id TEXT PRIMARY KEY,
    chunk_table TEXT NOT NULL UNIQUE,
    dimensions INTEGER NOT NULL CHECK (dimensions > 0),
    schema_version INTEGER NOT NULL,
    generation BIGINT NOT NULL DEFAULT 0,
    rows BIGINT NOT NULL DEFAULT 0 CHECK (rows >= 0),
    total_length BIGINT NOT NULL DEFAULT 0 CHECK (total_length >= 0),
    hnsw BOOLEAN NOT NULL DEFAULT false,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE SEQUENCE IF NOT EXISTS ktui_chunk_table_seq;
"""


def ensure_registry(con: psycopg.Connection[Any], schema: str) -> None:
    """Create the registry once (under an advisory lock: two processes may start together)."""
    with con.transaction():
        con.execute("SELECT pg_advisory_xact_lock(hashtext('ktui registry ' || %s))", (schema,))
        for statement in filter(str.strip, _REGISTRY_DDL.split(";")):
            con.execute(statement)


def create_chunk_table(con: psycopg.Connection[Any], table: str, dimensions: int) -> None:
    """The chunk table of one base and its indexes (inside the caller's transaction)."""
    t = sql.Identifier(table)
    con.execute(
        sql.SQL(
            """CREATE TABLE {t} (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    item_id TEXT NOT NULL,
    chunk_index INTEGER NOT NULL CHECK (chunk_index >= 0),
    text TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{{}}',
    embedding vector({d}) NOT NULL,
    fts tsvector NOT NULL,
    length INTEGER NOT NULL CHECK (length >= 0),
    UNIQUE (item_id, chunk_index)
)"""
        ).format(t=t, d=sql.Literal(dimensions))
    )
    # Keep rows whole: a TOASTed vector is fetched from the side table on every comparison
    # (measured, 20k x 384: the exact scan read ~6 buffers a row and took 135 ms; in the
    # row, 15-20 ms), and a TOASTed tsvector slows bm25 the same way. So vectors are PLAIN
    # and rows are only TOASTed past a whole page; vectors too wide to share a page with
    # the rest of the row are stored out of line, uncompressed (floats do not compress).
    storage = sql.SQL("PLAIN" if dimensions <= INLINE_MAX_DIMENSIONS else "EXTERNAL")
    con.execute(sql.SQL("ALTER TABLE {t} ALTER COLUMN embedding SET STORAGE {s}").format(t=t, s=storage))
    con.execute(sql.SQL("ALTER TABLE {t} SET (toast_tuple_target = 8160)").format(t=t))
    con.execute(sql.SQL("CREATE INDEX {i} ON {t} USING gin (fts)").format(i=sql.Identifier(f"{table}_fts"), t=t))


def hnsw_index_name(table: str) -> str:
    return f"{table}_hnsw"
