"""`--wait`: follow queued work to the end, with a progress bar on a terminal.

The runtime's events (`ks.subscribe()`) say when an item changes; `ks.wait_idle`
says when the base's queue is empty. We track the items we queued plus every
child a container adds below them, so a directory's files count too, and the
existing children a folder refresh reads again. On a
terminal (stderr is a tty) one line is redrawn in place; otherwise one plain line
is printed per item that finishes, which is what logs and CI want.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from ktui.core.errors import KnowledgeError
from ktui.core.models import (
    ANY_GROUP,
    ItemChanged,
    ItemsAdded,
    ItemsRemoved,
    ItemStatus,
    KnowledgeItem,
)
from ktui.tui.cli_text import printable

BAR_WIDTH = 28
REDRAW_SECONDS = 0.1


@dataclass
class WaitOutcome:
    completed: int = 0
    failed: list[KnowledgeItem] = field(default_factory=list)
    total: int = 0

    @property
    def ok(self) -> bool:
        return not self.failed


class Progress:
    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self._last_draw = 0.0
        self._drawn = False

    def line(self, text: str) -> None:
        self.clear()
        self.stream.write(printable(text) + "\n")
        self.stream.flush()

    def bar(self, done: int, total: int, failed: int, current: str, *, force: bool = False) -> None:
        if not self.tty:
            return
        now = time.monotonic()
        if not force and now - self._last_draw < REDRAW_SECONDS:
            return
        self._last_draw = now
        frac = done / total if total else 1.0
        filled = round(frac * BAR_WIDTH)
        bar = "█" * filled + "░" * (BAR_WIDTH - filled)
        extra = f"  {failed} failed" if failed else ""
        text = f"[{bar}] {done}/{total}{extra}  {current}"
        self.stream.write("\r\x1b[2K" + printable(text)[:200])
        self.stream.flush()
        self._drawn = True

    def clear(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._drawn = False


async def follow(ks: Any, subscription: Any, roots: Sequence[KnowledgeItem],
                 progress: Progress, *, timeout: float | None = None) -> WaitOutcome:
    """Wait until `roots` (and everything they expand to, in any base) are done; report as we go.

    `subscription` must have been opened before the items were queued, so that no
    event is missed.
    """
    status: dict[str, ItemStatus] = {r.id: r.status for r in roots}
    labels: dict[str, str] = {r.id: f"{r.type.value} {r.display_name}" for r in roots}
    reported: set[str] = set()
    current = ""
    base_ids = sorted({r.base_id for r in roots})
    if not base_ids:
        return WaitOutcome()
    parents: dict[str, str | None] = {}

    async def below_roots(item_id: str) -> bool:
        """An item that already existed below a followed folder (a refresh re-reads it)."""
        current_id: str | None = item_id
        while current_id is not None and current_id not in status:
            if current_id not in parents:
                try:
                    parents[current_id] = (await ks.get_item(current_id)).group_id
                except KnowledgeError:  # deleted meanwhile
                    parents[current_id] = None
            current_id = parents[current_id]
        return current_id is not None

    idle = asyncio.ensure_future(
        ks.wait_idle(base_ids[0] if len(base_ids) == 1 else None, timeout=timeout)
    )
    try:
        while True:
            events = await subscription.next_batch(timeout=REDRAW_SECONDS)
            for event in events:
                if isinstance(event, ItemsAdded) and event.group_id in status:
                    for item_id in event.item_ids:
                        status.setdefault(item_id, ItemStatus.PROCESSING)
                elif isinstance(event, ItemsRemoved):
                    for item_id in event.item_ids:
                        status.pop(item_id, None)
                elif isinstance(event, ItemChanged) and (
                    event.item_id in status
                    or (event.base_id in base_ids and await below_roots(event.item_id))
                ):
                    status[event.item_id] = event.status
                    if event.status.is_terminal and event.item_id not in reported:
                        reported.add(event.item_id)
                        label = await _label(ks, event.item_id, labels)
                        done = sum(1 for s in status.values() if s.is_terminal)
                        if not progress.tty:
                            msg = f"[{done}/{len(status)}] {event.status.value}  {label}"
                            if event.error:
                                msg += f": {event.error}"
                            progress.line(msg)
                        elif event.status == ItemStatus.FAILED:
                            progress.line(f"failed  {label}: {event.error}")
                    elif event.phase is not None:
                        current = await _label(ks, event.item_id, labels)
                        if event.progress is not None:
                            current += f" {int(event.progress * 100)}%"
            done = sum(1 for s in status.values() if s.is_terminal)
            failed = sum(1 for s in status.values() if s == ItemStatus.FAILED)
            progress.bar(done, len(status), failed, current)
            if idle.done():
                if not idle.result():
                    raise TimeoutError
                if not subscription.pending_count():
                    break
        progress.bar(done, len(status), failed, "", force=True)
        progress.clear()
    finally:
        if not idle.done():
            idle.cancel()
    outcome = WaitOutcome()
    for base_id in base_ids:
        await _outcome(ks, base_id, set(status), outcome)
    return outcome


async def _label(ks: Any, item_id: str, labels: dict[str, str]) -> str:
    if item_id not in labels:
        try:
            item = await ks.get_item(item_id)
            labels[item_id] = f"{item.type.value} {item.display_name}"
        except KnowledgeError:  # deleted meanwhile
            labels[item_id] = item_id
    return labels[item_id]


async def _outcome(ks: Any, base_id: str, tracked: set[str], outcome: WaitOutcome) -> None:
    """Final state from the database (events may have been coalesced)."""
    page = 1
    while True:
        listing = await ks.list_items(base_id, group_id=ANY_GROUP, page=page, limit=100)
        for item in listing.items:
            if item.id not in tracked:
                continue
            outcome.total += 1
            if item.status == ItemStatus.COMPLETED:
                outcome.completed += 1
            elif item.status == ItemStatus.FAILED:
                outcome.failed.append(item)
        if page >= listing.pages:
            break
        page += 1
