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
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

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
from ktui.tui.cli_render import names_itself, own_error
from ktui.tui.cli_text import printable

BAR_WIDTH = 24
REDRAW_SECONDS = 0.1  # at most ~10 redraws a second on a terminal
PLAIN_SECONDS = 10.0  # a summary line at most this often off a terminal
RATE_WINDOW_SECONDS = 15.0  # the rate (and so the ETA) is measured over this much recent time
SETTLE_SECONDS = 3.0  # no item may have been found for this long (a folder walk over) before an ETA is shown
BATCH_SECONDS = 0.05  # let events gather between two passes: coalescing then drops stale states

Clock = Callable[[], float]


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


class Tally:
    """Statuses of the followed items with running counters: every change is O(1)."""

    def __init__(self) -> None:
        self.status: dict[str, ItemStatus] = {}
        self.completed = 0
        self.failed_ids: dict[str, None] = {}  # insertion-ordered set
        self._base_of: dict[str, str] = {}
        self._by_base: dict[str, set[str]] = {}  # a removed base takes its items with it

    @property
    def total(self) -> int:
        return len(self.status)

    @property
    def failed(self) -> int:
        return len(self.failed_ids)

    @property
    def done(self) -> int:
        return self.completed + len(self.failed_ids)

    def __contains__(self, item_id: object) -> bool:
        return item_id in self.status

    def track(self, item_id: str, status: ItemStatus, base_id: str | None = None) -> None:
        """Start following an item (a no-op for one already followed)."""
        if item_id not in self.status:
            self.status[item_id] = ItemStatus.IDLE
            self.set(item_id, status)
            if base_id is not None:
                self._base_of[item_id] = base_id
                self._by_base.setdefault(base_id, set()).add(item_id)

    def set(self, item_id: str, status: ItemStatus) -> bool:
        """Record a followed item's new status; True when it has just failed."""
        old = self.status.get(item_id)
        if old is None:
            return False
        self._count(item_id, old, -1)
        self.status[item_id] = status
        self._count(item_id, status, +1)
        return status == ItemStatus.FAILED and old != ItemStatus.FAILED

    def remove(self, item_id: str) -> None:
        old = self.status.pop(item_id, None)
        if old is not None:
            self._count(item_id, old, -1)
        base_id = self._base_of.pop(item_id, None)
        if base_id is not None:
            self._by_base[base_id].discard(item_id)

    def remove_base(self, base_id: str) -> list[str]:
        """Stop following every item of a deleted base (its rows went without ItemsRemoved);
        the ids dropped. O(items of that base), once per deleted base."""
        gone = list(self._by_base.pop(base_id, ()))
        for item_id in gone:
            self._base_of.pop(item_id, None)
            self.remove(item_id)
        return gone

    def _count(self, item_id: str, status: ItemStatus, sign: int) -> None:
        if status == ItemStatus.COMPLETED:
            self.completed += sign
        elif status == ItemStatus.FAILED:
            if sign > 0:
                self.failed_ids[item_id] = None
            else:
                self.failed_ids.pop(item_id, None)


