"""Hostile input through the facade: thousands of fuzzed payloads, ids, settings and queries.

Every call either succeeds or raises a `KnowledgeError` subclass (ValidationError,
NotFoundError, InvalidOperationError, ...), never anything else; when it raises, the
catalogue is exactly as it was (bases with their settings, item ids). Whatever was
accepted is indexed to a terminal state without leaving anything `processing`.

One service on one background loop serves all examples (tests/faults/support/
loop_thread.py), so each example costs a call, not a service start. Payloads that
would reach the network only ever name 127.0.0.1 ports that refuse connections.
KTUI_FAULT_FUZZ scales the number of examples per test (default 700). Every test runs on
both backends: on SQLite, and on a shared PostgreSQL store (a schema of the session's
server; KTUI_FAULT_PG_FUZZ examples, default 150, since each call costs round trips).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ktui.core.errors import KnowledgeError
from ktui.core.models import ANY_GROUP, ItemInput, ItemStatus
from ktui.core.service import KnowledgeService
from tests.faults.support.loop_thread import LoopThread
from tests.support.embedding_server import start_embedding_server
from tests.support.services import fake_settings

pytestmark = pytest.mark.faults

EXAMPLES = int(os.environ.get("KTUI_FAULT_FUZZ", "700"))
PG_EXAMPLES = int(os.environ.get("KTUI_FAULT_PG_FUZZ", "150"))
DIMS = 16
fuzz = settings(max_examples=EXAMPLES, deadline=None, database=None)
pg_fuzz = settings(max_examples=PG_EXAMPLES, deadline=None, database=None)  # each call: round trips to a server


class Env:
    def __init__(self, tmp: Path, store: Any = None):
        self.tmp = tmp
        self.tried: dict[str, int] = {}
        self.server = start_embedding_server(DIMS)
        self.loop = LoopThread()
        overrides = {} if store is None else {"store": store}
        self.ks: KnowledgeService = self.run(KnowledgeService.open(
            settings=fake_settings(tmp / "data", self.server.url, **overrides)))
        self.base = self.run(self.ks.create_base("Fuzz", dimensions=DIMS))
        (tmp / "docs").mkdir()
        (tmp / "docs" / "a.md").write_text("# A\n\nKites fly in steady wind.\n")
        (tmp / "plain.txt").write_text("Harbour storms ground every kite.\n")
        self.run(self.ks.add_items(self.base.id, [ItemInput("note", {"content": "Reels hold the kite string."}),
                                                  ItemInput("directory", {"path": str(tmp / "docs")})]))
        assert self.run(self.ks.wait_idle(timeout=30))

    def run(self, coro, timeout: float = 30.0):
        return self.loop.run(coro, timeout)

    def snapshot(self):
        bases = self.run(self.ks.list_bases(limit=100)).items
        items = set()
        for b in bases:
            page = 1
            while True:
                got = self.run(self.ks.list_items(b.id, group_id=ANY_GROUP, page=page, limit=100))
                items |= {i.id for i in got.items}
                if page * 100 >= got.total:
                    break
                page += 1
        return sorted(bases, key=lambda b: b.id), items

    def call(self, what: str, make_coro):
        """Run one fuzzed call: a result, or a KnowledgeError with the catalogue unchanged."""
        self.tried[what] = self.tried.get(what, 0) + 1
        before = self.snapshot()
        try:
            return self.run(make_coro())
        except KnowledgeError as exc:
            assert str(exc), f"{what}: {type(exc).__name__} without a message"
            assert self.snapshot() == before, f"{what} failed with {exc!r} but changed the catalogue"
            return exc

    def close(self) -> None:
        try:
            assert self.run(self.ks.wait_idle(timeout=60)), "accepted fuzz items never finished"
            assert self.run(self.ks.check_invariants()) == []
            for b in self.run(self.ks.list_bases(limit=100)).items:
                stuck = [i for i in self.run(self.ks.list_items(b.id, group_id=ANY_GROUP, limit=100)).items
                         if i.status == ItemStatus.PROCESSING]
                assert stuck == []
            self.run(self.ks.close())
        finally:
            self.loop.close()
            self.server.stop()


@contextmanager
def opened_env(request, tmp_path_factory, backend: str) -> Iterator[Env]:
    with ExitStack() as stack:
        store = None
        if backend == "postgres":
            from ktui.core.config import StoreSettings

            server = request.getfixturevalue("postgres_server")
            store = StoreSettings(url=server.url, schema=stack.enter_context(server.schema()))
        e = Env(tmp_path_factory.mktemp("hostile-facade"), store)
        yield e
        e.close()
    print(f"\nfacade fuzz inputs tried on {backend}: " + ", ".join(f"{k} {v}" for k, v in sorted(e.tried.items()))
          + f" = {sum(e.tried.values())}")


@pytest.fixture(scope="module")
def env(request, tmp_path_factory):
    """One service on SQLite for every example of the module."""
    with opened_env(request, tmp_path_factory, "sqlite") as e:
        yield e


@pytest.fixture(scope="module")
def pg_env(request, tmp_path_factory):
    """The same on a shared PostgreSQL store (a schema of the session's server)."""
    with opened_env(request, tmp_path_factory, "postgres") as e:
        yield e


# --- strategies -----------------------------------------------------------------

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=30),
                      st.binary(max_size=10))
