"""What only the PostgreSQL chunk store has: the HNSW index, several managers on one schema,
the registry, and what its errors may say. Against a real PostgreSQL 16 + pgvector
(tests/support/postgres.py); the shared contract runs in test_store_base.py."""

from __future__ import annotations

import threading

import numpy as np
import psycopg
import pytest

from ktui.core.errors import StoreError
from ktui.core.models import Chunk
from ktui.core.store.postgres import PgStoreManager, PgTuning, redact

D = 16


def vecs(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, D)).astype(np.float32)


@pytest.fixture
def manager(postgres_server, pg_schema):
    m = PgStoreManager(postgres_server.url, schema=pg_schema, tuning=PgTuning(hnsw_from=300))
    yield m
    m.close_all()


def test_the_hnsw_index_is_built_once_the_base_passes_its_size_and_keeps_recall(manager) -> None:
    store = manager.create("big", D)
    data = vecs(600, 1)
    texts = [f"row {i}" for i in range(600)]
    store.replace_items([(f"i{n}", [Chunk(t, {})], data[n : n + 1]) for n, t in enumerate(texts[:299])])
    assert not store.has_hnsw()  # 299 < 300
    store.replace_items([(f"i{n}", [Chunk(texts[n], {})], data[n : n + 1]) for n in range(299, 600)])
    assert store.has_hnsw() and store.check_invariants() == []
    queries = vecs(20, 2)
    hits = 0
    for q in queries:
        exact = [c for c, _ in store.search_vector(q, 10, exact=True)]
        approx = [c for c, _ in store.search_vector(q, 10)]
        hits += len(set(exact) & set(approx))
    assert hits / 200 >= 0.95  # recall@10 of HNSW against the exact scan
    # more results than pgvector's ef_search can give: answered exactly
    assert len(store.search_vector(queries[0], 1200)) == 600


def test_two_managers_on_one_schema_see_each_others_writes(postgres_server, pg_schema) -> None:
    one = PgStoreManager(postgres_server.url, schema=pg_schema)
    two = PgStoreManager(postgres_server.url, schema=pg_schema)
    try:
        a = one.create("shared", D)
        ids = a.replace_item_chunks("doc", [Chunk("seen from the other side", {})], vecs(1))
        b = two.get("shared", D)
        assert [r.id for r in b.list_chunks(["doc"])] == ids and b.count() == 1
        assert [c for c, _ in b.search_bm25("other side", 5)] == ids
        assert two.base_ids() == {"shared"}
        with pytest.raises(StoreError, match="already has a store"):
            two.create("shared", D)
        with pytest.raises(StoreError, match="16-dimension vectors, not 8"):
            PgStoreManager(postgres_server.url, schema=pg_schema).get("shared", 8)
        assert one.destroy("shared") == []
        with pytest.raises(StoreError, match="no longer exists"):
            b.replace_item_chunks("doc", [Chunk("x", {})], vecs(1))
        with pytest.raises(StoreError, match="has no store"):
            PgStoreManager(postgres_server.url, schema=pg_schema).get("shared", D)
    finally:
        one.close_all()
        two.close_all()


def test_writers_of_one_base_in_several_managers_never_lose_a_row(postgres_server, pg_schema) -> None:
    managers = [PgStoreManager(postgres_server.url, schema=pg_schema) for _ in range(3)]
    try:
        managers[0].create("b", D)
        stores = [m.get("b", D) for m in managers]
        errors: list[BaseException] = []

        def writer(n: int) -> None:
            try:
                for i in range(20):
                    stores[n].replace_item_chunks(f"w{n}-{i % 5}", [Chunk(f"w{n} {i} {j}", {}) for j in range(i % 3 + 1)],
                                                  vecs(i % 3 + 1, i))
            except BaseException as exc:  # noqa: BLE001 - surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        # each item's last write wins: i = 15..19 -> 1, 2, 3, 1, 2 chunks
        assert stores[1].count() == 3 * (1 + 2 + 3 + 1 + 2)
        assert stores[2].check_invariants() == []
    finally:
        for m in managers:
            m.close_all()


def test_zero_vectors_score_zero_and_nul_characters_are_stored_as_replacement(manager) -> None:
    store = manager.create("z", D)
    ids = store.replace_item_chunks("a", [Chunk("zero\x00vector", {"k": "v\x00"})], np.zeros((1, D), np.float32))
    assert store.search_vector(vecs(1)[0], 3) == [(ids[0], 0.0)]
    record = store.get_chunk(ids[0])
    assert record is not None and record.text == "zero\ufffdvector" and record.metadata == {"k": "v\x00"}


