"""Runtimes and services on one PostgreSQL schema, as several processes would have them.

`runtime_on` wires a KnowledgeRuntimeService as the facade does on PostgreSQL, with its
leases on an injected clock (`FakeClock`) and no heartbeat of its own, so a test decides
when leases expire and when a sweep runs. `shared_service` opens the whole facade (its
listener and remote events included) as one "machine". `until` waits for a condition
with a generous deadline (a guard against hanging, never a timing assertion)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ktui.core.config import StoreSettings
from ktui.core.data.base_service import KnowledgeBaseService
from ktui.core.data.item_service import KnowledgeItemService
from ktui.core.data.validation import ValidItem
from ktui.core.embeddings import EmbeddingService
from ktui.core.models import ItemStatus, ItemType, NoteItemData
from ktui.core.runtime.events import EventBus
from ktui.core.runtime.service import KnowledgeRuntimeService
from ktui.core.runtime.status import StateWriter
from ktui.core.service import KnowledgeService
from ktui.core.store.postgres import PgStoreManager
from ktui.core.store.postgres.catalogue import PgDatabase
from ktui.core.store.postgres.leases import LeaseOwner, Leases
from ktui.core.store.postgres.work_claims import PgWorkClaims
from tests.support.services import FAKE_MODEL, fake_settings

TTL = 30.0


class FakeClock:
    """Epoch seconds that move only when the test moves them."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Runtime:
    runtime: KnowledgeRuntimeService
    state: StateWriter
    claims: PgWorkClaims


@asynccontextmanager
async def runtime_on(url: str, schema: str, data_dir: Path, server_url: str, name: str, clock: FakeClock,
                     concurrency: int = 2) -> AsyncIterator[Runtime]:
    """A runtime wired as the facade wires one, on the PostgreSQL catalogue and chunks."""
    settings = fake_settings(data_dir, server_url, concurrency=concurrency)
    db = await PgDatabase.open(url, schema=schema)
    stores = PgStoreManager(url, schema=schema)
    bus = EventBus()
    state = StateWriter(db, bus)
    # heartbeats only when the test asks (recover()): the fake clock alone decides expiry
    claims = PgWorkClaims(url, schema, leases=Leases(LeaseOwner(name), ttl=TTL, clock=clock),
                          heartbeat_every=3600, idle_sweep_every=3600)
    runtime = KnowledgeRuntimeService(
        settings=settings, bases=KnowledgeBaseService(db), items=KnowledgeItemService(db), state=state,
        stores=stores, embeddings=EmbeddingService(settings), bus=bus, claims=claims,
    )
    await runtime.start(recover=False)
    try:
        yield Runtime(runtime, state, claims)
    finally:
        await runtime.close()
        stores.close_all()
        await db.close()


async def make_notes(r: Runtime, url: str, schema: str, n: int, dims: int = 64) -> tuple[str, list[str]]:
    """A base with its chunk table and `n` notes, `processing` and queued nowhere yet."""
    base = await r.state.create_base(name="shared", embedding_model_id=FAKE_MODEL, dimensions=dims)
    PgStoreManager(url, schema=schema).create(base.id, dims)
    notes = [ValidItem(ItemType.NOTE, NoteItemData(content=f"note number {k} about lease {k}", source=f"note-{k}"))
             for k in range(n)]
    items = await r.state.create_roots(base.id, notes)
    return base.id, [i.id for i in items]


async def statuses(r: Runtime, ids: list[str]) -> dict[str, ItemStatus]:
    return {i.id: i.status for i in await r.runtime.items.get_many(ids)}


@asynccontextmanager
async def shared_service(url: str, schema: str, data_dir: Path, server_url: str, *, recover: bool = True,
                         **overrides: Any) -> AsyncIterator[KnowledgeService]:
    """One "machine": the facade on the shared schema, listening to the others."""
    settings = fake_settings(data_dir, server_url, **overrides).with_(store=StoreSettings(url=url, schema=schema))
    service = await KnowledgeService.open(settings=settings, recover=recover)
    try:
        yield service
    finally:
        await service.close()


async def until(condition: Callable[[], bool], what: str, timeout: float = 120.0,
                detail: Callable[[], object] = lambda: "") -> None:
    """Wait for `condition`; fail naming `what` (and `detail()`) after `timeout` seconds
    (a hang guard)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, f"gave up waiting: {what} {detail()}"
        await asyncio.sleep(0.02)
