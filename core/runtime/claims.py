r"""Work claims: which process may run an item's task, when several share one catalogue.

On SQLite one process holds the data directory and its queue is the only queue, so
every claim is granted and costs nothing (:data:`NO_CLAIMS`: ``shared`` is False and
the runtime skips every call). On PostgreSQL every process may index
(``ktui.core.store.postgres.work_claims.PgWorkClaims``, over the item leases of
``ktui.core.store.postgres.leases``). The runtime then

* claims an item when its task starts, and skips the task if another process holds it
  or (a leaf) it is no longer `processing` (that process ran it; an item may wait in
  two queues, it runs in one);
* renews its claims on a heartbeat every ``heartbeat_every`` seconds and, with it,
  sweeps up unfinished items nobody alive holds (``beat``): that is recovery on a
  shared catalogue, periodic and in every process, instead of one pass at open; a
  sweep takes only what the process can start soon, so several share a backlog
  (heartbeat.py);
* completes or fails an item only through ``guard``: called first inside the
  catalogue transaction of that write, it returns the items still held (their claims
  given back in that same transaction) and the write leaves out the others, whose
  claim was lost to another process (nothing written twice); a completion's guard
  (``completing``) writes the held leaves' chunks in that transaction too;
* guards every phase write of a leaf with ``holding`` (the items still held, locked
  until the write commits, claims kept): a process that lost an item writes nothing
  more for it, and its task ends quietly;
* guards every write of a folder or sitemap being prepared or refreshed (its phase,
  its payload, its children created, re-queued or removed with their vectors) with
  ``holding_container``, and a failure's removal of the item's vectors with
  ``failing`` (in the transaction that records the failure, for the items still held):
  a process that lost a container writes nothing more under it, and one that lost an
  item never removes the vectors its new holder wrote;
* ``seize``\ s the items a delete or a reindex resets, from whoever holds them: the
  other process's completion and phase writes are refused from then on, and it hears
  that its task for them must stop (core/runtime/remote_interrupts.py);
* gives its claims back when it closes, leaving its unfinished items `processing` for
  the others instead of failing them "interrupted by shutdown".

This module only states the protocol, so the runtime never imports a database driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from ktui.core.catalogue import WriteGuard
from ktui.core.models import Chunk
from ktui.core.store.protocol import ChunkStore

ChunkEntry = tuple[str, Sequence[Chunk], np.ndarray]  # an item's new chunks and their vectors


class WorkClaims(Protocol):
    """What the runtime asks of the claims of a shared catalogue (see the module docstring)."""

    @property
    def shared(self) -> bool:
        """False: this process is the only indexer and the runtime skips every claim."""
        ...

    @property
    def heartbeat_every(self) -> float:
        """Seconds between renewals (a third of a claim's lifetime)."""
        ...

    @property
    def idle_sweep_every(self) -> float:
        """Seconds between sweeps while the queue has a free worker (work another process
        queued reaches an idle one this fast)."""
        ...

    @property
    def guard(self) -> WriteGuard | None:
        """For a completion or failure write: (connection, ids) -> the ids still held."""
        ...

    @property
    def holding(self) -> WriteGuard | None:
        """For a phase write, or recovery re-queuing what it swept: (connection, ids) -> the
        ids still held, locked until that write commits, claims kept. A swept item whose
        task completed between the sweep's read and the re-queue is no longer held, so it
        is not set back to `processing` (and indexed and completed a second time)."""
        ...

    def completing(self, store: ChunkStore, entries: Sequence[ChunkEntry]) -> WriteGuard | None:
        """The guard of a group of leaves' completion that also writes their chunks, in the
        same transaction and only for the leaves still held: an item's chunks, its
        `completed` row and its claim's release commit together or not at all. None: the
        caller writes the chunks itself first (one indexer: nobody to race)."""
        ...

    def failing(self, store: ChunkStore, item_ids: Sequence[str]) -> WriteGuard | None:
        """The guard of a failure write that also removes the failing items' vectors, in
        the same transaction and only for the items still held (their claims given back
        there, as ``guard``): a process whose claim was taken over never deletes the
        vectors the new holder wrote. None: the caller removes them itself first (one
        writer: nobody to race)."""
        ...

    def holding_container(self, item_id: str, *, store: ChunkStore | None = None,
                          vectors_of: Sequence[str] = ()) -> WriteGuard | None:
        """The guard of a write made while preparing or refreshing the folder or sitemap
        `item_id` (its phase or payload, its children created, re-queued, re-stamped or
        removed): (connection, ids) -> all of `ids` while this process holds the
        container, else none; the container stays locked until that write commits (no
        takeover in between), the claim is kept. With `store`, the vectors
        of `vectors_of` (children removed with the write) go in that transaction too.
        None: one writer, nothing to check."""
        ...

    async def claim(self, item_ids: Sequence[str], *, any_status: bool = False) -> list[str]:
        """Take these items' claims where nobody else holds them and the item is
        `processing` (whatever its status with `any_status`: a folder's refresh starts on a
        `completed` folder); returns those taken. Requiring `processing` is what keeps a
        leaf another process completed meanwhile from being indexed again here."""
        ...

    async def release(self, item_ids: Sequence[str]) -> None:
        """Give these claims back without completing (a task that ended otherwise)."""
        ...

    async def seize(self, item_ids: Sequence[str]) -> list[str]:
        """Take these items' claims whoever holds them (a delete or reindex of them starts):
        the holder's later writes for them are refused and it is told to stop its task.
        Returns the items that exist."""
        ...

    async def held(self, item_ids: Sequence[str]) -> list[str]:
        """Which of these items this process still holds."""
        ...

    async def beat(self, limit: int, *, containers: int = 0) -> list[str]:
        """Renew every claim of this process, then claim up to `limit` unfinished leaves
        and up to `containers` unfinished folders or sitemaps nobody alive holds; returns
        those, containers first (the caller queues them). Apart, so folders waiting on
        their children never crowd leaves out of a small sweep (heartbeat.py)."""
        ...

    async def close(self) -> None:
        """Give every claim back and let go of the connections."""
        ...


class NoClaims:
    """One indexer (SQLite): nothing to claim; the runtime checks ``shared`` and skips."""

    shared = False
    heartbeat_every = 0.0
    idle_sweep_every = 0.0
    guard: WriteGuard | None = None
    holding: WriteGuard | None = None

    def completing(self, store: ChunkStore, entries: Sequence[ChunkEntry]) -> WriteGuard | None:
        return None

    def failing(self, store: ChunkStore, item_ids: Sequence[str]) -> WriteGuard | None:
        return None

    def holding_container(self, item_id: str, *, store: ChunkStore | None = None,
                          vectors_of: Sequence[str] = ()) -> WriteGuard | None:
        return None

    async def claim(self, item_ids: Sequence[str], *, any_status: bool = False) -> list[str]:
        return list(item_ids)

    async def release(self, item_ids: Sequence[str]) -> None:
        return None

    async def seize(self, item_ids: Sequence[str]) -> list[str]:
        return list(item_ids)

    async def held(self, item_ids: Sequence[str]) -> list[str]:
        return list(item_ids)

    async def beat(self, limit: int, *, containers: int = 0) -> list[str]:
        return []

    async def close(self) -> None:
        return None


NO_CLAIMS: WorkClaims = NoClaims()
