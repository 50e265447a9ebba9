"""Another process reset an item this one is working on: stop the task, as a local reset would.

On a shared catalogue (PostgreSQL) a delete, a reindex or a base delete may be asked in
any process, while the item's task runs in another. The reference design's write rules
(nothing written for an interrupted item, its vectors and state left to whoever reset
it) must hold across them, so a reset works in two halves:

* **the resetting process** takes the items' claims first (:func:`taking_over`, before
  it marks them unfinished or removes their vectors): from that moment the old holder's
  completion and phase writes are refused in their own transactions (claims.py), so
  nothing of the old generation lands whatever the timing; the claims also keep every
  sweep away from the items until the reset is done. Taking them notifies the others
  (``ls``), and its deletes notify by themselves (``ir`` per row, cascades included,
  ``br`` for a base);
* **the process that runs the task** (:class:`RemoteInterrupts`, fed the other
  processes' notifications by remote.py) interrupts its task for an item removed
  (``ir``), taken (``ls``) or of a base removed (``br``) exactly as a local delete or
  reindex does (queue.py: a pending task dropped, a running one stopped at once, even
  in the middle of an embedding request), and checks, for an item it runs that another
  process changed (``ic``, e.g. after an expired claim was swept up there), whether it
  still holds it. An interrupted task writes nothing and gives back what it held.

The notifications only make the task stop early; the guarded writes are what keeps the
old generation out, so a notification lost with a connection costs time, not data.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from ktui.core.runtime.queue import InterruptReason

if TYPE_CHECKING:
    from ktui.core.runtime.service import KnowledgeRuntimeService

log = logging.getLogger(__name__)

Payload = dict[str, Any]


@asynccontextmanager
async def taking_over(runtime: KnowledgeRuntimeService, item_ids: Sequence[str]) -> AsyncIterator[None]:
    """Hold these items' claims while a delete or reindex resets them (see the module
    docstring); on the way out give back those this process did not queue (a reindex's
    queued items keep theirs for their task; a deleted item's claim went with its row)."""
    claims = runtime.claims
    if not claims.shared or not item_ids:
        yield
        return
    seized = await claims.seize(item_ids)
    try:
        yield
    finally:
        idle = [i for i in seized if not runtime.queue.is_active(i)]
        if idle:
            try:
                await asyncio.shield(claims.release(idle))
            except Exception as exc:  # they expire by themselves
                log.warning("could not give back %d claim(s) after a reset: %s", len(idle), exc)


class RemoteInterrupts:
    """Stops this process's tasks for what another process reset (module docstring).
    `feed` is called on the event loop with each batch of the other processes' payloads."""

    def __init__(self, runtime: KnowledgeRuntimeService) -> None:
        self._runtime = runtime
        self._checks: set[asyncio.Task[None]] = set()  # strong references: the loop keeps weak ones

    def feed(self, payloads: list[Payload]) -> None:
        queue = self._runtime.queue
        removed: list[str] = []
        taken: list[str] = []
        changed: list[str] = []
        bases: list[str] = []
        for p in payloads:
            kind, item_id = p.get("k"), p.get("i")
            if kind == "br" and isinstance(p.get("b"), str):
                bases.append(p["b"])
            elif not isinstance(item_id, str) or not queue.is_active(item_id):
                continue
            elif kind == "ir":
                removed.append(item_id)
            elif kind == "ls":
                taken.append(item_id)
            elif kind == "ic" and queue.is_running(item_id):
                changed.append(item_id)
        for base_id in dict.fromkeys(bases):
            affected = queue.interrupt_base(base_id, InterruptReason.BASE_DELETE)
            self._spawn(self._forget_base(base_id, affected))
        if removed:
            queue.interrupt(removed, InterruptReason.DELETE)
        if taken:
            queue.interrupt(taken, InterruptReason.REINDEX)
        if changed:
            self._spawn(self._check_held(changed))

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work, name="ktui-remote-interrupt")
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _forget_base(self, base_id: str, affected: set[str]) -> None:
        """Once its tasks here have settled, drop what this process kept for the base."""
        await self._runtime.queue.wait_settled(affected)
        self._runtime.forget_base(base_id)

    async def _check_held(self, item_ids: list[str]) -> None:
        """Items another process changed while they run here: stop those no longer held."""
        try:
            held = set(await self._runtime.claims.held(item_ids))
        except Exception as exc:  # the next guarded write decides anyway
            log.warning("could not look up this process's claims: %s", exc)
            return
        lost = [i for i in item_ids if i not in held and self._runtime.queue.is_running(i)]
        if lost:
            self._runtime.queue.interrupt(lost, InterruptReason.TAKEN_OVER)

    async def close(self) -> None:
        for task in list(self._checks):
            task.cancel()
        await asyncio.gather(*self._checks, return_exceptions=True)