json_value = st.recursive(json_leaf, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                             st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                          max_leaves=10)
hostile_text = st.one_of(
    st.text(max_size=50),
    st.text(st.characters(codec="utf-8"), max_size=20),
    st.text(st.characters(categories=("Cs", "Cc", "Zs")), max_size=10),  # lone surrogates, controls, spaces
    st.sampled_from(["", " ", "\x00", "\ud800", "a" * 2_000, "\u202e" + "abc", "../../etc/passwd", "C++ \"x\" AND NEAR(",
                     "*", "NOT", "OR OR", "'; DROP TABLE knowledge_item; --", "%s%s%n", "\n\t"]),
)


def url_strategy() -> st.SearchStrategy:
    # anything that parses as http(s) points at a port that refuses at once: no real network
    return st.one_of(
        hostile_text,
        st.sampled_from(["file:///etc/passwd", "ftp://127.0.0.1/x", "javascript:alert(1)", "http://", "http:///x",
                         "https://[::1", "http://127.0.0.1:1/", "http://127.0.0.1:1/a b", "data:text/html,hi",
                         "HTTP://127.0.0.1:1/UP", "http://user:pw@127.0.0.1:1/", "//127.0.0.1:1/x", "mailto:x@y"]),
        st.builds(lambda p: f"http://127.0.0.1:1/{p}", st.text(max_size=20)),
    )


def path_strategy(tmp: Path) -> st.SearchStrategy:
    # real small paths of the test, missing ones, relative and malformed ones; never "/" or a system folder
    return st.one_of(
        hostile_text.filter(lambda s: s.strip() not in ("/", "")),
        st.sampled_from([str(tmp / "docs"), str(tmp / "plain.txt"), str(tmp / "docs" / "a.md"), str(tmp / "missing"),
                         str(tmp / "docs") + "/", str(tmp / "plain.txt") + "/x", "relative/path.md", "~/x.md",
                         str(tmp / "a\x00b"), str(tmp / ("x" * 300)), ""]),
    )


def payload(tmp: Path) -> st.SearchStrategy:
    kind = st.one_of(st.sampled_from(["file", "url", "note", "directory", "sitemap"]), json_leaf)
    data = st.one_of(
        json_value,
        st.fixed_dictionaries({"path": st.one_of(path_strategy(tmp), json_leaf)},
                              optional={"watch": json_leaf, "extra": json_leaf}),
        st.fixed_dictionaries({"url": st.one_of(url_strategy(), json_leaf)}),
        st.fixed_dictionaries({"content": st.one_of(hostile_text, json_leaf)},
                              optional={"source_url": st.one_of(url_strategy(), json_leaf)}),
    )
    item = st.one_of(st.builds(ItemInput, kind, data),
                     st.fixed_dictionaries({"type": kind, "data": data}),
                     json_value)
    return st.one_of(st.lists(item, max_size=4), json_value, st.just([ItemInput("note", {"content": "one too many"})] * 101))


ids = st.one_of(json_leaf, st.text(max_size=40), st.lists(st.text(max_size=10), max_size=3),
                st.just("0" * 36), st.just("../../x"))


# --- tests ----------------------------------------------------------------------

def fuzzed_item_payloads(env, data) -> None:
    items = data.draw(payload(env.tmp))
    base_id = data.draw(st.one_of(st.just(env.base.id), ids))
    result = env.call("add_items", lambda: env.ks.add_items(base_id, items))
    if isinstance(result, list) and result:  # accepted: keep the base small, it is indexed regardless
        env.call("delete_items", lambda: env.ks.delete_items(env.base.id, [i.id for i in result]))


queries = dict(query=st.one_of(hostile_text, json_leaf, st.lists(st.text(max_size=5), max_size=3)),
               top_k=st.one_of(st.none(), st.integers(-5, 200), json_leaf),
               mode=st.one_of(st.none(), st.sampled_from(["default", "bm25", "hybrid", "vector", ""]), json_leaf))


