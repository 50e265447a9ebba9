"""The per-base store's file format: its schema, its migrations, opening a connection.

Everything about what is on disk lives here, so a schema change touches one module:
the chunk table and its contentless FTS5 index kept in step by triggers, the `meta`
rows that name the store's width, uuid and write generation, the numbered upgrades
(`migrate`) and the checks that turn a file that is not a ktui store into a clear
error naming it (`connect`).
"""

from __future__ import annotations

import logging
import sqlite3
import uuid
from pathlib import Path

from ktui.core.errors import StoreDamagedError, StoreError
from ktui.core.search.keyword import FTS_TOKENIZER, index_text
from ktui.core.storage_faults import storage_error

from .matrix_files import MatrixFiles

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2

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



def connect(path: Path, dimensions: int, *, create: bool, read_only: bool) -> tuple[sqlite3.Connection, str]:
    """A connection to the store at ``path`` (created empty with ``create``) and its uuid.

    Validates the ``meta`` rows (a ktui store, not newer than this code, of this width)
    and upgrades an older schema in one transaction. Any failure closes the connection,
    removes a half-created file and raises StoreError / StoreDamagedError naming it.
    """
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
                            migrate(writer, path)
                        finally:
                            writer.close()
                    else:
                        migrate(con, path)
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
            remove_store_files(path)
        raise
    except (sqlite3.Error, ValueError, OSError) as exc:
        if con is not None:
            con.close()
        fault = storage_error(exc, path)
        if create:
            remove_store_files(path)
            if fault is not None:
                raise fault from exc
            raise StoreError(
                f"Vector store file {path} could not be created: {exc}"
            ) from exc
        if fault is not None:
            raise fault from exc
        raise StoreDamagedError(str(path), f"is corrupt or unreadable: {exc}") from exc
    return con, store_uuid


def migrate(con: sqlite3.Connection, path: Path) -> None:
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


def remove_store_files(path: Path) -> None:
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

