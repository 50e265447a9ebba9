"""The event bus: the runtime publishes, any number of subscribers read.

A slow subscriber must never block the runtime, and must not drown in stale
updates either. Each subscription therefore keeps an ordered map of pending
events keyed by what they describe: a newer state of the same item (or the
newest queue figures, or a base change) replaces the older one in place
("latest wins"), while additions and removals are kept in order.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

from ktui.core.models import (
    BaseChanged,
    BaseRemoved,
    Event,
    ItemChanged,
    ItemsAdded,
    ItemsRemoved,
    QueueStats,
    Resync,
)

_unique = itertools.count()


def coalescing_key(event: Event) -> Any:
    match event:
        case ItemChanged(item_id=item_id):
            return ("item", item_id)
        case QueueStats():
            return ("stats",)
        case BaseChanged(base_id=base_id):
            return ("base", base_id)
        case Resync():
            return ("resync",)
        case _:
            return ("once", next(_unique))


class Subscription:
    """Pending events of one subscriber. Iterate it, or take whole batches."""

    def __init__(self, bus: EventBus):
        self._bus = bus
        self._pending: OrderedDict[Any, Event] = OrderedDict()
        self._ready = asyncio.Event()
        self._closed = False

    def _push(self, event: Event) -> None:
        key = coalescing_key(event)
        if isinstance(event, (ItemsRemoved, BaseRemoved)):
            # removed things have no state left to report
            ids = event.item_ids if isinstance(event, ItemsRemoved) else ()
            for item_id in ids:
                self._pending.pop(("item", item_id), None)
            if isinstance(event, BaseRemoved):
                self._pending.pop(("base", event.base_id), None)
        self._pending[key] = event
        self._ready.set()

    def pending_count(self) -> int:
        return len(self._pending)

    def drain(self) -> list[Event]:
        """Everything pending right now, oldest first, without waiting."""
        events = list(self._pending.values())
        self._pending.clear()
        self._ready.clear()
        return events

    async def next_batch(self, timeout: float | None = None) -> list[Event]:
        """Wait for at least one event (or the timeout), then return all pending ones."""
        if not self._pending and not self._closed:
            try:
                await asyncio.wait_for(self._ready.wait(), timeout)
            except TimeoutError:
                return []
        return self.drain()

    def close(self) -> None:
        self._closed = True
        self._bus._remove(self)
        self._ready.set()

    @property
    def closed(self) -> bool:
        return self._closed

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Event]:
        try:
            while not self._closed or self._pending:
                if not self._pending:
                    await self._ready.wait()
                    if not self._pending:
                        if self._closed:
                            return
                        self._ready.clear()
                        continue
                _, event = self._pending.popitem(last=False)
                if not self._pending:
                    self._ready.clear()
                yield event
        finally:
            if not self._closed:
                self.close()

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()


class EventBus:
    def __init__(self) -> None:
        self._subscriptions: list[Subscription] = []

    def subscribe(self) -> Subscription:
        sub = Subscription(self)
        self._subscriptions.append(sub)
        return sub

    @property
    def has_subscribers(self) -> bool:
        """Anyone reading: an event published now reaches someone (a publisher whose event
        costs a database read skips both when nobody would see it)."""
        return bool(self._subscriptions)

    def publish(self, event: Event) -> None:
        for sub in self._subscriptions:
            sub._push(event)

    def publish_all(self, events: list[Event]) -> None:
        for event in events:
            self.publish(event)

    def _remove(self, sub: Subscription) -> None:
        if sub in self._subscriptions:
            self._subscriptions.remove(sub)

    def close(self) -> None:
        for sub in list(self._subscriptions):
            sub.close()


__all__ = [
    "EventBus",
    "Subscription",
    "coalescing_key",
    "BaseChanged",
    "BaseRemoved",
    "ItemChanged",
    "ItemsAdded",
    "ItemsRemoved",
    "QueueStats",
    "Resync",
]
