"""A process whose lease was taken over writes nothing more for the item: a container's
prepare (its `preparing` phase, its children) and a failure's vector removal are
checked against the lease inside their own transaction (core/runtime/preparing.py,
core/runtime/failing.py, claims.py). Two runtimes on one real PostgreSQL schema
(pgserver), real chunk stores, a real HTTP embedding server; A is held at a chosen
point by a gate, its lease expires on the injected clock (no sleeping through a TTL)
and B takes the item over and finishes it before A goes on."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("psycopg")

import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402

from ktui.core.data.validation import ValidItem  # noqa: E402
from ktui.core.models import DirectoryItemData, ItemStatus, ItemType  # noqa: E402
from ktui.core.runtime.invariants import check_invariants  # noqa: E402
from ktui.core.store.postgres import PgStoreManager  # noqa: E402
from tests.support.embedding_server import embedding_server_fixture  # noqa: E402
from tests.support.pg_runtimes import TTL, FakeClock, Runtime, make_notes, runtime_on, statuses, until  # noqa: E402
from tests.support.services import FAKE_MODEL  # noqa: E402

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


async def make_folder(r: Runtime, url: str, schema: str, folder: Path, files: int) -> tuple[str, str]:
    """A base with its chunk table and one folder item of `files` notes on disk."""
    folder.mkdir()
    for k in range(files):
        (folder / f"note-{k}.md").write_text(f"# Note {k}\n\nA file about lease guards, number {k}.\n")
    base = await r.state.create_base(name="folders", embedding_model_id=FAKE_MODEL, dimensions=DIMS)
    PgStoreManager(url, schema=schema).create(base.id, DIMS)
    [root] = await r.state.create_roots(
        base.id, [ValidItem(ItemType.DIRECTORY, DirectoryItemData(path=str(folder), source=str(folder)))])
    return base.id, root.id


@pytest.mark.parametrize("where", ["preparing", "children"])
async def test_a_late_prepare_writes_neither_phase_nor_children(where, postgres_server, pg_schema, tmp_path, server):
    """A prepares a folder and stalls before its `preparing` write (``preparing``) or
    before it creates the children it walked (``children``); its lease expires and B
    takes the folder over, prepares and indexes it to `completed`. When A goes on, its
    write is refused in its own transaction: no `preparing` over B's completed folder,
    no second set of children; A's task ends quietly (neither done nor failed)."""
    url, clock = postgres_server.url, FakeClock()
    async with runtime_on(url, pg_schema, tmp_path / "a", server.url, "a", clock) as a, \
            runtime_on(url, pg_schema, tmp_path / "b", server.url, "b", clock) as b:
        base_id, folder_id = await make_folder(a, url, pg_schema, tmp_path / "docs", 3)
        first, second, preparer = Gate(), Gate(), a.runtime.preparer
        if where == "preparing":  # held before its `preparing` write, and (if it lands) right after it
            preparer._steps = first.wrap(preparer._steps)  # type: ignore[method-assign]
            preparer._prepare_directory = second.wrap(preparer._prepare_directory)  # type: ignore[method-assign]
        else:  # held once it has walked the folder, before it creates the children
            preparer._create_children = second.wrap(preparer._create_children)  # type: ignore[method-assign]
        held = first if where == "preparing" else second
        try:
            a.runtime.enqueue_items([await a.runtime.items.get(folder_id)])
            await asyncio.wait_for(held.reached.wait(), 120)

            clock.now += TTL + 1  # A has not renewed: its lease expires
            assert await b.runtime.recover() == [folder_id]
            await b.runtime.wait_idle()
            children = await b.runtime.items.descendants([folder_id])
            assert len(children) == 3
            done = await b.runtime.items.get(folder_id)
            assert (done.status, done.phase) == (ItemStatus.COMPLETED, None)
            store = PgStoreManager(url, schema=pg_schema).get(base_id, DIMS)
            chunks = {c.id for c in store.list_chunks([c.id for c in children])}

            if where == "preparing":
                first.opened.set()
                await until(lambda: second.reached.is_set() or a.runtime.queue.running_count == 0,
                            "A's `preparing` write")
                now = await b.runtime.items.get(folder_id)
                assert (now.status, now.phase) == (ItemStatus.COMPLETED, None)  # not `preparing` again
            second.opened.set()
            await until(lambda: a.runtime.queue.running_count == 0 and a.runtime.queue.pending_count == 0,
                        "A ending its prepare")
            await a.runtime.wait_idle()
            after = await a.runtime.items.get(folder_id)
            assert (after.status, after.phase, after.error) == (ItemStatus.COMPLETED, None, None)
            assert {c.id for c in await a.runtime.items.descendants([folder_id])} == {c.id for c in children}
            assert a.runtime.queue.done == 0 and a.runtime.queue.failed == 0
            assert {c.id for c in store.list_chunks([c.id for c in children])} == chunks and store.count() == len(chunks)
            assert lease_rows(url, pg_schema) == []
            await no_problems(a, b)
        finally:  # a failed assertion must not leave A held (its close would wait for it)
            first.opened.set()
            second.opened.set()


async def test_a_refresh_under_the_claim_removes_a_gone_files_row_and_chunks_together(
    postgres_server, pg_schema, tmp_path, server
):
    """The guarded refresh on the ordinary path: a file deleted from a prepared folder
    loses its row and its chunks in one transaction (under the folder's claim), a new
    one is created and indexed; nothing is left behind and no lease stays."""
    url, clock = postgres_server.url, FakeClock()
    async with runtime_on(url, pg_schema, tmp_path / "a", server.url, "a", clock) as a:
        base_id, folder_id = await make_folder(a, url, pg_schema, tmp_path / "docs", 3)
        a.runtime.enqueue_items([await a.runtime.items.get(folder_id)])
        await a.runtime.wait_idle()
        store = PgStoreManager(url, schema=pg_schema).get(base_id, DIMS)
        by_path = {c.data.path: c.id for c in await a.runtime.items.descendants([folder_id])}  # type: ignore[union-attr]
        gone = by_path[str(tmp_path / "docs" / "note-0.md")]
        assert store.list_chunks([gone])

        (tmp_path / "docs" / "note-0.md").unlink()
        (tmp_path / "docs" / "note-9.md").write_text("# Note 9\n\nA new file about refreshes.\n")
        a.runtime.request_refresh(base_id, folder_id)
        await until(lambda: not a.runtime.preparer._refreshing, "the refresh queued")
        await a.runtime.wait_idle()
        files = {c.data.path: c for c in await a.runtime.items.descendants([folder_id])}  # type: ignore[union-attr]
        assert sorted(p.rsplit("/", 1)[1] for p in files) == ["note-1.md", "note-2.md", "note-9.md"]
        assert {c.status for c in files.values()} == {ItemStatus.COMPLETED}
        assert store.list_chunks([gone]) == [] and store.item_ids() == {c.id for c in files.values()}
        assert (await a.runtime.items.get(folder_id)).status == ItemStatus.COMPLETED
        assert lease_rows(url, pg_schema) == []
        await no_problems(a)