def test_credentials_never_appear_in_errors(postgres_server, pg_schema) -> None:
    secret = "s3cr3t-Pa55"
    url = f"postgresql://ktui:{secret}@127.0.0.1:1/nowhere?sslpassword={secret}x&connect_timeout=2"
    assert redact(url) == "postgresql://ktui@127.0.0.1:1/nowhere"
    with pytest.raises(StoreError) as info:
        PgStoreManager(url, schema=pg_schema).create("b", D)
    assert secret not in str(info.value) and "127.0.0.1:1/nowhere" in str(info.value)
    assert all(secret not in str(e) for e in (info.value.__cause__,) if not isinstance(e, psycopg.Error))
    # a wrong password against the real server (which trusts its socket, so ask it for a role that does not exist)
    bad = postgres_server.url.replace("postgres:@", f"nobody:{secret}@")
    with pytest.raises(StoreError) as info:
        PgStoreManager(bad, schema=pg_schema).create("b", D)
    assert secret not in str(info.value) and "nobody" in str(info.value)


def test_schema_names_are_checked(postgres_server) -> None:
    with pytest.raises(StoreError, match="schema name"):
        PgStoreManager(postgres_server.url, schema='x"; DROP TABLE y; --')


_WRITER = """
import sys
import numpy as np
from ktui.core.models import Chunk
from ktui.core.store.postgres import PgStoreManager

url, schema, name, writes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
manager = PgStoreManager(url, schema=schema)
store = manager.get("b", 16)
rng = np.random.default_rng(abs(hash(name)) % 2**32)
for i in range(writes):
    n = 1 + i % 4
    # every chunk of one write says which write it was: a torn write would mix them
    entries = [(f"{name}-{j}", [Chunk(f"{name} write {i} part {c}", {"write": i}) for c in range(n)],
                rng.standard_normal((n, 16)).astype(np.float32)) for j in range(3)]
    store.replace_items(entries)
    print(i, flush=True)
manager.close_all()
"""


def test_writer_processes_one_sigkilled_mid_stream_leave_only_whole_writes(postgres_server, pg_schema) -> None:
    import signal
    import subprocess
    import sys

    from tests.support.processes import alive

    manager = PgStoreManager(postgres_server.url, schema=pg_schema)
    try:
        manager.create("b", D)
        args = [postgres_server.url, pg_schema]
        steady = subprocess.Popen([sys.executable, "-c", _WRITER, *args, "steady", "40"], stdout=subprocess.PIPE, text=True)
        doomed = subprocess.Popen([sys.executable, "-c", _WRITER, *args, "doomed", "100000"], stdout=subprocess.PIPE, text=True)
        try:
            assert doomed.stdout is not None and steady.stdout is not None
            for _ in range(5):  # it has committed five writes and is busy with the next ones
                assert doomed.stdout.readline()
            doomed.send_signal(signal.SIGKILL)
            doomed.wait()
            assert not alive(doomed.pid)
            assert steady.wait() == 0
        finally:
            for proc in (steady, doomed):
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        store = manager.get("b", D)
        for item in store.item_ids():
            chunks = store.list_chunks([item])
            writes = {c.metadata["write"] for c in chunks}
            assert len(writes) == 1, f"{item} mixes writes {writes}"
            assert [c.chunk_index for c in chunks] == list(range(1 + writes.pop() % 4))
        assert {i for i in store.item_ids() if i.startswith("steady")} == {"steady-0", "steady-1", "steady-2"}
        assert [c.metadata["write"] for c in store.list_chunks(["steady-0"])] == [39] * 4
        assert store.check_invariants() == []
        # nothing of the killed writer is left holding a lock: its items can be written again
        store.replace_item_chunks("doomed-0", [Chunk("after the kill", {})], vecs(1))
        assert [c.text for c in store.list_chunks(["doomed-0"])] == ["after the kill"]
    finally:
        manager.close_all()


def test_connections_the_server_dropped_while_idle_are_replaced(manager) -> None:
    store = manager.create("b", D)
    ids = store.replace_item_chunks("a", [Chunk("still here", {})], vecs(1))
    with psycopg.connect(manager._pool.url, autocommit=True) as admin:  # an administrator ends every session
        ended = admin.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        ).fetchone()
    assert ended is not None and ended[0] >= 1
    assert [r.id for r in store.list_chunks(["a"])] == ids  # no failed call: a new connection answers
    store.replace_item_chunks("b", [Chunk("and writable", {})], vecs(1, 1))
    assert store.count() == 2


