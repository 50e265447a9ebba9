"""A process whose lease was taken over writes nothing more for the item: a failure's
vector removal is checked against the lease inside its own transaction
(core/runtime/failing.py, claims.py). Two runtimes on one real PostgreSQL schema
(pgserver), real chunk stores, a real HTTP embedding server; A is held at a chosen
point by a gate, its lease expires on the injected clock (no sleeping through a TTL)
and B takes the item over and finishes it before A goes on."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

pytest.importorskip("psycopg")

import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402

from ktui.core.models import ItemStatus  # noqa: E402
from ktui.core.runtime.invariants import check_invariants  # noqa: E402
from ktui.core.store.postgres import PgStoreManager  # noqa: E402
from tests.support.embedding_server import embedding_server_fixture  # noqa: E402
from tests.support.pg_runtimes import TTL, FakeClock, Runtime, make_notes, runtime_on, statuses  # noqa: E402

server = embedding_server_fixture(64)
DIMS = 64


def lease_rows(url: str, schema: str) -> list[Any]:
    with psycopg.connect(url, autocommit=True) as con:
        con.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        return con.execute("SELECT * FROM item_lease").fetchall()


async def no_problems(*runtimes: Runtime) -> None:
    for r in runtimes:
        assert await check_invariants(r.runtime.bases, r.runtime.items, r.runtime) == []


class Gate:
    """Holds A at one call until the test opens it: `reached` tells it is there."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()
        self.opened = asyncio.Event()

    def wrap(self, fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def held(*args: Any, **kwargs: Any) -> Any:
            if not self.opened.is_set():
                self.reached.set()
                await self.opened.wait()
            return await fn(*args, **kwargs)

        return held


@pytest.mark.parametrize("how", ["fail", "fail_many"])
async def test_a_late_failure_removes_none_of_the_new_holders_vectors(
    how, postgres_server, pg_schema, tmp_path, server
):
    """A holds a note and fails it, but stalls before the failure's vector removal; its
    lease expires and B takes the note over and completes it with its chunks. When A
    goes on, its failure is refused in the transaction that would have removed the
    vectors: the note stays completed with B's chunks, and no lease is left."""
    url, clock = postgres_server.url, FakeClock()
    async with runtime_on(url, pg_schema, tmp_path / "a", server.url, "a", clock) as a, \
            runtime_on(url, pg_schema, tmp_path / "b", server.url, "b", clock) as b:
        base_id, [note] = await make_notes(a, url, pg_schema, 1, dims=DIMS)
        assert await a.claims.claim([note]) == [note]  # A's task for it has started
        item, base = await a.runtime.items.get_with_base(note)
        gate = Gate()
        a.runtime.store = gate.wrap(a.runtime.store)  # type: ignore[method-assign]
        failing = asyncio.create_task(
            a.runtime.fail(base, item, "the provider said no") if how == "fail"
            else a.runtime.batches.fail_many(base, [item], "the provider said no"))
        await asyncio.wait_for(gate.reached.wait(), 120)

        clock.now += TTL + 1  # A has not renewed: its lease expires
        assert await b.runtime.recover() == [note]
        await b.runtime.wait_idle()
        store = PgStoreManager(url, schema=pg_schema).get(base_id, DIMS)
        by_b = {c.id for c in store.list_chunks([note])}
        assert by_b and await statuses(b, [note]) == {note: ItemStatus.COMPLETED}

        gate.opened.set()
        await asyncio.wait_for(failing, 120)
        after = await b.runtime.items.get(note)
        assert (after.status, after.error) == (ItemStatus.COMPLETED, None)
        assert {c.id for c in store.list_chunks([note])} == by_b  # B's vectors untouched
        assert lease_rows(url, pg_schema) == []
        await no_problems(a, b)
