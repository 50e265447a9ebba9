"""Which process follows a watched folder, and discards an interrupted import, on a shared catalogue.

On SQLite the one process that holds the data directory does both. On PostgreSQL
several processes on several machines share one catalogue, so (docs/postgres.md,
"Watched folders and interrupted imports"):

* **a folder path belongs to one machine**: the one where it was added with watch on
  or where watch was last turned on (its *host*). A process follows a folder only
  when it runs a watcher (a runtime started with `recover`: the TUI, `ktui watch`,
  `ktui serve`), its machine is the folder's and the folder exists there; and only
  one such process at a time, the holder of the folder's lease, renewed on the
  runtime's heartbeat, given back on a clean stop and taken over by another eligible
  process once it expires. The follower refreshes the folder exactly as on SQLite;
  the files the refresh queues are indexed by whichever process claims them.
* **an interrupted import** (its ledger row left `importing`) is discarded, as on
  SQLite, but only by a process that took over the import's expired lease: the
  importer renews it on its heartbeat, so a live import is never discarded.

This module holds the runtime's side; the claims themselves are the catalogue's
(``ktui.core.store.postgres.work_claims.PgWorkClaims`` satisfies :class:`ProcessClaims`).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from ktui.core.errors import StoreError
from ktui.core.models import DirectoryItemData, KnowledgeItem

if TYPE_CHECKING:
    from ktui.core.runtime.service import KnowledgeRuntimeService

log = logging.getLogger(__name__)


class ProcessClaims(Protocol):
    """The leases of a shared catalogue on imports in flight and on followed folders."""

    @property
    def host(self) -> str:
        """This process's machine."""
        ...

    async def interrupted_imports(self) -> list[str]:
        """Take over the expired leases of `importing` bases; returns those to discard."""
        ...

    async def give_back_imports(self, base_ids: Sequence[str]) -> None:
        """Discarding these failed: let the next look take them again."""
        ...

    async def renew_own(self) -> list[str]:
        """Renew this process's import and folder leases; returns the folders still held."""
        ...

    async def record_folders(self, item_ids: Sequence[str]) -> None:
        """These folders belong to this machine from now on."""
        ...

    async def forget_folders(self, item_ids: Sequence[str]) -> None:
        """Watch is off for these folders: nobody follows them."""
        ...

    async def take_folders(self, item_ids: Sequence[str]) -> list[str]:
        """Follow these folders where this machine is theirs and nobody alive follows them."""
        ...

    async def release_folders(self, item_ids: Sequence[str] | None = None) -> None:
        """Stop following these folders (all when None)."""
        ...

    async def followers(self, item_ids: Sequence[str]) -> dict[str, tuple[str, str | None]]:
        """Item id -> (its machine, the owner id of its live follower or None)."""
        ...


class FolderFollowing:
    """The watched folders one runtime follows on a shared catalogue (see the module docstring)."""

    def __init__(self, runtime: KnowledgeRuntimeService, claims: ProcessClaims) -> None:
        self.runtime = runtime
        self.claims = claims
        self.enabled = False  # set by a runtime that runs a watcher (started with `recover`)
        self._taking: set[str] = set()  # folders whose lease is being taken: not idle yet for a beat

    @property
    def host(self) -> str:
        return self.claims.host

    async def adopt(self) -> list[str]:
        """Follow every watched folder this process may follow and nobody else does: watch
        it and refresh it once (what changed while nobody followed it). One query, a
        `stat` per folder not followed here, one statement for the leases."""
        if not self.enabled or self.runtime.closed:
            return []
        usable = {b.id for b in await self.runtime.bases.list_all() if b.is_usable}
        watcher = self.runtime.watcher
        candidates = [i for i in await self.runtime.items.watched_directories()
                      if i.base_id in usable and isinstance(i.data, DirectoryItemData) and not watcher.watching(i.id)]
        here = await asyncio.to_thread(_existing, candidates)
        ids = {i.id for i in here}
        self._taking |= ids
        started: list[str] = []
        try:
            taken = set(await self.claims.take_folders([i.id for i in here])) if here else set()
            for item in here:
                if item.id in taken and not self.runtime.closed:
                    assert isinstance(item.data, DirectoryItemData)
                    self.runtime.watcher.watch(item.base_id, item.id, item.data.path)
                    started.append(item.id)
        finally:
            self._taking -= ids
        for item in here:
            if item.id in started and not self.runtime.closed:
                assert isinstance(item.data, DirectoryItemData)
                await self.runtime.preparer.follow(item.base_id, item.id, item.data.path)
        if started:
            log.info("following %d watched folder(s) on %s", len(started), self.host)
        return started

    async def beat(self) -> None:
        """At each heartbeat: renew, stop following what was taken over (or turned off, or
        given to another machine), give back what is no longer watched here (the folder
        vanished), then take what is free."""
        held = set(await self.claims.renew_own())
        watched = self.runtime.watcher.watched
        for item_id in watched - held:
            log.info("stopped following %s: another process follows it now", item_id)
            self.runtime.watcher.unwatch(item_id)
        idle = held - watched - self._taking
        if idle:
            await self.claims.release_folders(sorted(idle))
        await self.adopt()

    async def follow(self, base_id: str, item_id: str, path: str, *, refresh: bool) -> None:
        """Watch was turned on here (an added folder, `set_watch`): the folder is this
        machine's; this process follows it at once when it runs a watcher and the lease
        is free, else an eligible process here takes it at its next beat."""
        self._taking.add(item_id)
        try:
            await self.claims.record_folders([item_id])
            if not self.enabled or self.runtime.closed:
                return
            if not (await asyncio.to_thread(os.path.isdir, path) and await self.claims.take_folders([item_id])):
                return
            self.runtime.watcher.watch(base_id, item_id, path)
        except StoreError as exc:  # the server is away: the next beat of a follower here takes it
            log.warning("could not follow %s now: %s", path, exc)
            return
        finally:
            self._taking.discard(item_id)
        if refresh:
            self.runtime.request_refresh(base_id, item_id)

    async def forget(self, item_id: str) -> None:
        """Watch was turned off: nobody follows the folder any more."""
        self.runtime.watcher.unwatch(item_id)
        await self.claims.forget_folders([item_id])

    async def followers(self, item_ids: Sequence[str]) -> dict[str, tuple[str, str | None]]:
        return await self.claims.followers(item_ids)


def _existing(items: list[KnowledgeItem]) -> list[KnowledgeItem]:
    """The folders that exist on this machine (blocking: a `stat` each)."""
    return [i for i in items if isinstance(i.data, DirectoryItemData) and os.path.isdir(i.data.path)]
