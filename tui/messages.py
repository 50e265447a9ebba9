"""Messages that background workers post to the app.

Workers never touch widgets: they do service I/O and post one of these; the
handlers (on the app's message loop) own all widget state. Like toolong, a
newer message of the same kind replaces an older one where that makes sense
(a search result replaces the previous search, an event batch carries the
coalesced state of many events).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.message import Message

from ktui.core.models import (
    Event,
    KnowledgeBase,
    KnowledgeGroup,
    KnowledgeItem,
    SearchResponse,
)


@dataclass
class ServiceEvents(Message):
    """One time-batched, coalesced bundle of runtime events."""

    events: list[Event]


@dataclass
class BasesLoaded(Message):
    bases: list[KnowledgeBase]
    groups: list[KnowledgeGroup]
    counts: dict[str, int]
    ok: bool = True  # False: loading failed (already reported); keep what is shown


@dataclass
class ItemsPage(Message):
    """One chunk (page) of children of `parent_id` (None = roots of the base)."""

    base_id: str
    parent_id: str | None
    items: list[KnowledgeItem]
    total: int
    generation: int  # drops pages meant for a tree that was reloaded since
    replace: bool = False  # first page of a reload: clear existing children first


@dataclass
class ItemsFetched(Message):
    """Items that appeared (ItemsAdded) and were fetched by id."""

    base_id: str
    items: list[KnowledgeItem]
    generation: int


@dataclass
class SearchFinished(Message):
    base_id: str
    query: str
    mode: str
    response: SearchResponse
    serial: int  # an older search's answer never replaces a newer one
    elapsed_ms: float = 0.0


@dataclass
class ServiceFailed(Message):
    """A service call failed: shown as a toast, and on the base/item when known."""

    what: str
    error: str
    base_id: str | None = None
    item_id: str | None = None
    extra: dict = field(default_factory=dict)
