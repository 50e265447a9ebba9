"""Other processes' catalogue writes, turned into this process's events.

On a shared PostgreSQL store every write notifies (core/store/postgres/notify.py); the
listener hands this module batches of payloads (kinds and ids) on the event loop.
`RemoteEvents` turns a batch into the events the local state writer would have
published for the same writes, and publishes them on the process's EventBus:

* items added (``ia``)   -> ``ItemsAdded`` per (base, parent), runs merged;
* an item changed (``ic``) -> ``ItemChanged`` with the row's state, re-read by id: one
  query per batch for all the batch's changed items (a row gone meanwhile is skipped);
* items removed (``ir``) -> ``ItemsRemoved`` per base, runs merged;
* a base changed / removed (``bc`` / ``br``) -> ``BaseChanged`` / ``BaseRemoved`` (the
  item events of a base removed in the same batch are dropped: its rows cascaded);
* an item's claim taken by a reset there (``ls``): no event; like every batch it goes
  to ``on_payloads`` first (the runtime's RemoteInterrupts: its task here stops);
* a running item's progress (``ip``, not written: the writer's `ProgressRelay`) ->
  ``ItemChanged`` with the fraction, dropped when the item's latest re-read state is
  terminal or it was removed (progress travels apart from the writes, so it may arrive
  after the item completed).

A receiver never rescans a base per event; what it shows it re-reads by id (or, after a
``Resync``, once). Batches are applied one after another by one task, in arrival order.

**Nobody subscribed** (a `ktui serve` with no event stream open, an indexer nobody
watches): a batch is handed to ``on_payloads`` and goes no further, without its re-read.
That read ran on the catalogue's one connection, between this process's own status
writes: with two indexing processes each re-read the other's every phase change (~1.6
reads a note, tests/benchmarks/test_bench_postgres_serve_indexers.py) for events nobody
received. The items whose change was skipped are remembered (``_unread``, bounded): a
progress payload of one of them, once someone subscribed, is re-read first, so a late
progress never shows an item that finished unseen as still running.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ktui.core.models import (
    BaseChanged,
    BaseRemoved,
    Event,
    ItemChanged,
    ItemPhase,
    ItemsAdded,
    ItemsRemoved,
    ItemStatus,
    Resync,
)
from ktui.core.runtime.events import EventBus

log = logging.getLogger(__name__)

Payload = dict[str, Any]
READ_CHUNK = 500  # ids per re-read statement
TERMINAL_KEPT = 100_000  # items remembered as finished (late progress of theirs is dropped)


class Reader(Protocol):
    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...


class RemoteEvents:
    """See the module docstring. `feed` and `resync` are called on the event loop."""

    def __init__(self, db: Reader, bus: EventBus,
                 on_payloads: Callable[[list[Payload]], None] | None = None) -> None:
        self._db = db
        self._bus = bus
        self._on_payloads = on_payloads  # the runtime's RemoteInterrupts.feed: stops tasks of reset items
        self._queue: asyncio.Queue[list[Payload] | Resync] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._finished: OrderedDict[str, None] = OrderedDict()  # terminal or removed, most recent last
        self._unread: OrderedDict[str, None] = OrderedDict()  # changed while nobody subscribed: state unknown
        self.applied = 0  # payloads applied so far (tests wait on it)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="ktui-remote-events")

    def feed(self, batch: list[Payload]) -> None:
        self._queue.put_nowait(batch)

    def resync(self, reason: str = "the shared store's event connection was lost and is back") -> None:
        self._queue.put_nowait(Resync(reason))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def _run(self) -> None:
        while True:
            first = await self._queue.get()
            pending: list[list[Payload] | Resync] = [first]
            while not self._queue.empty():
                pending.append(self._queue.get_nowait())
            payloads: list[Payload] = []
            for entry in pending:
                if isinstance(entry, Resync):
                    if payloads:
                        await self._apply(payloads)
                        payloads = []
                    self._bus.publish(entry)
                else:
                    payloads.extend(entry)
            if payloads and self._on_payloads is not None:
                try:
                    self._on_payloads(payloads)  # before the re-reads: a reset item's task stops at once
                except Exception:
                    log.exception("could not interrupt work another process reset")
            if payloads:
                try:
                    await self._apply(payloads)
                except Exception:  # a failed re-read must not end the task: the next batch may work
                    log.exception("could not apply another process's catalogue events")
                    self._bus.publish(Resync("re-reading another process's changes failed"))

    async def _apply(self, payloads: list[Payload]) -> None:
        if not self._bus.has_subscribers:
            self._skip(payloads)
            self.applied += len(payloads)
            return
        if self._unread:
            payloads = self._with_rereads(payloads)
        events = translate(payloads)
        changed = [e.item_id for e in events if isinstance(e, _Changed)]
        rows = await self._reread(changed) if changed else {}
        for item_id, row in rows.items():
            self._finish(item_id, row.status != ItemStatus.PROCESSING)
        for event in events:
            if isinstance(event, ItemsRemoved):
                for item_id in event.item_ids:
                    self._finish(item_id, True)
        out: list[Event] = []
        for event in events:
            if isinstance(event, _Changed):
                fresh = rows.get(event.item_id)
                if fresh is not None:
                    out.append(fresh)
            elif isinstance(event, ItemChanged) and event.item_id in self._finished:
                continue  # progress that arrived after the item finished
            else:
                out.append(event)
        self._bus.publish_all(out)
        self.applied += len(payloads)

    def _skip(self, payloads: list[Payload]) -> None:
        """Nobody reads the events of this batch: keep only what a later one needs (which
        items changed unseen, which were removed)."""
        for p in payloads:
            kind, item_id = p.get("k"), p.get("i")
            if not isinstance(item_id, str):
                continue
            if kind == "ic":
                self._unread[item_id] = None
                self._unread.move_to_end(item_id)
                if len(self._unread) > TERMINAL_KEPT:
                    self._unread.popitem(last=False)
            elif kind == "ir":
                self._unread.pop(item_id, None)
                self._finish(item_id, True)

    def _with_rereads(self, payloads: list[Payload]) -> list[Payload]:
        """The batch with a re-read (an ``ic``) before the first progress of each item
        whose changes went unseen, so a finished one's late progress is dropped."""
        out: list[Payload] = []
        for p in payloads:
            item_id = p.get("i")
            if isinstance(item_id, str) and item_id in self._unread and p.get("k") in ("ic", "ip", "ir"):
                del self._unread[item_id]
                if p.get("k") == "ip":
                    out.append({"k": "ic", "b": p["b"], "i": item_id})
            out.append(p)
        return out

    def _finish(self, item_id: str, finished: bool) -> None:
        if not finished:
            self._finished.pop(item_id, None)
            return
        self._finished[item_id] = None
        self._finished.move_to_end(item_id)
        if len(self._finished) > TERMINAL_KEPT:
            self._finished.popitem(last=False)

    async def _reread(self, item_ids: list[str]) -> dict[str, ItemChanged]:
        unique = list(dict.fromkeys(item_ids))
        found: dict[str, ItemChanged] = {}
        for start in range(0, len(unique), READ_CHUNK):
            part = unique[start:start + READ_CHUNK]
            marks = ", ".join("?" * len(part))
            for row in await self._db.fetchall(
                f"SELECT id, base_id, status, phase, error FROM knowledge_item WHERE id IN ({marks})", part
            ):
                found[row[0]] = ItemChanged(
                    row[1], row[0], ItemStatus(row[2]), ItemPhase(row[3]) if row[3] else None, row[4]
                )
        return found


