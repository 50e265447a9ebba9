"""What the workflow's parts share: their collaborators, and small helpers about items."""

from __future__ import annotations

import logging
import os
from typing import Any

from ktui.core.config import Settings
from ktui.core.data.base_service import KnowledgeBaseService
from ktui.core.data.item_service import KnowledgeItemService
from ktui.core.embeddings import EmbeddingService
from ktui.core.errors import (
    ValidationError,
)
from ktui.core.models import (
    DirectoryItemData,
    FileItemData,
    ItemType,
    KnowledgeBase,
    KnowledgeItem,
    NoteItemData,
    SearchMode,
)
from ktui.core.runtime.events import EventBus
from ktui.core.runtime.service import KnowledgeRuntimeService
from ktui.core.store import Stores

log = logging.getLogger(__name__)

BASE_DELETE_FAILED = "interrupted: deleting the knowledge base failed"


def resolve_mode(base: KnowledgeBase, mode: Any) -> SearchMode:
    if mode is None:
        return base.search_mode
    try:
        return SearchMode(mode)
    except ValueError:
        raise ValidationError.field("mode", "must be one of hybrid, vector (or default), bm25") from None




class WorkflowParts:
    """The collaborators every part of the workflow works with (the facade passes them in)."""

    def __init__(
        self,
        *,
        settings: Settings,
        bases: KnowledgeBaseService,
        items: KnowledgeItemService,
        runtime: KnowledgeRuntimeService,
        stores: Stores,
        embeddings: EmbeddingService,
        bus: EventBus,
    ):
        self.settings = settings
        self.bases = bases
        self.items = items
        self.runtime = runtime
        self.state = runtime.state  # every catalogue write goes through it, with its event
        self.stores = stores
        self.embeddings = embeddings
        self.bus = bus

    async def _item_of(self, base_id: Any, item_id: Any) -> tuple[KnowledgeBase, KnowledgeItem]:
        base = await self.bases.get(base_id)
        item = await self.items.get(item_id)
        if item.base_id != base.id:
            raise ValidationError.field("item_id", f"item {item.id} belongs to another knowledge base")
        return base, item




def payload_of(item: KnowledgeItem) -> dict[str, Any]:
    """The add-items payload that re-creates a root item elsewhere (restore, export)."""
    data = item.data
    if isinstance(data, NoteItemData):
        payload: dict[str, Any] = {"content": data.content}
        if data.source_url:
            payload["source_url"] = data.source_url
        return payload
    if isinstance(data, DirectoryItemData):
        return {"path": data.path, "watch": data.watch}
    if isinstance(data, FileItemData):
        return {"path": data.path}
    return {"url": data.url}


def source_key(item_type: ItemType, data: Any) -> tuple[ItemType, str] | None:
    """What makes two root items the same source (None: items that may repeat)."""
    if item_type in (ItemType.FILE, ItemType.DIRECTORY):
        return item_type, os.path.normpath(data.path)
    if item_type in (ItemType.URL, ItemType.SITEMAP):
        return item_type, data.url
    return None
