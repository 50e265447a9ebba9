"""The facade on a shared PostgreSQL store (`[store] url`): two services on one schema — two
"machines" with data directories of their own — see each other's bases, items, chunks and
events (NOTIFY from the catalogue's triggers), and an event listener that lost its connection
recovers with a Resync. Real PostgreSQL (tests/support/postgres.py), real embedding server."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from psycopg import sql

from ktui.core.config import StoreSettings
from ktui.core.models import BaseChanged, BaseRemoved, ItemChanged, ItemInput, ItemsAdded, ItemStatus, Resync
from ktui.core.service import KnowledgeService
from ktui.core.store.postgres.leases import LeaseOwner, Leases
from ktui.core.store.postgres.notify import channel_for
from tests.support.embedding_server import embedding_server_fixture
from tests.support.services import FAKE_MODEL, fake_settings

pytestmark = pytest.mark.timeout(180)

server = embedding_server_fixture(32, scope="module")


@pytest.fixture
def shared(tmp_path, server, postgres_server, pg_schema):
    def settings(machine: str):
        return fake_settings(tmp_path / machine, server.url).with_(
            store=StoreSettings(url=postgres_server.url, schema=pg_schema))
    return settings


async def events_until(sub, predicate, what):
    seen = []
    while True:
        batch = await asyncio.wait_for(sub.next_batch(), 60)
        seen += batch
        if any(predicate(e) for e in batch):
            return seen
        assert not sub.closed, f"subscription closed before {what}"


async def test_two_machines_share_bases_items_chunks_and_events(shared, tmp_path, postgres_server, pg_schema):
    one = await KnowledgeService.open(settings=shared("one"))
    two = await KnowledgeService.open(settings=shared("two"))
    try:
        assert not (tmp_path / "one" / "knowledge.db").exists()  # the catalogue is on the server
        watching = two.subscribe()
        base = await one.create_base("Shared", FAKE_MODEL, None)
        (note,) = await one.add_items(base.id, [ItemInput("note", {"content": "Sea otters hold hands while asleep."})])
        assert await one.wait_idle(timeout=60)
        seen = await events_until(
            watching, lambda e: isinstance(e, ItemChanged) and e.item_id == note.id and e.status == ItemStatus.COMPLETED,
            "the other machine's item completed")
        assert BaseChanged(base.id) in seen
        assert any(isinstance(e, ItemsAdded) and note.id in e.item_ids and e.base_id == base.id for e in seen)
        # the other machine reads it all: catalogue, chunks, search
        assert [b.name for b in (await two.list_bases()).items] == ["Shared"]
        assert (await two.get_item(note.id)).status == ItemStatus.COMPLETED
        assert [c.item_id for c in await two.list_item_chunks(base.id, note.id)] == [note.id]
        hits = (await two.search(base.id, "sea otters")).results
        assert hits and hits[0].item_id == note.id
        # and writes too: every process is a writer
        heard_by_one = one.subscribe()
        await two.delete_base(base.id)
        await events_until(heard_by_one, lambda e: e == BaseRemoved(base.id), "the base removed elsewhere")
        assert (await one.list_bases()).total == 0
        # a process never hears its own writes twice: once a marker sent after its write has
        # come through its listener, its own notification has been skipped
        other = await one.create_base("Mine", FAKE_MODEL, None)
        mine = one.subscribe()
        (n,) = await one.add_items(other.id, [ItemInput("note", {"content": "Badgers dig setts."})])
        with psycopg.connect(postgres_server.url, autocommit=True) as con:
            con.execute("SELECT pg_notify(%s, %s)", (channel_for(pg_schema), '{"k": "bc", "b": "marker"}'))
        seen = await events_until(mine, lambda e: e == BaseChanged("marker"), "the marker")
        assert [e for e in seen if isinstance(e, ItemsAdded)] == [ItemsAdded(other.id, (n.id,), None)]  # never coalesced
        assert await one.wait_idle(timeout=60)
    finally:
        await two.close()
        await one.close()


async def test_a_listener_that_lost_its_connection_recovers_with_a_resync(shared, postgres_server):
    one = await KnowledgeService.open(settings=shared("one"))
    two = await KnowledgeService.open(settings=shared("two"))
    try:
        sub = two.subscribe()
        pid = two._listener.backend_pid()
        with psycopg.connect(postgres_server.url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        await events_until(sub, lambda e: isinstance(e, Resync), "the resync")
        base = await one.create_base("After", FAKE_MODEL, None)
        await events_until(sub, lambda e: e == BaseChanged(base.id), "an event after the reconnection")
    finally:
        await two.close()
        await one.close()


async def test_the_doctor_never_takes_another_processs_work_for_stuck_work(shared, postgres_server, pg_schema):
    one = await KnowledgeService.open(settings=shared("one"))
    try:
        base = await one.create_base("Busy", FAKE_MODEL, None)
        (note,) = await one.add_items(base.id, [ItemInput("note", {"content": "Work in progress elsewhere."})])
        assert await one.wait_idle(timeout=60)
        # as another live machine reading it now leaves it: `processing` under that machine's
        # lease (a day's: it cannot expire during the test). Unleased, it would be crash
        # leftovers, which this process's own idle sweep rightly takes within a second.
        with psycopg.connect(postgres_server.url, autocommit=True) as con:
            con.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(pg_schema)))
            con.execute("UPDATE knowledge_item SET status = %s, phase = %s WHERE id = %s",
                        ("processing", "reading", note.id))
            assert Leases(LeaseOwner("another-machine:1:0"), ttl=86_400).claim(con, [note.id]) == [note.id]
        report = await one.doctor(repair=True)
        assert not [f for f in report.findings if note.id in f.subject], report.findings
        assert one.queue_stats().pending == 0 and (await one.get_item(note.id)).status == ItemStatus.PROCESSING
        assert any("postgresql://" in c and "schema" in c for c in report.checked)
    finally:
        await one.close()


async def test_export_from_sqlite_imports_into_postgresql_and_back(shared, tmp_path, server):
    folder = tmp_path / "folder"
    (folder / "sub").mkdir(parents=True)
    (folder / "otters.md").write_text("# Otters\n\nSea otters hold hands while asleep.\n", encoding="utf-8")
    (folder / "sub" / "badgers.md").write_text("# Badgers\n\nBadgers dig setts.\n", encoding="utf-8")
    local = await KnowledgeService.open(settings=fake_settings(tmp_path / "local", server.url))
    pg = await KnowledgeService.open(settings=shared("pg"))
    try:
        base = await local.create_base("Moved", FAKE_MODEL, None, search_mode="bm25", chunk_size=256, chunk_overlap=20)
        await local.add_items(base.id, [ItemInput("directory", {"path": str(folder)}),
                                        ItemInput("note", {"content": "Beavers build dams."})])
        assert await local.wait_idle(timeout=60)
        report = await pg.import_bases(await local.export_bases([base.id]))
        (moved,) = (await pg.list_bases()).items
        assert report is not None and (moved.name, moved.search_mode.value, moved.chunk_size) == ("Moved", "bm25", 256)
        assert await pg.wait_idle(timeout=60)
        assert (await pg.search(moved.id, "sea otters")).results[0].metadata["source"].endswith("otters.md")
        assert (await pg.item_counts())[moved.id] == 5  # folder, sub-folder, two files, the note
        back = await local.import_bases(await pg.export_bases([moved.id]), again=True)
        assert back is not None and (await local.list_bases()).total == 2
        assert await local.wait_idle(timeout=60)
    finally:
        await pg.close()
        await local.close()


async def test_progress_crosses_processes_but_never_after_the_item_finished(shared):
    from dataclasses import replace

    from ktui.core.models import ItemPhase

    one = await KnowledgeService.open(settings=shared("one"))
    two = await KnowledgeService.open(settings=shared("two"))
    try:
        sub = two.subscribe()
        base = await one.create_base("Progress", FAKE_MODEL, None)
        (note,) = await one.add_items(base.id, [ItemInput("note", {"content": "Otters."})])
        assert await one.wait_idle(timeout=60)
        await events_until(sub, lambda e: isinstance(e, ItemChanged) and e.item_id == note.id
                           and e.status == ItemStatus.COMPLETED, "the item completed elsewhere")
        running = replace(note, id="still-running")  # progress is never written: any item will do
        one._state.progress(note, ItemPhase.EMBEDDING, 0.25)  # late: two knows it completed
        one._state.progress(running, ItemPhase.EMBEDDING, 0.5, (1, 4))
        seen = await events_until(sub, lambda e: isinstance(e, ItemChanged) and e.item_id == "still-running",
                                  "the running item's progress")
        assert ItemChanged(base.id, "still-running", ItemStatus.PROCESSING, ItemPhase.EMBEDDING, None, 0.5, (1, 4)) in seen
        assert not [e for e in seen if isinstance(e, ItemChanged) and e.item_id == note.id and e.progress is not None]
    finally:
        await two.close()
        await one.close()


async def test_items_that_are_not_a_list_are_a_validation_error_on_a_shared_store(shared):
    """The shared store's refusal of watched folders looked into the items before their
    validation did: add_items(base, None) was a TypeError (found by the facade fuzz)."""
    from ktui.core.errors import ValidationError

    ks = await KnowledgeService.open(settings=shared("one"))
    try:
        base = await ks.create_base("Fuzzed", dimensions=32)
        for items in (None, 5, 2.5):
            with pytest.raises(ValidationError):
                await ks.add_items(base.id, items)  # type: ignore[arg-type]
        assert (await ks.list_items(base.id)).total == 0
    finally:
        await ks.close()
