"""RemoteEvents (core/runtime/remote.py): another process's catalogue writes become this
process's events — runs merged, changed items re-read by id (one query per batch), the item
events of a base removed in the same batch dropped, a resync passed on. Rows live in a real
catalogue; the payloads are those the PostgreSQL triggers send (tests/integration/test_pg_notify_triggers.py
checks the triggers themselves)."""

from __future__ import annotations

import asyncio

from ktui.core.data.base_writes import BaseWrites
from ktui.core.data.item_writes import ItemWrites
from ktui.core.data.validation import ValidItem
from ktui.core.models import (
    BaseChanged,
    BaseRemoved,
    ItemChanged,
    ItemPhase,
    ItemsAdded,
    ItemsRemoved,
    ItemStatus,
    ItemType,
    NoteItemData,
    Resync,
)
from ktui.core.runtime.events import EventBus
from ktui.core.runtime.remote import RemoteEvents, translate


class CountingReader:
    """The real catalogue, counting the statements the receiver issues."""

    def __init__(self, db):
        self.db = db
        self.statements = 0

    async def fetchall(self, sql, params=()):
        self.statements += 1
        return await self.db.fetchall(sql, params)


async def until(sub, n):
    events = []
    while len(events) < n:
        events += await asyncio.wait_for(sub.next_batch(), 30)
    return events


async def test_a_batch_becomes_the_events_of_those_writes_with_state_re_read_once(db):
    base = await BaseWrites(db).create(name="B", embedding_model_id="builtin::wordllama", dimensions=8)
    items = ItemWrites(db)
    notes = await items.create_roots(base.id, [ValidItem(ItemType.NOTE, NoteItemData(f"n{i}", "note")) for i in range(3)])
    await items.set_status(notes[0].id, ItemStatus.PROCESSING, ItemPhase.EMBEDDING)
    await items.set_status(notes[1].id, ItemStatus.FAILED, None, "boom")
    bus = EventBus()
    sub = bus.subscribe()
    reader = CountingReader(db)
    remote = RemoteEvents(reader, bus)
    remote.start()
    try:
        a, b, c = (n.id for n in notes)
        remote.feed([{"k": "ia", "b": base.id, "i": a, "g": None}, {"k": "ia", "b": base.id, "i": b, "g": None}])
        remote.feed([
            {"k": "ic", "b": base.id, "i": a}, {"k": "ic", "b": base.id, "i": b}, {"k": "ic", "b": base.id, "i": a},
            {"k": "ic", "b": base.id, "i": "gone-meanwhile"},
            {"k": "ir", "b": base.id, "i": "x1"}, {"k": "ir", "b": base.id, "i": "x2"},
            {"k": "bc", "b": base.id}, {"k": "bc", "b": base.id},
        ])
        events = await until(sub, 5)
        assert events == [
            ItemsAdded(base.id, (a, b), None),
            ItemChanged(base.id, b, ItemStatus.FAILED, None, "boom"),
            ItemChanged(base.id, a, ItemStatus.PROCESSING, ItemPhase.EMBEDDING, None),  # in its last change's place
            ItemsRemoved(base.id, ("x1", "x2")),
            BaseChanged(base.id),
        ]
        assert reader.statements <= 2  # one re-read per batch, however many items changed
        remote.resync()
        assert await until(sub, 1) == [Resync("the shared store's event connection was lost and is back")]
        assert c
    finally:
        await remote.close()


def test_a_removed_base_takes_its_item_events_with_it():
    out = translate([
        {"k": "ic", "b": "gone", "i": "a"}, {"k": "ir", "b": "gone", "i": "a"}, {"k": "ia", "b": "kept", "i": "k", "g": "p"},
        {"k": "br", "b": "gone"}, {"k": "nonsense", "b": "kept"}, {"k": "ia", "b": "kept"},
    ])
    assert out == [ItemsAdded("kept", ("k",), "p"), BaseRemoved("gone")]


def test_a_hundred_thousand_additions_under_one_parent_are_one_event():
    out = translate([{"k": "ia", "b": "b", "i": f"i{n}", "g": "p"} for n in range(100_000)])
    assert len(out) == 1 and len(out[0].item_ids) == 100_000


def test_an_items_re_read_takes_the_place_of_its_last_change_after_its_progress():
    from ktui.core.runtime.remote import _Changed

    out = translate([{"k": "ic", "b": "b", "i": "a"}, {"k": "ip", "b": "b", "i": "a", "ph": "embedding", "p": 0.5},
                     {"k": "ic", "b": "b", "i": "a"}])
    assert isinstance(out[0], ItemChanged) and out[0].progress == 0.5 and out[0].phase == ItemPhase.EMBEDDING
    assert isinstance(out[1], _Changed) and len(out) == 2


async def test_with_nobody_subscribed_a_batch_is_not_re_read_and_a_late_progress_is_checked_first(db):
    """Nobody subscribed: the other process's changes cost no read (they were re-read on the
    catalogue's one connection between this process's own writes, for events nobody got).
    `on_payloads` still sees every batch. Once someone subscribes, the first progress of an
    item whose changes went unseen is re-read first: one that finished meanwhile shows its
    final state and its late progress is dropped; one still running shows both."""
    base = await BaseWrites(db).create(name="B", embedding_model_id="builtin::wordllama", dimensions=8)
    items = ItemWrites(db)
    done, running = await items.create_roots(
        base.id, [ValidItem(ItemType.NOTE, NoteItemData(f"n{i}", "note")) for i in range(2)])
    await items.set_status(done.id, ItemStatus.COMPLETED)
    await items.set_status(running.id, ItemStatus.PROCESSING, ItemPhase.EMBEDDING)
    bus = EventBus()
    reader = CountingReader(db)
    heard: list[dict] = []
    remote = RemoteEvents(reader, bus, on_payloads=heard.extend)
    remote.start()
    try:
        unseen = [{"k": "ic", "b": base.id, "i": done.id}, {"k": "ic", "b": base.id, "i": running.id},
                  {"k": "ia", "b": base.id, "i": "new", "g": None}]
        remote.feed(unseen)
        deadline = asyncio.get_running_loop().time() + 30  # a hang guard only
        while remote.applied < 3:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.01)
        assert reader.statements == 0 and heard == unseen
        sub = bus.subscribe()
        late = {"k": "ip", "b": base.id, "i": done.id, "ph": "embedding", "p": 0.9}
        live = {"k": "ip", "b": base.id, "i": running.id, "ph": "embedding", "p": 0.5}
        remote.feed([late, live])
        events = await until(sub, 2)  # a subscription keeps an item's latest change only
        assert events == [
            ItemChanged(base.id, done.id, ItemStatus.COMPLETED, None, None),  # its late progress dropped
            ItemChanged(base.id, running.id, ItemStatus.PROCESSING, ItemPhase.EMBEDDING, None, 0.5),
        ]
        assert reader.statements == 1  # both re-read in one statement, once
        remote.feed([dict(live, p=0.6)])
        assert await until(sub, 1) == [ItemChanged(base.id, running.id, ItemStatus.PROCESSING, ItemPhase.EMBEDDING,
                                                   None, 0.6)]
        assert reader.statements == 1  # known again: no more re-reads
    finally:
        await remote.close()
