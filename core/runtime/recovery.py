"""Recovery at open: what a shutdown interrupted or a crash left `processing` runs again.

Kept apart from the task code because its rules are about the catalogue's state,
not about running a task: which items count as stuck, why a container that was
still preparing loses its partial children and prepares again (vectors before
rows), and why one waiting on children is only reconciled. Runs once, in the
process that holds the data directory, never in a reader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktui.core.errors import KnowledgeError, NotFoundError, StoreError
from ktui.core.models import CONTAINER_TYPES, ItemPhase, ItemStatus, KnowledgeItem
from ktui.core.runtime.queue import TaskKind

if TYPE_CHECKING:
    from ktui.core.runtime.service import KnowledgeRuntimeService

SHUTDOWN_MESSAGE = "interrupted by shutdown"
DISK_FULL_PREFIX = "no space left on device"


def describe_error(exc: BaseException) -> str:
    """A one-line, user-facing message for a failed item."""
    if isinstance(exc, KnowledgeError):
        return str(exc) or type(exc).__name__
    if isinstance(exc, OSError):
        return f"{exc.strerror or type(exc).__name__}: {exc.filename}" if exc.filename else str(exc)
    return f"Unexpected error: {type(exc).__name__}: {exc}"


async def recover(runtime: KnowledgeRuntimeService) -> list[str]:
    """Re-queue what a shutdown interrupted or a crash left `processing`, so nothing stays stuck.

    Containers that were still preparing lose their partial children and prepare
    again; containers waiting on children are reconciled (their leaves re-queue).
    """
    stuck = await runtime.items.by_status([ItemStatus.PROCESSING, ItemStatus.FAILED])
    stuck = [
        i for i in stuck
        if (i.status == ItemStatus.PROCESSING or i.error == SHUTDOWN_MESSAGE
            or (i.error or "").startswith(DISK_FULL_PREFIX))
        and not runtime.queue.is_active(i.id)
    ]
    usable = {b.id: b for b in await runtime.bases.list_all() if b.is_usable}
    requeued: list[str] = []
    waiting_containers: list[KnowledgeItem] = []
    # Roots first: re-preparing a folder drops its whole subtree, so stuck items below
    # it may be gone by the time the loop reaches them (skipped, not an error).
    stuck.sort(key=lambda i: i.group_id is not None)
    for item in stuck:
        if item.base_id not in usable:
            continue
        try:
            if item.type in CONTAINER_TYPES:
                # A top-level folder with no children never got through preparing: accepted
                # (or force-reindexed) and still queued when the process died. Reconciling
                # it would mark it completed with nothing in it, so prepare it again.
                unprepared = item.group_id is None and not await runtime.items.children(item.id)
                if item.phase == ItemPhase.PREPARING or unprepared:
                    # `preparing`, not a bare `processing`: that would be reconciled from the
                    # (now absent) children to `completed`, and a second crash would keep it
                    await runtime.state.set_status(item.id, ItemStatus.PROCESSING, ItemPhase.PREPARING)
                    # vectors before rows: leaves indexed before the crash must not
                    # leave chunks behind that belong to no item
                    leaves = [i.id for i in await runtime.items.leaves_under([item.id]) if i.id != item.id]
                    try:
                        await runtime.delete_vectors(usable[item.base_id], leaves)
                    except StoreError as exc:  # keep the rows; say why it stopped
                        await runtime.state.set_status(item.id, ItemStatus.FAILED,
                                        error=f"Could not resume after a crash: {describe_error(exc)}")
                        continue
                    await runtime.state.delete_children(item.base_id, item.id)
                    runtime.queue.enqueue(TaskKind.PREPARE_ROOT, item.base_id, item.id)
                    requeued.append(item.id)
                else:
                    waiting_containers.append(item)
            else:
                if item.status != ItemStatus.PROCESSING or item.phase is not None:
                    await runtime.state.set_status(item.id, ItemStatus.PROCESSING)
                runtime.queue.enqueue(TaskKind.INDEX_LEAF, item.base_id, item.id)
                requeued.append(item.id)
        except NotFoundError:
            continue  # removed with a folder that is being prepared again
    for container in waiting_containers:
        try:
            await runtime.state.reconcile(container.id)
        except NotFoundError:
            continue
    return requeued