def test_bm25_scores_equal_fts5s_on_the_same_chunks(manager, tmp_path) -> None:
    from ktui.core.store import BaseStore

    rng = np.random.default_rng(7)
    vocab = np.array([f"w{i}x" for i in range(300)], dtype=object)
    p = 1.0 / np.arange(1, 301)
    texts = [" ".join(vocab[rng.choice(300, size=rng.integers(3, 40), p=p / p.sum())]) for _ in range(400)]
    texts += ["Café crème 3.14 foo-bar 乌龙茶 über", "cafe CREME uber 乌龙", "w1x w2x w1x w2x w1x"]
    vectors = rng.standard_normal((len(texts), D)).astype(np.float32)
    entries = [(f"i{k}", [Chunk(t, {}) for t in texts[k : k + 50]], vectors[k : k + 50]) for k in range(0, len(texts), 50)]
    pg = manager.create("b", D)
    lite = BaseStore.open(tmp_path / "b.sqlite", D, create=True)
    try:
        for store in (pg, lite):
            store.replace_items(entries)
        queries = [f"{texts[i].split()[0]} {texts[i + 1].split()[-1]}" for i in range(0, 40, 2)]
        queries += ["cafe", "café über", "乌", "乌龙茶", '"乌龙茶"', "3.14", "foo bar", "w1x", '"w1x w2x"', '"w2x w1x" w7x']
        for query in queries:
            got = [(pg.get_chunk(c), s) for c, s in pg.search_bm25(query, 10)]
            want = [(lite.get_chunk(c), s) for c, s in lite.search_bm25(query, 10)]
            assert [(r.item_id, r.chunk_index) for r, _ in got] == [(r.item_id, r.chunk_index) for r, _ in want], query
            assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9), query
    finally:
        lite.close()


def test_a_failed_index_build_never_fails_the_write_before_it(postgres_server, pg_schema, caplog) -> None:
    manager = PgStoreManager(postgres_server.url, schema=pg_schema, tuning=PgTuning(hnsw_from=3, build_memory="1kB"))
    try:
        store = manager.create("b", D)  # 1 kB of maintenance_work_mem is refused: every build fails
        with caplog.at_level("WARNING", logger="ktui.core.store.postgres.store"):
            ids = store.replace_item_chunks("a", [Chunk(f"row {i}", {}) for i in range(4)], vecs(4))
        assert len(ids) == 4 and store.count() == 4 and not store.has_hnsw()
        assert "could not be built" in caplog.text and "maintenance_work_mem" in caplog.text
        assert store.search_vector(vecs(4)[2], 1)[0][0] == ids[2]  # exact search answers
        assert store.check_invariants() == []
    finally:
        manager.close_all()


def test_the_invariant_check_reads_the_table_and_the_registry_in_one_snapshot(postgres_server, pg_schema) -> None:
    """Another writer commits right after the check's first read of the table (a second
    manager, as another process would): the registry and the table were read in two
    statements, so the check saw one more chunk in the registry than in the table."""
    from contextlib import contextmanager

    checker, writer = PgStoreManager(postgres_server.url, schema=pg_schema), PgStoreManager(postgres_server.url, schema=pg_schema)
    try:
        store = checker.create("racy", D)
        store.replace_item_chunks("first", [Chunk("already there", {})], vecs(1))
        other = writer.get("racy", D)
        original, wrote = store._job, []

        class WriteAfterTheCount:
            def __init__(self, con):
                self._con = con

            def execute(self, query, *args, **kwargs):
                result = self._con.execute(query, *args, **kwargs)
                text = query.as_string(self._con) if hasattr(query, "as_string") else str(query)
                if "count(*)" in text and not wrote:
                    wrote.append(other.replace_item_chunks("second", [Chunk("written meanwhile", {})], vecs(1, 3)))
                return result

            def __getattr__(self, name):
                return getattr(self._con, name)

        @contextmanager
        def job(action):
            with original(action) as con:
                yield WriteAfterTheCount(con)

        store._job = job
        assert store.check_invariants() == []
        assert wrote and store.count() == 2
    finally:
        writer.close_all()
        checker.close_all()
