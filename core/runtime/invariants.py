"""Store/catalogue invariants, checked by tests and the reliability suite.

* no chunk without its item (every chunk's item_id is a leaf item of that base);
* no FTS row without its chunk, no item with two copies of its chunks, the
  in-memory matrix in step with the rows (delegated to BaseStore.check_invariants);
* once the queue is idle (and no recovery runs), no item is `processing`;
* every usable base's store opens (a missing or corrupt file is reported, naming it).
"""

from __future__ import annotations

import asyncio

from ktui.core.data.base_service import KnowledgeBaseService
from ktui.core.data.item_service import KnowledgeItemService
from ktui.core.errors import StoreError
from ktui.core.models import CONTAINER_TYPES, ItemStatus
from ktui.core.runtime.service import KnowledgeRuntimeService


async def check_invariants(
    bases: KnowledgeBaseService, items: KnowledgeItemService, runtime: KnowledgeRuntimeService
) -> list[str]:
    problems: list[str] = []
    # while recovery runs, what it has not reached yet is `processing` with nothing queued
    idle = runtime.queue.pending_count == 0 and runtime.queue.running_count == 0 and not runtime.recovery.running
    for base in await bases.list_all():
        base_items = await items.list_all(base.id)
        leaves = {i.id for i in base_items if i.type not in CONTAINER_TYPES}
        if idle:
            stuck = [i for i in base_items if i.status == ItemStatus.PROCESSING]
            problems += [f"base {base.name}: item {i.id} ({i.source}) still processing while idle" for i in stuck]
        if not base.is_usable:
            continue
        try:
            store = await runtime.store(base)
            problems += [f"base {base.name}: {p}" for p in await asyncio.to_thread(store.check_invariants)]
            orphans = await asyncio.to_thread(store.item_ids)
        except StoreError as exc:  # a missing or corrupt store is a finding, not a crash of the check
            problems.append(f"base {base.name}: {exc}")
            continue
        for item_id in sorted(orphans - leaves):
            problems.append(f"base {base.name}: chunks of item {item_id} which is not a leaf item of the base")
    return problems
