"""Recovery: what a shutdown interrupted or a crash left `processing` runs again.

Kept apart from the task code because its rules are about the catalogue's state,
not about running a task: which items count as stuck, why a container that was
still preparing loses its partial children and prepares again (vectors before
rows), and why one waiting on children is only reconciled. Runs only in the
process that holds the data directory, never in a reader.

**In the background.** A holder's open returns as soon as the queue runs; the
first recovery pass (then the resumption of watched folders) is a task of the
runtime, so the first reads never wait for it (issue 16: with ~170k unfinished
items that took 84 s). A pass:

1. looks at what is unfinished, a page of ids at a time (short reads: a list or a
   search asked meanwhile waits for one page, not for all of them);
2. handles it in batches of `BATCH` items, roots first (re-preparing a folder drops
   its subtree, so stuck rows below it may be gone by then: skipped). Each batch
   re-reads its rows and leaves alone what is no longer stuck or already queued,
   then re-queues the rest with one status write per batch.

**Writes that race it.** Each batch runs *exclusively* of the workflow's
delete / reindex / delete-base calls (`writing()`, shared among them), so a batch
never acts on a row one of those is halfway through: without it, a folder being
re-prepared by recovery could lose the children a user's forced reindex had just
created. Those calls wait for at most one batch. Folder refreshes asked for while
a pass runs (a watched folder changed, `set_watch`) are held and started when it
ends. Everything else that writes an existing row is a queued task of that item,
which a batch skips.

`wait()` (and so `wait_idle`) returns once no pass runs and the watched folders'
refreshes are queued; `close()` stops a pass between batches and joins it.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from ktui.core.errors import DiskFullError, KnowledgeError, NotFoundError, StoreError
from ktui.core.models import CONTAINER_TYPES, ItemPhase, ItemStatus, KnowledgeBase, KnowledgeItem
from ktui.core.runtime.heartbeat import sweep_room
from ktui.core.runtime.queue import TaskKind

if TYPE_CHECKING:
    from ktui.core.runtime.service import KnowledgeRuntimeService

log = logging.getLogger(__name__)

SHUTDOWN_MESSAGE = "interrupted by shutdown"
DISK_FULL_PREFIX = "no space left on device"
BATCH = 500  # items per batch: one status transaction, a few ms of the catalogue's thread
PAGE = 5000  # ids per read while looking for unfinished items
CONTAINER_SWEEP = 100  # on a shared catalogue: folders and sitemaps a sweep takes, once a renewal (heartbeat.py)

Gate = Callable[[], Awaitable[None]]  # awaited before each batch (a test holds recovery there)

_writing: contextvars.ContextVar[bool] = contextvars.ContextVar("ktui_recovery_writing", default=False)


def describe_error(exc: BaseException) -> str:
    """A one-line, user-facing message for a failed item."""
    if isinstance(exc, KnowledgeError):
        return str(exc) or type(exc).__name__
    if isinstance(exc, OSError):
        return f"{exc.strerror or type(exc).__name__}: {exc.filename}" if exc.filename else str(exc)
    return f"Unexpected error: {type(exc).__name__}: {exc}"


def is_stuck(item: KnowledgeItem) -> bool:
    """Unfinished work of an earlier process (or of a full disk): `processing`, or failed
    by a shutdown or a full disk."""
    return item.status == ItemStatus.PROCESSING or (
        item.status == ItemStatus.FAILED
        and (item.error == SHUTDOWN_MESSAGE or (item.error or "").startswith(DISK_FULL_PREFIX))
    )


class _Exclusion:
    """Many workflow writes at once, or one recovery batch: a batch waits for the writes
    in flight, and new writes wait while a batch waits or runs (so a stream of writes
    cannot starve recovery). Re-entrant for writes (a reindex that restarts itself, a
    restore that deletes its half-made base)."""

    def __init__(self) -> None:
        self._cond = asyncio.Condition()
        self._writes = 0
        self._batch = False
        self._batches_waiting = 0
        self.writes_waiting = 0  # writes waiting for a batch (observable: tests, diagnostics)

    @asynccontextmanager
    async def write(self) -> AsyncIterator[None]:
        if _writing.get():
            yield
            return
        async with self._cond:
            self.writes_waiting += 1
            try:
                await self._cond.wait_for(lambda: not self._batch and self._batches_waiting == 0)
            finally:
                self.writes_waiting -= 1
            self._writes += 1
        token = _writing.set(True)
        try:
            yield
        finally:
            _writing.reset(token)
            async with self._cond:
                self._writes -= 1
                self._cond.notify_all()

    @asynccontextmanager
    async def batch(self) -> AsyncIterator[None]:
        async with self._cond:
            self._batches_waiting += 1
            try:
                await self._cond.wait_for(lambda: not self._batch and self._writes == 0)
            finally:
                self._batches_waiting -= 1
            self._batch = True
        try:
            yield
        finally:
            async with self._cond:
                self._batch = False
                self._cond.notify_all()


class Recovery:
    """Recovery passes of one runtime (see the module docstring)."""

    def __init__(self, runtime: KnowledgeRuntimeService) -> None:
        self.runtime = runtime
        self.gate: Gate | None = None
        self.remaining: int | None = None  # items this pass has still to look at; None: no pass runs
        self.error: str | None = None  # why the last pass stopped early (logged too)
        self._exclusion = _Exclusion()
        self._pass_lock = asyncio.Lock()
        self._passes = 0  # passes running or waiting to run
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None  # the first pass + resuming watches
        self._batch_task: asyncio.Task[list[str]] | None = None
        self._in_batch = False
        self._containers_at: float | None = None  # loop time of the last containers' sweep (shared catalogue)
        self._stopping = False
        self._held_refreshes: dict[str, str] = {}  # item id -> base id, asked for during a pass

    # --- what callers see ----------------------------------------------------

    @property
    def running(self) -> bool:
        """A pass runs (or the first one has not resumed the watched folders yet)."""
        return not self._idle.is_set()

    async def wait(self) -> None:
        """Until no pass runs and the watched folders' refreshes are queued."""
        await self._idle.wait()

    def writing(self) -> Any:
        """Context manager for a workflow write (delete / reindex / delete-base): it never
        overlaps a recovery batch."""
        return self._exclusion.write()

    @property
    def writes_waiting(self) -> int:
        """Workflow writes waiting for a batch to end."""
        return self._exclusion.writes_waiting

    def forget_held(self, item_id: str) -> None:
        self._held_refreshes.pop(item_id, None)

    def hold_refresh(self, base_id: str, item_id: str) -> bool:
        """While a pass runs, keep a folder refresh for its end (True when held)."""
        if not self.running or self._stopping:
            return False
        self._held_refreshes[item_id] = base_id
        return True

    # --- lifecycle -------------------------------------------------------------

    def start(self, *, then: Callable[[], Awaitable[None]], gate: Gate | None = None) -> None:
        """The first pass in the background, then `then()` (resume the watched folders)."""
        self.gate = gate
        self._enter()
        self._task = asyncio.get_running_loop().create_task(self._first(then), name="ktui-recovery")

    async def _first(self, then: Callable[[], Awaitable[None]]) -> None:
        try:
            try:
                await self._pass()
            except DiskFullError as exc:  # reads still work; the work waits for space
                self.runtime.pause_for_space(exc)
            except asyncio.CancelledError:
                raise
            except Exception:
                pass  # reported by the pass
            if not self._stopping:
                try:
                    await then()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("could not resume the watched folders")
        finally:
            self._leave()

    async def run_pass(self) -> list[str]:
        """One pass now, after any running one (space came back; `doctor --repair`).
        Returns the ids re-queued; DiskFullError propagates (the caller pauses)."""
        self._enter()
        try:
            return await self._pass()
        finally:
            self._leave()

    async def close(self) -> None:
        """Stop between batches: a batch that started finishes (nothing half-written), one
        waiting to start is dropped. What was not reached stays as it was found, for the
        next open."""
        self._stopping = True
        self._held_refreshes.clear()
        batch = self._batch_task
        if batch is not None and not self._in_batch:
            batch.cancel()
        if self._task is not None:
            self._task.cancel()
        for task in (batch, self._task):
            if task is not None:
                await asyncio.gather(task, return_exceptions=True)

    def _enter(self) -> None:
        self._passes += 1
        self._idle.clear()

    def _leave(self) -> None:
        self._passes -= 1
        if self._passes == 0:
            held, self._held_refreshes = self._held_refreshes, {}
            self._idle.set()
            for item_id, base_id in held.items():
                self.runtime.request_refresh(base_id, item_id)
        self._changed()

    def _report(self, exc: BaseException) -> None:
        self.error = describe_error(exc)
        log.error("recovery of unfinished work stopped: %s", self.error, exc_info=exc)

    def _changed(self) -> None:
        if not self.runtime.closed:
            self.runtime.figures.changed()

    # --- a pass ------------------------------------------------------------------

    async def _pass(self) -> list[str]:
        async with self._pass_lock:
            if self._stopping:
                return []
            self.error = None
            try:
                return await self._recover()
            except (DiskFullError, asyncio.CancelledError):
                raise
            except Exception as exc:
                self._report(exc)
                raise
            finally:
                self.remaining = None
                self._changed()

    def sweep_containers_next(self) -> None:
        """The next pass sweeps folders and sitemaps too (shared catalogue), not only once a
        renewal: another process added a root or gave its claims back (heartbeat.py)."""
        self._containers_at = None

    async def _look(self) -> list[str]:
        """The ids of every unfinished item, roots first, in short reads. On a shared
        catalogue (claims.py) only those this process just claimed: the others' items are
        theirs, and a dead process's come back here once their claims expire."""
        claims = self.runtime.claims
        if claims.shared:  # a fair share of leaves (heartbeat.py), containers apart and less often
            now = asyncio.get_running_loop().time()
            containers = self._containers_at is None or now - self._containers_at >= claims.heartbeat_every
            if containers:
                self._containers_at = now
            room = sweep_room(self.runtime.queue, self.runtime.settings.concurrency)
            return await claims.beat(room, containers=CONTAINER_SWEEP if containers else 0)
        roots: list[str] = []
        below: list[str] = []
        items = self.runtime.items
        for status in (ItemStatus.PROCESSING, ItemStatus.FAILED):
            after = 0
            while not self._stopping:
                page = await items.unfinished_page(
                    status, after, PAGE, errors=(SHUTDOWN_MESSAGE,), error_prefix=DISK_FULL_PREFIX
                )
                for _, item_id, root in page:
                    (roots if root else below).append(item_id)
                self.remaining = len(roots) + len(below)
                if len(page) < PAGE:
                    break
                after = page[-1][0]
        return roots + below

    async def _recover(self) -> list[str]:
        ids = await self._look()
        self.remaining = len(ids)
        self._changed()
        requeued: list[str] = []
        waiting: list[str] = []
        for start in range(0, len(ids), BATCH):
            if self._stopping:
                return requeued
            if self.gate is not None:
                await self.gate()
            batch = ids[start : start + BATCH]
            requeued += await self._in_exclusion(functools.partial(self._batch, batch, waiting))
            self.remaining = max(0, len(ids) - start - len(batch))
            self._changed()
        for start in range(0, len(waiting), BATCH):
            if self._stopping:
                break
            await self._in_exclusion(functools.partial(self._reconcile, waiting[start : start + BATCH]))
        if self.runtime.claims.shared:
            # claimed but not queued by this pass: free for the others again, except what
            # this queue already has (its task runs under that claim; released, its
            # completion would be refused)
            queue = self.runtime.queue
            await self.runtime.claims.release(sorted(i for i in set(ids) - set(requeued) if not queue.is_active(i)))
        return requeued

    async def _in_exclusion(self, work: Callable[[], Awaitable[list[str]]]) -> list[str]:
        """Run one batch exclusively of the workflow's writes, in a task of its own: a
        close() that cancels the pass lets a started batch finish."""

        async def run() -> list[str]:
            async with self._exclusion.batch():
                if self._stopping:
                    return []
                self._in_batch = True
                try:
                    return await work()
                finally:
                    self._in_batch = False

        self._batch_task = asyncio.get_running_loop().create_task(run(), name="ktui-recovery-batch")
        try:
            return await asyncio.shield(self._batch_task)
        finally:
            if self._batch_task.done():
                self._batch_task = None

    async def _batch(self, ids: Sequence[str], waiting: list[str]) -> list[str]:
        runtime = self.runtime
        usable = {b.id: b for b in await runtime.bases.list_all() if b.is_usable}
        fresh = [
            i for i in await runtime.items.get_many(ids)
            if i.base_id in usable and is_stuck(i) and not runtime.queue.is_active(i.id)
        ]
        requeued: list[str] = []
        leaves = [i for i in fresh if i.type not in CONTAINER_TYPES]
        for item in (i for i in fresh if i.type in CONTAINER_TYPES):
            try:
                if await self._container(item, usable[item.base_id]):
                    requeued.append(item.id)
                else:
                    waiting.append(item.id)
            except NotFoundError:
                continue  # removed with a folder that is being prepared again
        requeued += await self._leaves(leaves)
        return requeued

    async def _container(self, item: KnowledgeItem, base: KnowledgeBase) -> bool:
        """Prepare again (True) or leave waiting on its children (False)."""
        runtime = self.runtime
        # A top-level folder with no children never got through preparing: accepted (or
        # force-reindexed) and still queued when the process died. Reconciling it would
        # mark it completed with nothing in it, so prepare it again.
        unprepared = item.group_id is None and not await runtime.items.has_children(item.id)
        if item.phase != ItemPhase.PREPARING and not unprepared:
            return False
        # `preparing`, not a bare `processing`: that would be reconciled from the (now
        # absent) children to `completed`, and a second crash would keep it
        holding = runtime.claims.holding if runtime.claims.shared else None
        written = await runtime.state.set_status(item.id, ItemStatus.PROCESSING, ItemPhase.PREPARING, guard=holding)
        if holding is not None and not written:  # shared: finished since it was read (no longer held): skipped
            raise NotFoundError("item", item.id)
        # vectors before rows: leaves indexed before the crash must not leave chunks
        # behind that belong to no item
        leaves = [i.id for i in await runtime.items.leaves_under([item.id]) if i.id != item.id]
        try:
            await runtime.delete_vectors(base, leaves)
        except StoreError as exc:  # keep the rows; say why it stopped
            await runtime.state.set_status(item.id, ItemStatus.FAILED,
                                           error=f"Could not resume after a crash: {describe_error(exc)}")
            return False
        await runtime.state.delete_children(item.base_id, item.id)
        runtime.queue.enqueue(TaskKind.PREPARE_ROOT, item.base_id, item.id)
        return True

    async def _leaves(self, leaves: list[KnowledgeItem]) -> list[str]:
        """Re-queue stuck leaves: one status write for the batch, then the queue (no await
        between them, so no one sees them `processing` and not queued)."""
        runtime = self.runtime
        for attempt in range(8):
            if attempt:  # a folder's refresh removed one meanwhile: look again
                leaves = [i for i in await runtime.items.get_many([i.id for i in leaves])
                          if is_stuck(i) and not runtime.queue.is_active(i.id)]
            rewrite = [i.id for i in leaves if i.status != ItemStatus.PROCESSING or i.phase is not None]
            holding = runtime.claims.holding if runtime.claims.shared else None
            try:
                changed = await runtime.state.set_status_many(rewrite, ItemStatus.PROCESSING, guard=holding)
            except NotFoundError:
                continue
            if holding is not None and rewrite:  # shared: one that completed since it was read is not held
                gone = set(rewrite) - {i.id for i in changed}
                leaves = [i for i in leaves if i.id not in gone]
            by_base: dict[str, list[str]] = {}
            for item in leaves:
                by_base.setdefault(item.base_id, []).append(item.id)
            for base_id, ids in by_base.items():
                runtime.queue.enqueue_many(TaskKind.INDEX_LEAF, base_id, ids)
            return [i.id for i in leaves]
        log.warning("recovery skipped %d items that kept changing", len(leaves))
        return []

    async def _reconcile(self, container_ids: Sequence[str]) -> list[str]:
        for container_id in container_ids:
            try:
                await self.runtime.state.reconcile(container_id)
            except NotFoundError:
                continue
        return []
