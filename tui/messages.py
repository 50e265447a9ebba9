"""Messages that background workers post to the app and its dialogs.

Workers never touch widgets: they do service I/O and post one of these; the
handlers (on the message loop) own all widget state. Every outcome has its
own type, so a handler says what it handles (`on_base_saved`, not a string
switch over "what"). Where a newer message of a kind makes an older, still
queued one pointless, `can_replace` says so and Textual drops the older one:
a newer search answer, a newer bases listing, a newer dimension probe.
An event batch never replaces another (each carries different events).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from textual.message import Message

from ktui.core.engine import RankResult
from ktui.core.models import (
    ChunkRecord,
    Event,
    KnowledgeBase,
    KnowledgeGroup,
    KnowledgeItem,
    ModelListing,
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

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, BasesLoaded) and self.ok


@dataclass
class ItemsPage(Message):
    """One chunk (page) of children of `parent_id` (None = roots of the base)."""

    base_id: str
    parent_id: str | None
    items: list[KnowledgeItem]
    generation: int  # drops pages meant for a tree that was reloaded since
    replace: bool = False  # first page of a reload: clear existing children first
    applied: asyncio.Event | None = None  # set once handled: the fetcher waits for it (one page in flight)


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
    response: SearchResponse | None  # None: the search failed (already reported)
    serial: int  # an older search's answer never replaces a newer one
    elapsed_ms: float = 0.0
    error: str | None = None  # why it failed (response None)
    base_names: dict[str, str] = field(default_factory=dict)  # several bases: id -> name, for the results
    scope: str = ""  # "in all bases · type file", for the status line
    terms_query: str = ""  # the words searched for (the query without in:/type:/under:/after:)

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SearchFinished) and message.serial < self.serial


@dataclass
class ServiceFailed(Message):
    """A service call failed: shown as a toast, and on the base/item when known."""

    what: str
    error: str
    base_id: str | None = None
    item_id: str | None = None
    extra: dict = field(default_factory=dict)


# --- outcomes of one service call ------------------------------------------------
#
# `Outcome` subclasses carry the call's return value in `value` (typed per class)
# or, for dialogs, the error text in `error`. The app's own calls report errors as
# `ServiceFailed` (a toast) instead.


@dataclass
class Outcome(Message):
    value: Any = None
    error: str | None = None


@dataclass
class DemoReady(Outcome):
    value: KnowledgeBase | None = None


@dataclass
class BaseDeleted(Outcome):
    name: str = ""


@dataclass
class ReindexQueued(Outcome):
    name: str = ""


@dataclass
class BaseReindexed(Outcome):
    """Every top-level item of a base was queued again (`value`: how many)."""

    value: int | None = None
    name: str = ""


@dataclass
class StoreDamaged(Message):
    """A call found a base's store missing or damaged: the bases pane reloads to say so."""

    base_id: str | None = None


@dataclass
class WatchSet(Outcome):
    value: KnowledgeItem | None = None
    folder_id: str = ""
    name: str = ""
    watch: bool = False


@dataclass
class ModelsListed(Outcome):
    value: ModelListing | None = None


@dataclass
class DimensionsDetected(Outcome):
    value: int | None = None
    serial: int = 0  # the probe it answers; an answer to an older probe is dropped

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, DimensionsDetected) and message.serial < self.serial


@dataclass
class BaseSaved(Outcome):
    value: KnowledgeBase | None = None


@dataclass
class BaseRestored(Outcome):
    value: KnowledgeBase | None = None


@dataclass
class ItemsAccepted(Outcome):
    value: list[KnowledgeItem] | None = None


@dataclass
class ChunksLoaded(Outcome):
    value: list[ChunkRecord] | None = None


@dataclass
class ChunkDeleted(Outcome):
    chunk_id: str = ""


@dataclass
class SimilarRanked(Outcome):
    value: RankResult[KnowledgeItem] | None = None


@dataclass
class ItemDetailLoaded(Outcome):
    value: Any = None  # ItemFacts (tui.screens.item_detail)
