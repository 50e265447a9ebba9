"""Hypothesis state machine: interleaved writes, deletes and reopens vs a brute-force model.

Runs on the SQLite store and (PgStoreVsModel) on the PostgreSQL store, where a reopen is
a new manager on the same schema.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from ktui.core.models import Chunk
from ktui.core.store import BaseStore, Tuning

D = 12
ITEMS = st.sampled_from([f"item-{i}" for i in range(5)])
# int8 candidate path always on, compaction after a handful of tombstones.
TUNING = Tuning(exact_below=0, compact_min_dead=6, compact_ratio=0.2)


class StoreVsModel(RuleBasedStateMachine):
    @initialize()
    def setup(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="ktui-store-sm-"))
        self.path = self.dir / "b.sqlite"
        self.store = BaseStore.open(self.path, D, create=True, tuning=TUNING)
        self.model: dict[str, list[tuple[str, np.ndarray, str]]] = {}

    @rule(item=ITEMS, n=st.integers(0, 6), seed=st.integers(0, 2**32 - 1))
    def replace(self, item: str, n: int, seed: int) -> None:
        vectors = np.random.default_rng(seed).standard_normal((n, D)).astype(np.float32)
        texts = [f"word{seed % 7} w{i} {item}" for i in range(n)]
        ids = self.store.replace_item_chunks(item, [Chunk(t) for t in texts], vectors)
        self.model[item] = list(zip(ids, vectors, texts, strict=True))
        if not n:
            del self.model[item]

    @rule(items=st.sets(ITEMS, max_size=3))
    def delete_items(self, items: set[str]) -> None:
        expected = sum(len(self.model.pop(i, [])) for i in items)
        assert self.store.delete_items(items) == expected

    @precondition(lambda self: any(self.model.values()))
    @rule(pick=st.integers(0, 10**6))
    def delete_chunk(self, pick: int) -> None:
        flat = [
            (item, i) for item, rows in self.model.items() for i in range(len(rows))
        ]
        item, i = flat[pick % len(flat)]
        chunk_id = self.model[item].pop(i)[0]
        if not self.model[item]:
            del self.model[item]
        record = self.store.delete_chunk(chunk_id)
        assert record is not None and record.id == chunk_id and record.item_id == item

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = BaseStore.open(self.path, D, tuning=TUNING)

    @rule(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 8))
    def search_matches_brute_force(self, seed: int, k: int) -> None:
        q = np.random.default_rng(seed).standard_normal(D).astype(np.float32)
        rows = [(cid, v) for entries in self.model.values() for cid, v, _ in entries]
        got = self.store.search_vector(q, k)
        if not rows:
            assert got == []
            return
        unit = np.stack([v / np.linalg.norm(v) for _, v in rows])
        sims = dict(
            zip((c for c, _ in rows), (unit @ (q / np.linalg.norm(q))).tolist(), strict=True)
        )
        expect = sorted(sims.values(), reverse=True)[:k]
        assert len(got) == len(expect)
        assert np.allclose([s for _, s in got], expect, atol=1e-5)
        for cid, score in got:
            assert abs(sims[cid] - score) < 1e-5

    @invariant()
    def rows_and_items_match(self) -> None:
        if not hasattr(self, "store"):
            return
        assert self.store.item_ids() == set(self.model)
        assert self.store.count() == sum(len(v) for v in self.model.values())

    @rule()
    def store_invariants_hold(self) -> None:
        assert self.store.check_invariants() == []
        for item, entries in self.model.items():
            assert [r.id for r in self.store.list_chunks([item])] == [
                c for c, _, _ in entries
            ]

    def teardown(self) -> None:
        if hasattr(self, "store"):
            assert self.store.check_invariants() == []
            self.store.close()
            shutil.rmtree(self.dir, ignore_errors=True)


TestStoreStateMachine = StoreVsModel.TestCase
TestStoreStateMachine.settings = settings(
    max_examples=40, stateful_step_count=30, deadline=None
)


_server: list = []  # the session's PostgreSQL, handed to the state machine below


@pytest.fixture(autouse=True)
def _postgres_for_the_machine(request):
    if "Pg" in request.node.nodeid:
        _server[:] = [request.getfixturevalue("postgres_server")]
    yield


class PgStoreVsModel(StoreVsModel):
    @initialize()
    def setup(self) -> None:
        from ktui.core.store.postgres import PgStoreManager

        server = _server[0]
        self._schema_cm = server.schema()
        self.schema = self._schema_cm.__enter__()
        self.manager = PgStoreManager(server.url, schema=self.schema)
        self.store = self.manager.create("b", D)
        self.model = {}

    @rule()
    def reopen(self) -> None:
        from ktui.core.store.postgres import PgStoreManager

        self.manager.close_all()
        self.manager = PgStoreManager(_server[0].url, schema=self.schema)
        self.store = self.manager.get("b", D)

    def teardown(self) -> None:
        if hasattr(self, "store"):
            assert self.store.check_invariants() == []
            self.manager.close_all()
            self._schema_cm.__exit__(None, None, None)


TestPgStoreStateMachine = PgStoreVsModel.TestCase
TestPgStoreStateMachine.settings = settings(max_examples=25, stateful_step_count=30, deadline=None)
