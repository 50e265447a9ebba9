"""Keyword search over a real store: CJK text, exact words, and the schema-1 → 2 migration.

The CJK tests run on both backends (SQLite and PostgreSQL, tests/support/stores.py); the
migration tests are about SQLite files.
"""

from __future__ import annotations

import sqlite3
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pytest

from ktui.core.models import Chunk
from ktui.core.store import BaseStore
from ktui.core.store.schema import SCHEMA_VERSION
from tests.support.stores import BACKENDS, open_store

D = 8

DOCS = {
    "tea": "我最喜欢的茶是乌龙茶，它产自福建和台湾。",
    "yunnan": "普洱茶产于云南省，是一种发酵茶。",
    "hanami": "春になると公園で花見をします。",
    "mankai": "桜が満開になりました。",
    "english": "Tea ceremonies and the history of green tea.",
}


@pytest.fixture(params=BACKENDS)
def store(request, tmp_path: Path):
    server = request.getfixturevalue("postgres_server") if request.param == "postgres" else None
    with ExitStack() as stack:
        yield open_store(request.param, stack, tmp_path, D, server)


def _vecs(n: int) -> np.ndarray:
    return np.random.default_rng(1).standard_normal((n, D)).astype(np.float32)


def _fill(store: BaseStore) -> dict[str, str]:
    ids = {}
    for item, text in DOCS.items():
        ids[item] = store.replace_item_chunks(item, [Chunk(text, {})], _vecs(1))[0]
    return ids


def _first_items(store: BaseStore, query: str) -> list[str]:
    hits = store.search_bm25(query, 10)
    return [r.item_id for r in store.fetch([c for c, _ in hits])]


@pytest.mark.parametrize(("query", "item"), [("乌龙茶", "tea"), ("云南", "yunnan"), ("花見", "hanami"),
                                             ("満開", "mankai"), ('"乌龙茶"', "tea"), ("TEA history", "english")])
def test_cjk_and_latin_queries_find_their_document_first(store, query: str, item: str) -> None:
    _fill(store)
    assert _first_items(store, query)[0] == item
    assert store.check_invariants() == []


def test_deleting_and_replacing_cjk_chunks_keeps_the_index_in_step(store) -> None:
    _fill(store)
    store.delete_items(["yunnan"])
    assert _first_items(store, "云南") == []
    store.replace_item_chunks("tea", [Chunk("云南的红茶", {})], _vecs(1))
    assert _first_items(store, "云南") == ["tea"] and _first_items(store, "乌龙茶") == []
    assert store.check_invariants() == []


_SCHEMA_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value NOT NULL);
CREATE TABLE chunk (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, item_id TEXT NOT NULL,
    chunk_index INTEGER NOT NULL, text TEXT NOT NULL, metadata TEXT NOT NULL DEFAULT '{}', vector BLOB NOT NULL,
    UNIQUE (item_id, chunk_index));
CREATE VIRTUAL TABLE chunk_fts USING fts5(text, content='chunk', content_rowid='seq',
    tokenize='porter unicode61 remove_diacritics 2');
CREATE TRIGGER chunk_ai AFTER INSERT ON chunk BEGIN
    INSERT INTO chunk_fts(rowid, text) VALUES (new.seq, new.text); END;
CREATE TRIGGER chunk_ad AFTER DELETE ON chunk BEGIN
    INSERT INTO chunk_fts(chunk_fts, rowid, text) VALUES ('delete', old.seq, old.text); END;
"""


def _schema_1_store(path: Path) -> None:
    """A store as ktui's schema 1 wrote it (the FTS table used the Porter stemmer)."""
    con = sqlite3.connect(path)
    con.executescript(_SCHEMA_1)
    con.executemany("INSERT INTO meta VALUES (?, ?)",
                    [("schema_version", 1), ("dimensions", D), ("uuid", "ab" * 16), ("generation", 1)])
    for n, (item, text) in enumerate(DOCS.items()):
        con.execute("INSERT INTO chunk(id, item_id, chunk_index, text, vector) VALUES (?, ?, 0, ?, ?)",
                    (f"c{n}", item, text, _vecs(1)[0].tobytes()))
    con.commit()
    con.close()


def test_a_schema_1_store_is_migrated_at_open_and_finds_cjk(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    _schema_1_store(path)
    with BaseStore.open(path, D) as store:
        assert _first_items(store, "云南") == ["yunnan"] and _first_items(store, "満開") == ["mankai"]
        assert store.check_invariants() == []
        store.replace_item_chunks("new", [Chunk("新しい花見の記事", {})], _vecs(1))
        assert set(_first_items(store, "花見")) == {"hanami", "new"}
    con = sqlite3.connect(path)
    assert int(con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]) == SCHEMA_VERSION
    con.close()
    with BaseStore.open(path, D) as again:  # a second open has nothing to do
        assert again.count() == len(DOCS) + 1 and again.check_invariants() == []


def test_a_migration_that_cannot_take_the_write_lock_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    _schema_1_store(path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("BEGIN IMMEDIATE")  # another process is writing
    try:
        con = sqlite3.connect(path, isolation_level=None, timeout=0)
        from ktui.core.store.schema import migrate

        with pytest.raises(sqlite3.OperationalError):
            migrate(con, path)
        con.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    con = sqlite3.connect(path)
    assert int(con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]) == 1
    con.close()
    with BaseStore.open(path, D) as store:  # the next open migrates
        assert _first_items(store, "乌龙茶") == ["tea"]