class _Changed:
    """An ItemChanged still to be re-read (its place in the batch kept)."""

    __slots__ = ("item_id",)

    def __init__(self, item_id: str) -> None:
        self.item_id = item_id


def translate(payloads: list[Payload]) -> list[Event | _Changed]:
    """The events of a batch of payloads, in order; ItemChanged left as placeholders."""
    removed_bases = {p["b"] for p in payloads if p.get("k") == "br"}
    out: list[Event | _Changed | tuple[str, str, str | None, list[str]] | None] = []
    changed_at: dict[str, int] = {}
    seen_bases: set[str] = set()
    for p in payloads:
        kind, base_id, item_id = p.get("k"), p["b"], p.get("i")
        if kind == "br":
            out.append(BaseRemoved(base_id))
            continue
        if base_id in removed_bases:
            continue
        if kind == "bc":
            if base_id not in seen_bases:
                seen_bases.add(base_id)
                out.append(BaseChanged(base_id))
        elif not isinstance(item_id, str):
            continue
        elif kind in ("ia", "ir"):
            parent = p.get("g") if kind == "ia" else None
            last = out[-1] if out else None
            if isinstance(last, tuple) and last[:3] == (kind, base_id, parent):
                last[3].append(item_id)  # a run of the same kind, base and parent: one event
            else:
                out.append((kind, base_id, parent, [item_id]))
        elif kind == "ic":
            # re-read once, in the place of its last change: the row's latest state covers
            # every change, and comes after any progress of the item sent before it
            if item_id in changed_at:
                out[changed_at[item_id]] = None
            changed_at[item_id] = len(out)
            out.append(_Changed(item_id))
        elif kind == "ip":
            out.append(_progress(base_id, item_id, p))
    return [
        (ItemsAdded(e[1], tuple(e[3]), e[2]) if e[0] == "ia" else ItemsRemoved(e[1], tuple(e[3])))
        if isinstance(e, tuple) else e
        for e in out if e is not None
    ]


def progress_payload(event: ItemChanged) -> Payload:
    """The ``ip`` payload of a running item's progress event (what `_progress` reads back)."""
    return {"k": "ip", "b": event.base_id, "i": event.item_id, "ph": event.phase.value if event.phase else None,
            "p": event.progress, "op": list(event.ocr_pages) if event.ocr_pages else None}


def _progress(base_id: str, item_id: str, p: Payload) -> ItemChanged:
    phase, fraction, pages = p.get("ph"), p.get("p"), p.get("op")
    return ItemChanged(
        base_id, item_id, ItemStatus.PROCESSING,
        ItemPhase(phase) if phase in {ph.value for ph in ItemPhase} else None,
        None,
        float(fraction) if isinstance(fraction, (int, float)) and not isinstance(fraction, bool) else None,
        (int(pages[0]), int(pages[1])) if isinstance(pages, list) and len(pages) == 2 else None,
    )
