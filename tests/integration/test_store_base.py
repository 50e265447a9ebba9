"""The chunk-store contract against real backends: replace semantics, FTS in step, deletes, search modes.

Every test that takes `store` (or `hostile_store`) runs twice: on a real SQLite file and on
a real PostgreSQL + pgvector (tests/support/postgres.py, tests/support/stores.py). The
tests below that open `BaseStore` themselves are about the SQLite store's matrix.
"""

from __future__ import annotations

import threading
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ktui.core.errors import StoreError
from ktui.core.models import Chunk, ChunkRecord
from ktui.core.store import BaseStore, Tuning, VectorShapeError
from tests.support.stores import BACKENDS, fts_count, open_store

D = 16


@pytest.fixture(params=BACKENDS)
def store(request, tmp_path: Path):
    server = request.getfixturevalue("postgres_server") if request.param == "postgres" else None
    with ExitStack() as stack:
        yield open_store(request.param, stack, tmp_path, D, server)


def vecs(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, D)).astype(np.float32)


def chunks(*texts: str) -> list[Chunk]:
    return [Chunk(t, {"source": "s", "n": i}) for i, t in enumerate(texts)]


def test_replace_returns_new_ids_and_records_round_trip(store: BaseStore) -> None:
    ids = store.replace_item_chunks("item-a", chunks("alpha one", "alpha two"), vecs(2))
    assert len(ids) == 2 and len(set(ids)) == 2
    recs = store.list_chunks(["item-a"])
    assert [r.id for r in recs] == ids
    assert recs[0] == ChunkRecord(
        ids[0], "item-a", 0, "alpha one", {"source": "s", "n": 0}
    )
    assert store.get_chunk(ids[1]).text == "alpha two"
    assert store.get_chunk("nope") is None
    assert store.count() == 2 and store.item_ids() == {"item-a"}


def test_replace_drops_the_old_chunks_and_their_fts_rows(store: BaseStore) -> None:
    old = store.replace_item_chunks(
        "item-a", chunks("zebra stripes", "zebra herd"), vecs(2, 1)
    )
    store.replace_item_chunks("item-b", chunks("zebra crossing"), vecs(1, 2))
    new = store.replace_item_chunks("item-a", chunks("lion pride"), vecs(1, 3))
    assert not set(old) & set(new)
    assert [r.text for r in store.list_chunks(["item-a"])] == ["lion pride"]
    assert store.fetch(old) == []
    assert fts_count(store, "zebra") == 1 and fts_count(store, "lion") == 1
    assert [c for c, _ in store.search_bm25("zebra", 10)] == [
        store.list_chunks(["item-b"])[0].id
    ]
    assert store.check_invariants() == []


def test_replace_with_no_chunks_empties_the_item(store: BaseStore) -> None:
    store.replace_item_chunks("item-a", chunks("x y"), vecs(1))
    assert store.replace_item_chunks("item-a", [], np.empty((0, D), np.float32)) == []
    assert store.count() == 0 and store.item_ids() == set()
    assert store.check_invariants() == []


def test_a_failure_mid_write_leaves_the_old_chunks_intact(store: BaseStore) -> None:
    old = store.replace_item_chunks(
        "item-a", chunks("kept text", "kept more"), vecs(2, 5)
    )
    before = store.search_vector(vecs(2, 5)[0], 2)
    # The third row cannot be encoded for SQLite: the delete and first inserts already ran.
    bad = chunks("new one", "new two", "broken \ud800 text")
    with pytest.raises(StoreError, match="item-a"):
        store.replace_item_chunks("item-a", bad, vecs(3, 6))
    assert [r.id for r in store.list_chunks(["item-a"])] == old
    assert store.search_vector(vecs(2, 5)[0], 2) == before
    assert fts_count(store, "kept") == 2 and fts_count(store, "new") == 0
    assert store.check_invariants() == []


@pytest.mark.parametrize(
    "vectors, message",
    [
        (
            np.zeros((2, D + 1), np.float32),
            f"17 wide but this base stores {D}-dimension",
        ),
        (np.zeros((3, D), np.float32), "expected 2 row"),
        (np.zeros(D, np.float32), "expected 2 row"),
        (np.full((2, D), np.nan, np.float32), "NaN"),
        ([[1, 2], [3]], "not a numeric matrix"),
    ],
)
def test_vectors_of_the_wrong_shape_are_refused_before_writing(
    store: BaseStore, vectors, message: str
) -> None:
    store.replace_item_chunks("item-a", chunks("keep"), vecs(1))
    with pytest.raises(VectorShapeError, match=message) as info:
        store.replace_item_chunks("item-a", chunks("a", "b"), vectors)
    assert isinstance(info.value, ValueError) and isinstance(info.value, StoreError)
    assert [r.text for r in store.list_chunks(["item-a"])] == ["keep"]


