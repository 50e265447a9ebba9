"""Failing items on a shared catalogue: the claim check and the vector removal in one write.

On one writer (SQLite) a failed item's vectors are removed, then its failure recorded
(service.py ``fail``, batches.py ``fail_many``). On PostgreSQL the process whose claim
expired may still be running the item's task while another process, which took the
item over, has written new vectors for it: removing "the item's vectors" then would
delete that one's work. So there the claim is checked first inside the catalogue
transaction that records the failure, the held items' vectors are removed in a
savepoint of it (claims.py ``failing``), and the three commit together or not at all;
an item no longer held is left exactly as its new holder has it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ktui.core.errors import KnowledgeError, NotFoundError
from ktui.core.models import ItemStatus, KnowledgeBase
from ktui.core.runtime.recovery import describe_error

if TYPE_CHECKING:
    from ktui.core.runtime.service import KnowledgeRuntimeService


async def fail_held(
    runtime: KnowledgeRuntimeService, base: KnowledgeBase, item_ids: Sequence[str], message: str, *,
    remove_vectors: bool = True,
) -> None:
    """Fail these items of one base with `message`, only those this process still holds
    (module docstring). A store that cannot remove the vectors is said on the items (then
    recorded under the plain claim guard); an item deleted meanwhile leaves the others to
    be failed one by one. Never raises for a vanished item."""
    ids = list(dict.fromkeys(item_ids))
    if not ids:
        return
    claims = runtime.claims
    try:
        if remove_vectors and base.dimensions is not None:
            async with runtime.lock(base.id):
                store = await runtime.store(base)
                await runtime.state.set_status_many(ids, ItemStatus.FAILED, error=message,
                                                    guard=claims.failing(store, ids))
            return
    except NotFoundError:
        await _one_by_one(runtime, base, ids, message, remove_vectors=remove_vectors)
        return
    except Exception as exc:  # the store itself is broken (nothing was written): say so on the items
        message = f"{message} (and its vectors could not be removed: {describe_error(exc)})"
    try:
        await runtime.state.set_status_many(ids, ItemStatus.FAILED, error=message, guard=claims.guard)
    except NotFoundError:
        await _one_by_one(runtime, base, ids, message, remove_vectors=False)
    except KnowledgeError:
        pass  # as on one writer: the failure is not recorded, the item comes back to a sweep


async def _one_by_one(runtime: KnowledgeRuntimeService, base: KnowledgeBase, ids: list[str], message: str, *,
                      remove_vectors: bool) -> None:
    if len(ids) > 1:
        for item_id in ids:
            await fail_held(runtime, base, [item_id], message, remove_vectors=remove_vectors)