class PageCounter:
    """OCR pages of the files being recognised right now, summed with running totals (O(1)
    per event): a file's count is replaced by its next report and dropped when it moves on."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[int, int]] = {}
        self.done = 0
        self.total = 0

    def set(self, item_id: str, pages: tuple[int, int] | None) -> None:
        old = self.pages.pop(item_id, None)
        if old is not None:
            self.done -= old[0]
            self.total -= old[1]
        if pages is not None:
            self.pages[item_id] = pages
            self.done += pages[0]
            self.total += pages[1]

    def figures(self) -> tuple[int, int] | None:
        return (self.done, self.total) if self.pages else None


class RateMeter:
    """Items per second over the last `window` seconds (samples are taken at redraws, so
    the window holds at most a few hundred of them)."""

    def __init__(self, window: float = RATE_WINDOW_SECONDS):
        self.window = window
        self._samples: deque[tuple[float, int]] = deque()

    def sample(self, now: float, done: int) -> float | None:
        self._samples.append((now, done))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window:
            self._samples.popleft()
        first_t, first_done = self._samples[0]
        if now - first_t < 0.5:
            return None  # too early to say
        return max(0.0, (done - first_done) / (now - first_t))


@dataclass(frozen=True)
class Figures:
    """What one progress line shows."""

    done: int
    total: int
    failed: int
    chunks: int
    rate: float | None  # items per second, None until measurable
    elapsed: float
    ocr_pages: tuple[int, int] | None = None  # pages recognised / to recognise in the files OCR is reading
    counting: bool = False  # a folder is being walked, or one found items within SETTLE_SECONDS

    @property
    def eta(self) -> float | None:
        """None while the total still grows: the time left for the items found so far
        (`ETA 0s` when indexing keeps up with the walk) says nothing about the rest."""
        if not self.rate or self.done >= self.total or self.counting:
            return None
        return (self.total - self.done) / self.rate


def duration(seconds: float) -> str:
    """`42s`, `3m05s`, `2h07m`."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def describe(f: Figures) -> str:
    """`1,234/20,001 items · 5,678 chunks · OCR 3/12 pages · 123 items/s · ETA 2m41s · 3 failed`."""
    parts = [f"{f.done:,}/{f.total:,} items", f"{f.chunks:,} chunks"]
    if f.ocr_pages is not None:
        done, total = f.ocr_pages
        parts.append(f"OCR {done:,}/{total:,} page{'s' if total != 1 else ''}")
    if f.rate is not None:
        parts.append(f"{f.rate:,.0f} items/s" if f.rate >= 10 else f"{f.rate:.1f} items/s")
    eta = f.eta
    if eta is not None:
        parts.append(f"ETA {duration(eta)}")
    elif f.counting and f.done < f.total:
        parts.append("still finding files")
    if f.failed:
        parts.append(f"{f.failed:,} failed")
    return " · ".join(parts)


FIGURES_ROOM = 64  # cells kept for the figures before the bar gets any: most lines fit in them


def bar_line(figures: Figures, columns: int) -> str:
    """The bar and the figures in `columns` - 3 cells: a longer line wraps, and the next
    redraw (`\\r` and erase line) clears only its last row, so every redraw would leave a
    row behind. The bar's width follows from the terminal's alone (24 cells from 94
    columns, 10 at 80), so it stays put while the figures change length; a line whose
    figures leave no room for it goes without, and figures too long are cut with `…`."""
    text = describe(figures)
    room = columns - 3  # some terminals wrap on the last column, and Ctrl+C echoes `^C` after the line
    if room <= 0:
        return ""
    width = min(BAR_WIDTH, room - FIGURES_ROOM - 3)
    if width >= 4 and len(text) + width + 3 <= room:
        filled = round((figures.done / figures.total if figures.total else 1.0) * width)
        return f"[{'█' * filled}{'░' * (width - filled)}] {text}"
    return text if len(text) <= room else text[: room - 1] + "…"


class Progress:
    """Where progress goes: a bar redrawn in place on a terminal, summary lines elsewhere.

    `clock` (seconds, monotonic) decides when to redraw; tests pass a fake one.
    """

    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None, clock: Clock = time.monotonic,
                 columns: int | None = None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.clock = clock
        self._columns = columns  # None: the terminal's width, read at every draw (it may be resized)
        self._last_draw: float | None = None
        self._drawn = False
        self.draws = 0  # how many times progress was written (the tests count them)

    def line(self, text: str) -> None:
        """A line of its own (a failure): the bar is cleared first and redrawn later."""
        self.clear()
        self.stream.write(printable(text) + "\n")
        self.stream.flush()

    def due(self) -> bool:
        """True when it is time for the next progress output."""
        now = self.clock()
        interval = REDRAW_SECONDS if self.tty else PLAIN_SECONDS
        return self._last_draw is None or now - self._last_draw >= interval

    def show(self, figures: Figures, *, force: bool = False) -> None:
        """Draw the bar (terminal) or print a summary line (elsewhere), at most once per interval."""
        if not force and not self.due():
            return
        self._last_draw = self.clock()
        self.draws += 1
        if not self.tty:
            self.stream.write(f"progress: {describe(figures)}\n")
            self.stream.flush()
            return
        self.stream.write("\r\x1b[2K" + bar_line(figures, self.columns()))
        self.stream.flush()
        self._drawn = True

    def columns(self) -> int:
        if self._columns is not None:
            return self._columns
        try:
            columns = os.get_terminal_size(self.stream.fileno()).columns
        except (AttributeError, OSError, ValueError):  # not a real terminal after all
            return 80
        return columns if columns > 0 else 80  # a pty nobody gave a size

    def clear(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._drawn = False


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