def test_query_vector_width_is_checked(store: BaseStore) -> None:
    with pytest.raises(VectorShapeError, match="8 wide"):
        store.search_vector(np.ones(8, np.float32), 3)


def test_delete_items_and_delete_chunk(store: BaseStore) -> None:
    a = store.replace_item_chunks("a", chunks("apple pie", "apple tart"), vecs(2, 1))
    b = store.replace_item_chunks("b", chunks("banana bread"), vecs(1, 2))
    c = store.replace_item_chunks("c", chunks("cherry cake"), vecs(1, 3))
    assert store.delete_items(["a", "c", "zzz"]) == 3
    assert store.delete_items(["a"]) == 0
    assert store.delete_items("b") == 1 and store.item_ids() == set()  # a lone id
    b = store.replace_item_chunks("b", chunks("banana bread"), vecs(1, 2))
    assert store.item_ids() == {"b"}
    assert fts_count(store, "apple") == 0 and fts_count(store, "cherry") == 0
    rec = store.delete_chunk(b[0])
    assert rec is not None and rec.text == "banana bread" and rec.item_id == "b"
    assert store.delete_chunk(b[0]) is None
    assert store.count() == 0 and store.search_vector(vecs(1, 2)[0], 5) == []
    assert store.search_bm25("banana", 5) == []
    assert store.check_invariants() == []
    del a, c


def test_list_chunks_follows_item_order_then_chunk_index_and_fetch_keeps_order(
    store: BaseStore,
) -> None:
    a = store.replace_item_chunks("a", chunks("a0", "a1", "a2"), vecs(3, 1))
    b = store.replace_item_chunks("b", chunks("b0", "b1"), vecs(2, 2))
    assert [r.id for r in store.list_chunks(["b", "a", "b"])] == b + a
    assert store.list_chunks([]) == []
    wanted = [a[2], b[0], "missing", a[0]]
    assert [r.id for r in store.fetch(wanted)] == [a[2], b[0], a[0]]


def test_vector_search_is_exact_cosine_best_first(store: BaseStore) -> None:
    data = vecs(50, 9)
    ids = store.replace_item_chunks("a", chunks(*[f"t{i}" for i in range(50)]), data)
    q = data[17] + 0.01
    got = store.search_vector(q, 5)
    unit = data / np.linalg.norm(data, axis=1, keepdims=True)
    sims = unit @ (q / np.linalg.norm(q))
    order = np.argsort(-sims)[:5]
    assert [c for c, _ in got] == [ids[i] for i in order]
    assert np.allclose([s for _, s in got], sims[order], atol=1e-5)
    assert got[0][0] == ids[17]
    assert store.search_vector(q, 0) == []
    assert len(store.search_vector(q, 500)) == 50


def test_bm25_ranks_better_matches_higher(store: BaseStore) -> None:
    ids = store.replace_item_chunks(
        "a",
        chunks(
            "the quick brown fox",
            "a fox and another fox and a fox den",
            "nothing relevant here",
            "brown bread",
        ),
        vecs(4),
    )
    got = store.search_bm25("FOX?", 10)
    assert [c for c, _ in got] == [ids[1], ids[0]]
    assert got[0][1] > got[1][1] > 0
    both = [c for c, _ in store.search_bm25("brown fox", 10)]
    assert both[0] == ids[0] and set(both) == {ids[0], ids[1], ids[3]}
    assert store.search_bm25("fox", 1) == got[:1]
    assert store.search_bm25("   ", 5) == [] and store.search_bm25("fox", 0) == []
    assert store.search_bm25("foxes", 10) == []  # exact words: no stemmer merges "foxes" into "fox"


@pytest.fixture(scope="module", params=BACKENDS)
def hostile_store(request, tmp_path_factory):
    server = request.getfixturevalue("postgres_server") if request.param == "postgres" else None
    stack = ExitStack()
    s = open_store(request.param, stack, tmp_path_factory.mktemp("hostile"), D, server)
    s.replace_item_chunks(
        "a",
        chunks(
            'quote " and NEAR( stuff*', "AND OR NOT ^ - + : {col}", "日本語 テキスト"
        ),
        vecs(3),
    )
    yield s
    stack.close()


