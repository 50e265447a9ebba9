"""The heartbeat of a runtime on a shared catalogue: renew its claims, and keep its queue
fed with a fair share of the work nobody holds (claims.py, recovery.py).

**Fair share.** Every process sweeps only what it can start soon: one item per worker
plus a short read-ahead (:func:`claim_budget`), never a big backlog. A greedy sweep (it
used to top the queue up to 200 items) let the first idle process claim the whole
queue, and a second one, started a moment later, found nothing left to do; with small
sweeps, every live process takes a handful, and takes the next handful as soon as half
of its read-ahead has started (:func:`wants_work`). Items a process claimed but has not
started are the only ones another process cannot take, so at most ``claim_budget`` items
per process are out of the others' reach, and a dead process's come back when its leases
expire, a closed one's at once (its claims are given back).

**When it sweeps.** Right after a task of its own ends, while the last sweep found work
(there may be more: no second of idling between handfuls); as soon as there is room once
another process *offered* work (:meth:`Heartbeat.work_offered`: it added items, which this
process hears over LISTEN/NOTIFY, remote.py), as if the last sweep had found some;
otherwise every ``idle_sweep_every`` seconds while it wants work (the fallback for work
nobody announced: a dead process's expired leases, a lost notification); and at every
renewal, every ``heartbeat_every``. Waiting out the idle timer instead of the
announcement made a second process join a 300-note backlog 0.6–1.0 s late, a fifth of
the run (tests/benchmarks/test_bench_postgres_serve_indexers.py).
Folders and sitemaps are swept apart, once a renewal (recovery.py): a folder waiting on
its children stays `processing` and unleased, and must not crowd leaves out of a small
sweep.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from ktui.core.errors import DiskFullError
from ktui.core.runtime.queue import TaskQueue

if TYPE_CHECKING:
    from ktui.core.runtime.service import KnowledgeRuntimeService

log = logging.getLogger(__name__)

SWEEP_AHEAD = 8  # leaves claimed beyond one per worker (at least `concurrency`): the read-ahead of a shared queue


def claim_budget(concurrency: int) -> int:
    """How many items a process of this concurrency keeps queued or running on a shared
    catalogue: a round running and about a round (at least SWEEP_AHEAD) started next."""
    return concurrency + max(concurrency, SWEEP_AHEAD)


def sweep_room(queue: TaskQueue, concurrency: int) -> int:
    """How many leaves a sweep may claim now: the budget less what the queue holds."""
    return max(0, claim_budget(concurrency) - queue.pending_count - queue.running_count)


def offers_work(payloads: Iterable[Mapping[str, object]]) -> bool:
    """Whether a batch of another process's notifications (remote.py) announces work this
    one may sweep: items added (``ia``; they start `processing`, and the adder holds at
    most a handful of them at a time), or claims a closing process gave back (``rel``,
    work_claims.py)."""
    return any(p.get("k") in ("ia", "rel") for p in payloads)


def offers_containers(payloads: Iterable[Mapping[str, object]]) -> bool:
    """Whether that work may be a folder or sitemap (swept apart, and otherwise only once
    a renewal): claims given back, or a root added (a folder is always a root)."""
    return any(p.get("k") == "rel" or (p.get("k") == "ia" and p.get("g") is None) for p in payloads)


def wants_work(queue: TaskQueue, concurrency: int) -> bool:
    """True once at least half of the read-ahead has started (or a worker is free): time
    for the next handful, before the workers run dry."""
    refill = max(1, (claim_budget(concurrency) - concurrency) // 2)
    return queue.paused is None and sweep_room(queue, concurrency) >= refill


class Heartbeat:
    """The background task of one runtime on a shared catalogue (see the module docstring)."""

    def __init__(self, runtime: KnowledgeRuntimeService, *, sweep: bool):
        self.runtime = runtime
        self.sweep = sweep  # False: renew only (one-shot commands never take others' work)
        self._changed = asyncio.Event()  # a task of this queue started or ended: maybe room for more
        self._offered = False  # another process added work since the last sweep
        self._wake = asyncio.Event()  # set with _offered: ends an idle wait at once
        self.sweeps = 0  # sweeps run (observable: tests, diagnostics)

    def queue_changed(self) -> None:
        self._changed.set()

    def work_offered(self) -> None:
        """Another process added items nobody may hold yet: sweep as soon as this queue has
        room, instead of at the next idle timer. Many announcements before that sweep
        cost one sweep; the sweep still takes only this process's fair share."""
        if not self.sweep:
            return  # renew only: never takes others' work
        self._offered = True
        self._wake.set()
        self._changed.set()

    async def run(self) -> None:
        runtime, claims = self.runtime, self.runtime.claims
        queue, concurrency = runtime.queue, runtime.settings.concurrency
        loop = asyncio.get_running_loop()
        step = min(claims.idle_sweep_every, claims.heartbeat_every) if self.sweep else claims.heartbeat_every
        last = loop.time()
        fruitful = False  # the last sweep found work: sweep again as soon as there is room
        while True:
            fruitful = fruitful or self._offered  # offered during the last sweep: not lost
            if self.sweep and fruitful:
                self._changed.clear()
                if not wants_work(queue, concurrency):
                    await _wait(self._changed, step)
            elif self.sweep:
                self._wake.clear()
                await _wait(self._wake, step)
            else:
                await asyncio.sleep(step)
            if self._offered:  # from now on, like a sweep that found work
                self._offered = False
                fruitful = True
            wanted = self.sweep and wants_work(queue, concurrency)
            due = loop.time() - last >= claims.heartbeat_every
            if not due and not wanted:
                continue
            try:
                if self.sweep:
                    self.sweeps += 1
                    fruitful = bool(await runtime.recovery.run_pass())  # renews, then sweeps (Recovery._look)
                else:
                    await claims.beat(0)  # renew only
                if due:  # the import and folder leases at renewals only (following.py)
                    last = loop.time()
                    await runtime.beat_process_leases()
            except asyncio.CancelledError:
                raise
            except DiskFullError as exc:
                fruitful = False
                runtime.pause_for_space(exc)
            except Exception as exc:  # the server is away: the next beat tries again
                fruitful = False  # (claims' errors are StoreErrors, their URL scrubbed)
                log.warning("could not renew this process's claims: %s", str(exc) or type(exc).__name__)


async def _wait(event: asyncio.Event, timeout: float) -> None:
    """Until `event` is set or `timeout` seconds have passed."""
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except TimeoutError:
        pass


__all__ = ["SWEEP_AHEAD", "Heartbeat", "claim_budget", "offers_containers", "offers_work", "sweep_room",
           "wants_work"]
