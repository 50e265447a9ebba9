"""Copying a chunk store row for row between backends (`read_rows` / `write_rows`, what
`ktui migrate` moves): every pair of real backends, SQLite and PostgreSQL.

The copy keeps chunk ids, items, indexes, text, metadata and vectors; the target answers
vector, bm25 and hybrid searches with the same chunks in the same order as the source;
its invariants hold; a write that collides with a row already there changes nothing.
"""

from __future__ import annotations

from contextlib import ExitStack
from itertools import product
from pathlib import Path

import numpy as np
import pytest

from ktui.core.errors import StoreError
from ktui.core.models import Chunk
from tests.support.stores import BACKENDS, open_store

D = 12
PAIRS = [f"{a}-{b}" for a, b in product(BACKENDS, BACKENDS)]
WORDS = ["otter", "badger", "volcano", "lava", "river", "stone", "setts", "tunnel"]


def _fill(store) -> None:
    rng = np.random.default_rng(7)
    entries = []
    for i in range(30):
        texts = [" ".join(rng.choice(WORDS, size=6)) + f" item{i} part{j}" for j in range(1 + i % 4)]
        chunks = [Chunk(t, {"item_id": f"it{i}", "chunk_index": j, "source": f"/docs/{i}.md"}) for j, t in enumerate(texts)]
        entries.append((f"it{i}", chunks, rng.standard_normal((len(chunks), D)).astype(np.float32)))
    store.replace_items(entries[:20])
    store.replace_items(entries[20:])
    store.delete_items(["it3", "it17"])  # gaps in the insertion order
    store.replace_items([entries[5]])  # an item rewritten: its rows move to the end
    store.replace_items([("nul", [Chunk("text with a \x00 NUL otter", {})], rng.standard_normal((1, D)).astype(np.float32))])


def _copy(source, target, limit: int) -> int:
    rows, pages = source.read_rows(0, limit), 0
    while len(rows):
        following = source.read_rows(rows.seqs[-1], limit)
        target.write_rows(rows, settle=not len(following))
        rows, pages = following, pages + 1
    return pages


@pytest.fixture(params=PAIRS)
def pair(request, tmp_path: Path):
    src, dst = request.param.split("-")
    server = request.getfixturevalue("postgres_server") if "postgres" in (src, dst) else None
    with ExitStack() as stack:
        source = open_store(src, stack, tmp_path / "src", D, server)
        target = open_store(dst, stack, tmp_path / "dst", D, server)
        yield source, target


def test_a_copy_keeps_every_row_and_answers_searches_alike(pair) -> None:
    source, target = pair
    _fill(source)
    assert _copy(source, target, limit=7) > 5
    assert target.count() == source.count() == target.count_vectors() == source.count_vectors()
    assert target.item_ids() == source.item_ids()
    items = sorted(source.item_ids())
    theirs, ours = source.list_chunks(items), target.list_chunks(items)
    assert [(c.id, c.item_id, c.chunk_index, c.metadata) for c in ours] == [
        (c.id, c.item_id, c.chunk_index, c.metadata) for c in theirs]
    assert [c.text.replace("\x00", "\ufffd") for c in ours] == [c.text.replace("\x00", "\ufffd") for c in theirs]
    everything = source.read_rows(0, 10_000)
    copied = target.read_rows(0, 10_000)
    assert copied.ids == everything.ids  # the same insertion order: ties break alike
    norms = np.linalg.norm(everything.vectors, axis=1, keepdims=True)
    assert np.allclose(copied.vectors / np.linalg.norm(copied.vectors, axis=1, keepdims=True),
                       everything.vectors / norms, atol=1e-6)
    rng = np.random.default_rng(1)
    for _ in range(5):
        q = rng.standard_normal(D).astype(np.float32)
        assert [c for c, _ in target.search_vector(q, 10)] == [c for c, _ in source.search_vector(q, 10)]
        assert [c for c, _ in target.search_hybrid(q, "otter lava", 10, 0.5)] == [
            c for c, _ in source.search_hybrid(q, "otter lava", 10, 0.5)]
    for words in ("otter", "badger tunnel", "item5 part0", "nul"):
        assert [c for c, _ in target.search_bm25(words, 10)] == [c for c, _ in source.search_bm25(words, 10)]
    assert target.check_invariants() == []


def test_a_colliding_write_changes_nothing(pair) -> None:
    source, target = pair
    _fill(source)
    _copy(source, target, limit=1000)
    before = target.count()
    rows = source.read_rows(0, 5)
    with pytest.raises(StoreError):
        target.write_rows(rows)
    assert target.count() == before and target.check_invariants() == []
    assert target.write_rows(source.read_rows(10_000, 5)) == 0  # nothing after the end: nothing written


def test_postgres_builds_its_hnsw_index_once_on_the_settling_write(postgres_server, tmp_path: Path) -> None:
    from ktui.core.store.postgres import PgStoreManager, PgTuning

    with ExitStack() as stack:
        source = open_store("sqlite", stack, tmp_path, D, None)
        _fill(source)
        schema = stack.enter_context(postgres_server.schema())
        manager = PgStoreManager(postgres_server.url, schema=schema, tuning=PgTuning(hnsw_from=10))
        stack.callback(manager.close_all)
        target = manager.create("b", D)
        first = source.read_rows(0, 40)
        target.write_rows(first, settle=False)
        assert not target.has_hnsw()  # past hnsw_from, but not settled
        target.write_rows(source.read_rows(first.seqs[-1], 1000), settle=True)
        assert target.has_hnsw() and target.check_invariants() == []