@settings(max_examples=80)
@given(query=st.text(max_size=300))
def test_bm25_never_raises_on_hostile_text(
    hostile_store: BaseStore, query: str
) -> None:
    result = hostile_store.search_bm25(query, 5)
    assert isinstance(result, list) and len(result) <= 5
    assert all(isinstance(c, str) and s > 0 for c, s in result)


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '""',
        "'",
        "AND",
        "OR NOT",
        "NEAR(",
        "*",
        "^start",
        "col:val",
        "(((",
        "\x00",
        "\ud800x",
        "a" * 5000,
        "x" * 10 + ' "' * 400,
    ],
)
def test_bm25_operator_and_quote_soup(store: BaseStore, query: str) -> None:
    store.replace_item_chunks("a", chunks("near and or not xxxxxxxxxx x"), vecs(1))
    store.search_bm25(query, 3)


def test_hybrid_fuses_both_rankings(store: BaseStore) -> None:
    data = vecs(6, 4)
    ids = store.replace_item_chunks(
        "a",
        chunks(
            "red apple",
            "green apple",
            "red car",
            "blue sky",
            "apple apple apple",
            "grey stone",
        ),
        data,
    )
    q = data[3]  # vector side: "blue sky" first; keyword side: only apples
    vector = store.search_vector(q, 15)
    keyword = store.search_bm25("apple", 15)
    fused = store.search_hybrid(q, "apple", 3, 0.5)
    def by_best(side: list[tuple[str, float]]) -> dict[str, float]:
        return {c: max(0.0, s) / side[0][1] for c, s in side}

    v, k = by_best(vector), by_best(keyword)
    expected = {c: 0.5 * v.get(c, 0.0) + 0.5 * k.get(c, 0.0) for c in v.keys() | k.keys()}
    for c, score in fused:
        assert score == pytest.approx(expected[c])
    assert len(fused) == 3 and [s for _, s in fused] == sorted(
        (s for _, s in fused), reverse=True
    )
    assert store.search_hybrid(q, "apple", 1, 1.0)[0][0] == ids[3]
    assert store.search_hybrid(q, "apple", 1, 0.0)[0][0] == keyword[0][0]
    with pytest.raises(ValueError, match="alpha"):
        store.search_hybrid(q, "apple", 3, 2.0)


def test_closed_store_refuses_calls(store: BaseStore) -> None:
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.count()


def test_concurrent_searches_during_writes_stay_consistent(tmp_path: Path) -> None:
    # Small compaction thresholds so matrix files are swapped under the searchers' feet.
    store = BaseStore.open(
        tmp_path / "c.sqlite",
        D,
        create=True,
        tuning=Tuning(exact_below=0, compact_min_dead=8),
    )
    errors: list[BaseException] = []
    stop = threading.Event()
    q = vecs(1, 99)[0]

    def searcher() -> None:
        try:
            while not stop.is_set():
                for cid, score in store.search_vector(q, 5):
                    assert -1.0001 <= score <= 1.0001 and isinstance(cid, str)
                store.search_bm25("word", 5)
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=searcher) for _ in range(3)]
    for t in threads:
        t.start()
    for i in range(150):
        store.replace_item_chunks(
            f"i{i % 7}",
            chunks(*[f"word {i} {j}" for j in range(i % 5 + 1)]),
            vecs(i % 5 + 1, i),
        )
        if i % 11 == 0:
            store.delete_items([f"i{(i + 3) % 7}"])
    stop.set()
    for t in threads:
        t.join()
    assert errors == []
    assert store.check_invariants() == []
    assert store.matrix_info().rows < 100  # 450 rows were appended: compaction ran
    store.close()


def test_replace_items_writes_several_items_in_one_transaction(store: BaseStore) -> None:
    store.replace_item_chunks("a", chunks("old apple"), vecs(1, 1))
    ids = store.replace_items([("a", chunks("new apple", "apple two"), vecs(2, 2)), ("b", chunks("banana"), vecs(1, 3))])
    assert [len(i) for i in ids] == [2, 1]
    assert [c.text for c in store.list_chunks(["a", "b"])] == ["new apple", "apple two", "banana"]
    assert store.search_vector(vecs(1, 3)[0], 1)[0][0] == ids[1][0]
    assert store.check_invariants() == []
    # one bad entry refuses the whole batch: nothing of it is written
    with pytest.raises(VectorShapeError):
        store.replace_items([("c", chunks("cherry"), vecs(1, 4)), ("a", chunks("x"), np.zeros((1, 3), np.float32))])
    assert store.item_ids() == {"a", "b"}
    assert [c.text for c in store.list_chunks(["a"])] == ["new apple", "apple two"]
