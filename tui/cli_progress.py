"""`--wait` and `ktui wait`: follow queued work to the end, with a progress bar on a terminal.

The cost per event is O(1), whatever the size of the folder: running counters
(`Tally`) change by one when an item changes, nothing is looked up per item
(only a failed item is fetched once, to name it), and the screen is redrawn at
most `REDRAW_SECONDS` apart, on an injected clock so tests need no real time.

What is followed: the items we queued, every child a container adds below them
(`ItemsAdded`), and those of the children that already existed below a followed
folder (one query at the start) that change while we wait: a refresh reads only
the changed files again, and only those count. A base deleted meanwhile (its rows go
without ItemsRemoved) takes its items out of the count. While OCR reads scans, the
line also counts their pages (`OCR 3/12 pages`). On a terminal
(stderr is a tty) one line is redrawn in place: a bar, items done / total,
chunks, the rate and an ETA. Otherwise (logs, CI, pipes) a summary line is
printed at most every `PLAIN_SECONDS`. Failures are printed as they happen,
either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ktui.core.errors import KnowledgeError
from ktui.core.models import (
    BaseRemoved,
    ItemChanged,
    ItemPhase,
    ItemsAdded,
    ItemsRemoved,
    ItemStatus,
    KnowledgeItem,
    QueueStats,
    Resync,
)
from ktui.tui.cli_bar import (
    BAR_WIDTH,
    PLAIN_SECONDS,
    REDRAW_SECONDS,
    Figures,
    Progress,
    bar_line,
    describe,
    duration,
)
from ktui.tui.cli_counters import PageCounter, RateMeter, Tally
from ktui.tui.cli_render import names_itself, own_error

SETTLE_SECONDS = 3.0  # no item may have been found for this long (a folder walk over) before an ETA is shown
BATCH_SECONDS = 0.05  # let events gather between two passes: coalescing then drops stale states


@dataclass
class WaitOutcome:
    completed: int = 0
    failed: list[KnowledgeItem] = field(default_factory=list)
    total: int = 0
    paused: str | None = None  # the queue stopped before the items finished (a full disk)
    completed_ids: frozenset[str] = frozenset()  # the followed items that completed
    over_window: list[KnowledgeItem] = field(default_factory=list)  # of those, chunks past the model's window
    # followed folders whose walk left files out, with DirectoryItemData.skipped
    skipped: list[tuple[KnowledgeItem, dict[str, Any]]] = field(default_factory=list)

    @property
    def unfinished(self) -> int:
        return self.total - self.completed - len(self.failed)

    @property
    def ok(self) -> bool:
        return not self.failed and not self.unfinished


class Follower:
    """The state of one `follow`: apply events in O(1) each, report as they change."""

    def __init__(self, ks: Any, progress: Progress, base_ids: Sequence[str]):
        self.ks = ks
        self.progress = progress
        self.base_ids = set(base_ids)
        self.tally = Tally()
        self.rate = RateMeter()
        self.started = progress.clock()
        stats = ks.queue_stats()
        self._chunks_at_start = stats.chunks
        self.chunks = 0
        self._newly_failed: list[str] = []
        self.ocr = PageCounter()
        self.below: set[str] = set()  # items that existed below a followed folder: counted once they change
        self.slow: tuple[str, ...] = ()  # providers being paced down: a line when one becomes slow
        self.missed = False  # a Resync: another process's changes may have been missed
        self.preparing: set[str] = set()  # followed folders and sitemaps being walked (phase `preparing`)
        # just added, not walked yet: its `processing` (phase None) as it is queued is no end
        # of a walk; one ends on `preparing` (then its end), on finding items, or on ending
        self.unwalked: set[str] = set()
        self._found_at: float | None = None  # when a walk last added items to follow

    @property
    def finished(self) -> bool:
        return self.tally.done >= self.tally.total

    async def reread(self, roots: Sequence[KnowledgeItem]) -> None:
        """After a Resync: the followed items' statuses from the catalogue (one query below
        the roots, one lookup per root), since the events of the gap are lost."""
        self.missed = False
        tally = self.tally
        below = await self.ks.statuses_below([r.id for r in roots if not r.type.is_leaf])
        now: dict[str, ItemStatus] = dict(below)
        for root in roots:
            try:
                now[root.id] = (await self.ks.get_item(root.id)).status
            except KnowledgeError:  # deleted meanwhile
                continue
        for item_id in [i for i in tally.status if i not in now]:
            tally.remove(item_id)
        base_id = next(iter(self.base_ids)) if len(self.base_ids) == 1 else None
        for item_id, status in now.items():
            if item_id in tally:
                if tally.set(item_id, status):
                    self._newly_failed.append(item_id)
            elif item_id not in self.below:  # added below a followed folder during the gap
                tally.track(item_id, status, base_id)

    def apply(self, event: Any) -> None:
        tally = self.tally
        if isinstance(event, ItemChanged):
            if event.item_id not in tally and event.item_id in self.below:
                tally.track(event.item_id, ItemStatus.PROCESSING, event.base_id)
            if event.item_id in tally:
                if event.status == ItemStatus.PROCESSING and event.phase == ItemPhase.PREPARING:
                    self.preparing.add(event.item_id)
                    self.unwalked.discard(event.item_id)
                else:
                    self.preparing.discard(event.item_id)
                    if event.status != ItemStatus.PROCESSING:
                        self.unwalked.discard(event.item_id)
            if event.item_id in tally and tally.set(event.item_id, event.status):
                self._newly_failed.append(event.item_id)
            if event.item_id in tally:
                self.ocr.set(event.item_id, event.ocr_pages if event.status == ItemStatus.PROCESSING else None)
        elif isinstance(event, ItemsAdded):
            if event.group_id in tally:
                for item_id in event.item_ids:
                    tally.track(item_id, ItemStatus.PROCESSING, event.base_id)
                self._found_at = self.progress.clock()  # a walk found more: the total still grows
                self.unwalked.discard(event.group_id)
        elif isinstance(event, ItemsRemoved):
            for item_id in event.item_ids:
                tally.remove(item_id)
                self.ocr.set(item_id, None)
                self.preparing.discard(item_id)
                self.unwalked.discard(item_id)
        elif isinstance(event, BaseRemoved):  # a deleted (or discarded) base: its items are no longer work
            for item_id in tally.remove_base(event.base_id):
                self.ocr.set(item_id, None)
                self.preparing.discard(item_id)
                self.unwalked.discard(item_id)
        elif isinstance(event, Resync):
            self.missed = True
        elif isinstance(event, QueueStats):
            self.chunks = max(0, event.chunks - self._chunks_at_start)
            if len(event.slow) > len(self.slow):  # one line when a provider becomes slow, not per figure
                self.progress.line(f"slow    {event.slow[-1]}")
            self.slow = event.slow

    async def report_failures(self) -> None:
        """One line per item that failed since the last call (one lookup each, failures only)."""
        failed, self._newly_failed = self._newly_failed, []
        for item_id in failed:
            if item_id not in self.tally.failed_ids:
                continue  # re-queued meanwhile
            try:
                item = await self.ks.get_item(item_id)
            except KnowledgeError:  # deleted meanwhile
                continue
            if names_itself(item):
                self.progress.line(f"failed  {item.type.value} {item.display_name}: {own_error(item)}")

    def figures(self) -> Figures:
        now = self.progress.clock()
        t = self.tally
        walking = bool(self.preparing or self.unwalked)
        counting = walking or (self._found_at is not None and now - self._found_at < SETTLE_SECONDS)
        return Figures(t.done, t.total, t.failed, self.chunks, self.rate.sample(now, t.done), now - self.started,
                       self.ocr.figures(), counting)

    def show(self, *, force: bool = False) -> None:
        if force or self.progress.due():
            self.progress.show(self.figures(), force=True)

    async def outcome(self) -> WaitOutcome:
        """How it ended, from the counters; the failed items are fetched to be named."""
        done = frozenset(i for i, status in self.tally.status.items() if status == ItemStatus.COMPLETED)
        outcome = WaitOutcome(completed=self.tally.completed, total=self.tally.total,
                              paused=self.ks.queue_stats().paused, completed_ids=done)
        for item_id in self.tally.failed_ids:
            try:
                outcome.failed.append(await self.ks.get_item(item_id))
            except KnowledgeError:
                continue
        return outcome


async def follow(ks: Any, subscription: Any, roots: Sequence[KnowledgeItem],
                 progress: Progress, *, timeout: float | None = None) -> WaitOutcome:
    """Wait until `roots` (and everything they expand to, in any base) are done; report as we go.

    `subscription` must have been opened before the items were queued, so that no
    event is missed. On a shared store (PostgreSQL) other processes may hold some of the
    items: the wait goes on past this process's own idle queue until every followed item
    is completed or failed, whoever indexes it (their changes arrive as events; after a
    Resync the statuses are read again).
    """
    base_ids = sorted({r.base_id for r in roots})
    if not base_ids:
        return WaitOutcome()
    follower = Follower(ks, progress, base_ids)
    for root in roots:
        follower.tally.track(root.id, root.status, root.base_id)
    containers = [r.id for r in roots if not r.type.is_leaf]
    if containers:  # what already exists below a followed folder: a refresh reads some of it again
        follower.below = set(await ks.statuses_below(containers))
    # being walked: a folder says so (phase `preparing`); one just added has not started yet,
    # and nothing exists below it (a refresh's folder has its children, and says so soon)
    walks = [r for r in roots if not r.type.is_leaf and r.status == ItemStatus.PROCESSING]
    follower.preparing = {r.id for r in walks if r.phase == ItemPhase.PREPARING}
    follower.unwalked = {r.id for r in walks if r.phase is None and not follower.below}
    shared = ks.settings.store.url is not None
    idle = asyncio.ensure_future(ks.wait_idle(base_ids[0] if len(base_ids) == 1 else None, timeout=timeout))
    try:
        while True:
            for event in await subscription.next_batch(timeout=REDRAW_SECONDS):
                follower.apply(event)
            if follower.missed:
                await follower.reread(roots)
            await follower.report_failures()
            follower.show()
            if idle.done():
                if not idle.result():
                    raise TimeoutError
                if not subscription.pending_count() and (
                        not shared or follower.finished or ks.queue_stats().paused is not None):
                    break  # (shared: the rest is another process's; its events keep coming)
            else:
                await asyncio.sleep(BATCH_SECONDS)
        if progress.tty:
            follower.show(force=True)
        progress.clear()
    finally:
        if not idle.done():
            idle.cancel()
    return await follower.outcome()


__all__ = [  # the counters and the line live in cli_counters.py and cli_bar.py; their names stay importable here
    "BAR_WIDTH", "PLAIN_SECONDS", "REDRAW_SECONDS", "SETTLE_SECONDS", "Figures", "Follower", "PageCounter", "Progress",
    "RateMeter", "Tally", "WaitOutcome", "bar_line", "describe", "duration", "follow",
]