def fuzzed_queries(env, query, top_k, mode) -> None:
    result = env.call("search", lambda: env.ks.search(env.base.id, query, top_k, mode=mode))
    if not isinstance(result, KnowledgeError):
        assert not result.degraded, result.reason
        assert len(result.results) <= (top_k if isinstance(top_k, int) and top_k > 0 else 1000)
        assert all(r.rank == n for n, r in enumerate(result.results, start=1))


def fuzzed_base_and_item_calls(env, data) -> None:
    base_id = data.draw(st.one_of(st.just(env.base.id), ids))
    op = data.draw(st.sampled_from(["create", "update", "list", "get", "delete_items", "reindex", "restore",
                                    "delete_base", "chunks", "similar"]))
    config = data.draw(st.dictionaries(
        st.sampled_from(["emoji", "chunk_size", "chunk_overlap", "threshold", "document_count", "search_mode",
                         "hybrid_alpha", "rerank_model_id", "group_id", "name", "dimensions", "bogus"]),
        json_leaf, max_size=4))
    model = data.draw(st.one_of(st.none(), st.sampled_from(["fake::deterministic", "nope::m", "fake::", "::",
                                                            "builtin", "fake"]), json_leaf))
    dims = data.draw(st.one_of(st.none(), st.integers(-3, 5000), json_leaf))
    name = data.draw(st.one_of(hostile_text, json_leaf))
    item_ids = data.draw(ids)
    match op:
        case "create":
            config.pop("name", None), config.pop("dimensions", None)
            out = env.call("create_base", lambda: env.ks.create_base(name, model, dims, **config))
            if not isinstance(out, KnowledgeError):
                env.call("delete_base", lambda: env.ks.delete_base(out.id))
        case "update":
            patch = data.draw(st.one_of(st.just(config), json_value))
            env.call("update_base", lambda: env.ks.update_base(base_id, patch))
        case "list":
            page, limit = data.draw(json_leaf), data.draw(json_leaf)
            type_ = data.draw(st.one_of(st.none(), st.sampled_from(["file", "note", "x"]), json_leaf))
            env.call("list_items", lambda: env.ks.list_items(base_id, type=type_, group_id=data.draw(
                st.one_of(st.none(), st.just(ANY_GROUP), ids)), page=page, limit=limit))
        case "get":
            env.call("get_item", lambda: env.ks.get_item(item_ids))
        case "delete_items":
            if base_id == env.base.id and isinstance(item_ids, list):
                return  # random ids could only be missing; keep the seeded items for the other cases
            env.call("delete_items", lambda: env.ks.delete_items(base_id, item_ids))
        case "reindex":
            env.call("reindex_items", lambda: env.ks.reindex_items(base_id, item_ids, force=data.draw(st.booleans())))
        case "restore":
            env.call("restore_base", lambda: env.ks.restore_base(base_id, model, dims, name))
            for b in env.run(env.ks.list_bases(limit=100)).items:  # a restore may succeed: drop the copy
                if b.id != env.base.id:
                    env.call("delete_base", lambda b=b: env.ks.delete_base(b.id))
        case "delete_base":
            if base_id != env.base.id:
                env.call("delete_base", lambda: env.ks.delete_base(base_id))
        case "chunks":
            env.call("list_item_chunks", lambda: env.ks.list_item_chunks(base_id, item_ids))
        case "similar":
            env.call("similar_items", lambda: env.ks.similar_items(base_id, item_ids, data.draw(json_leaf)))


# each body on both backends; fewer examples on PostgreSQL

@fuzz
@given(data=st.data())
def test_fuzzed_item_payloads(env, data) -> None:
    fuzzed_item_payloads(env, data)


@pg_fuzz
@given(data=st.data())
def test_fuzzed_item_payloads_on_postgres(pg_env, data) -> None:
    fuzzed_item_payloads(pg_env, data)


@fuzz
@given(**queries)
def test_fuzzed_queries(env, query, top_k, mode) -> None:
    fuzzed_queries(env, query, top_k, mode)


@pg_fuzz
@given(**queries)
def test_fuzzed_queries_on_postgres(pg_env, query, top_k, mode) -> None:
    fuzzed_queries(pg_env, query, top_k, mode)


@fuzz
@given(data=st.data())
def test_fuzzed_base_and_item_calls(env, data) -> None:
    fuzzed_base_and_item_calls(env, data)


@pg_fuzz
@given(data=st.data())
def test_fuzzed_base_and_item_calls_on_postgres(pg_env, data) -> None:
    fuzzed_base_and_item_calls(pg_env, data)
