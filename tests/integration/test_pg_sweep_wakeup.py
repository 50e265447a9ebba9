"""An idle process joins in on work another one adds at once, not at its next idle sweep
(core/runtime/heartbeat.py, ``Heartbeat.work_offered``; docs/postgres.md "Through the
runtime"). The adder's ``ia`` notifications reach the idle process over LISTEN/NOTIFY
(remote.py) and wake its heartbeat. Real PostgreSQL, two facades ("machines") on one
schema; both heartbeats' timers are an hour long and the leases run on a fake clock that
never moves, so nothing but the announcement can make the second machine sweep."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("psycopg")

from ktui.core.config import StoreSettings  # noqa: E402
from ktui.core.models import ItemInput, ItemStatus  # noqa: E402
from ktui.core.service import KnowledgeService  # noqa: E402
from ktui.core.store.postgres import work_claims  # noqa: E402
from ktui.core.store.postgres.leases import LeaseOwner, Leases  # noqa: E402
from tests.support.embedding_server import embedding_server_fixture  # noqa: E402
from tests.support.pg_runtimes import FakeClock  # noqa: E402
from tests.support.services import FAKE_MODEL, fake_settings  # noqa: E402

server = embedding_server_fixture(64)

HOUR = 3600.0  # every heartbeat timer: longer than any test runs


async def open_machine(url: str, schema: str, data_dir, server_url: str, name: str, clock: FakeClock,
                       *, recover: bool = True) -> KnowledgeService:
    settings = fake_settings(data_dir, server_url, concurrency=2).with_(store=StoreSettings(url=url, schema=schema))
    # a lease TTL of three hours: renewals (every TTL / 3) wait an hour too
    return await KnowledgeService.open(settings=settings, recover=recover,
                                       leases=Leases(LeaseOwner(name), ttl=3 * HOUR, clock=clock))


async def until(condition, what: str) -> None:
    """A hang guard (it fails the test after a minute), never a timing assertion."""
    deadline = asyncio.get_running_loop().time() + 60
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"gave up waiting: {what}"
        await asyncio.sleep(0.02)


async def test_an_idle_machine_sweeps_as_soon_as_another_one_adds_items(
    postgres_server, pg_schema, tmp_path, server, monkeypatch
):
    """Machine one adds 20 notes and is held on the two it starts; machine two, idle and
    with no timer due for an hour, hears the addition, sweeps its share at once, and then
    handful after handful as its tasks end, until it has done the 18 one had not started.
    Before the wake-up it sat out its idle timer (one second by default; an hour here)."""
    monkeypatch.setattr(work_claims, "IDLE_SWEEP_EVERY", HOUR)
    url, clock = postgres_server.url, FakeClock()
    one = await open_machine(url, pg_schema, tmp_path / "one", server.url, "one", clock)
    two = await open_machine(url, pg_schema, tmp_path / "two", server.url, "two", clock)
    gate = asyncio.Event()
    try:
        await two.wait_idle(timeout=60)  # its first recovery pass is over: nothing to do
        assert two._runtime.claims.idle_sweep_every == HOUR and two._runtime.claims.heartbeat_every == HOUR
        sweeps_before = two._runtime.heartbeat.sweeps
        base = await one.create_base("Shared", FAKE_MODEL, None)
        commit = one._runtime.indexer._commit_chunks

        async def held(b, batch):
            await gate.wait()
            return await commit(b, batch)

        one._runtime.indexer._commit_chunks = held
        before = server.texts_embedded
        notes = await one.add_items(base.id, [ItemInput("note", {"content": f"note {k} for two"}) for k in range(20)])
        await until(lambda: two._runtime.queue.done == 18, "machine two indexing what one had not started")
        assert two._runtime.heartbeat.sweeps > sweeps_before  # woken, not timed: every timer is an hour away
        assert one._runtime.queue.running_count == 2 and one._runtime.queue.done == 0
        gate.set()
        assert await one.wait_idle(timeout=60) and await two.wait_idle(timeout=60)
        assert {(await two.get_item(n.id)).status for n in notes} == {ItemStatus.COMPLETED}
        assert one._runtime.queue.done == 2 and two._runtime.queue.done == 18  # each note completed once
        assert server.texts_embedded - before == 20  # and embedded once
    finally:
        gate.set()  # a failed run must not leave one's tasks held through the close
        await one.close()
        await two.close()


async def test_a_process_that_does_not_sweep_ignores_the_announcement(
    postgres_server, pg_schema, tmp_path, server, monkeypatch
):
    """A one-shot command's runtime (recover=False) renews its own claims only: another
    process's additions never make it take their work."""
    monkeypatch.setattr(work_claims, "IDLE_SWEEP_EVERY", HOUR)
    url, clock = postgres_server.url, FakeClock()
    one = await open_machine(url, pg_schema, tmp_path / "one", server.url, "one", clock)
    shot = await open_machine(url, pg_schema, tmp_path / "shot", server.url, "shot", clock, recover=False)
    try:
        base = await one.create_base("Shared", FAKE_MODEL, None)
        applied = shot._remote.applied
        notes = await one.add_items(base.id, [ItemInput("note", {"content": f"note {k}"}) for k in range(6)])
        assert await one.wait_idle(timeout=60)
        await until(lambda: shot._remote.applied > applied, "the one-shot process hearing the addition")
        assert shot._runtime.heartbeat is not None and shot._runtime.heartbeat.sweeps == 0
        assert shot._runtime.queue.done == 0 and one._runtime.queue.done == 6
        assert {(await one.get_item(n.id)).status for n in notes} == {ItemStatus.COMPLETED}
    finally:
        await one.close()
        await shot.close()


async def test_a_folder_a_one_shot_add_left_is_taken_at_once(postgres_server, pg_schema, tmp_path, server, monkeypatch):
    """`ktui add FOLDER` without --wait on machine two (a one-shot: it starts the folder,
    then closes, giving its claims back) while machine one runs: one takes the folder and
    indexes its files at once. Folders are swept apart, once a renewal (an hour here), so
    only the closing process's `rel` notification, or the added root's `ia`, can bring it."""
    monkeypatch.setattr(work_claims, "IDLE_SWEEP_EVERY", HOUR)
    url, clock = postgres_server.url, FakeClock()
    folder = tmp_path / "docs"
    folder.mkdir()
    for k in range(6):
        (folder / f"n{k}.md").write_text(f"# Note {k}\n\nOtters number {k} float.\n", encoding="utf-8")
    one = await open_machine(url, pg_schema, tmp_path / "one", server.url, "one", clock)
    shot = await open_machine(url, pg_schema, tmp_path / "shot", server.url, "shot", clock, recover=False)
    try:
        await one.wait_idle(timeout=60)
        base = await shot.create_base("Shared", FAKE_MODEL, None)
        (root,) = await shot.add_items(base.id, [ItemInput("directory", {"path": str(folder)})])
        await shot.close()  # the command returns at once: whatever it started is given back
        await until(lambda: one._runtime.queue.done >= 7, "machine one indexing the folder the one-shot left")
        assert await one.wait_idle(timeout=60)
        assert (await one.get_item(root.id)).status == ItemStatus.COMPLETED
        items = [i async for i in one.iter_items(base.id, group_id=root.id)]
        assert len(items) == 6 and {i.status for i in items} == {ItemStatus.COMPLETED}
    finally:
        await one.close()
        await shot.close()
