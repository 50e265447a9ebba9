"""Dataclasses and enums shared by every layer of ktui.

These are plain values: the data services build them from SQLite rows, the
runtime emits them as events, the TUI and CLI render them. Nothing here does
I/O, so every layer (including the Textual app) may import this module.

`ktui.core.models` is the import path everyone uses (part of the public API); the
definitions live in one module per kind of value:

* `enums`      item types, statuses and phases, base statuses, search modes, score kinds;
* `catalogue`  groups, bases, items and their payloads, item inputs, pages, defaults;
* `retrieval`  documents and chunks, stored chunks, search results, filters, responses;
* `embedding`  model profiles, window overflows, model listings;
* `events`     what the runtime publishes, and the queue's figures.
"""

from __future__ import annotations

from ktui.core.models.catalogue import (
    ANY_GROUP,
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_CHUNK_SIZE,
    DEFAULT_EMOJI,
    DEFAULT_HYBRID_ALPHA,
    DEFAULT_TOP_K,
    ITEM_DATA_CLASSES,
    OCR_LOW_CONFIDENCE,
    ROOT,
    WINDOW_FILL,
    BaseConfig,
    CursorPage,
    DirectoryItemData,
    FileItemData,
    GroupFilter,
    ItemData,
    ItemInput,
    KnowledgeBase,
    KnowledgeGroup,
    KnowledgeItem,
    NoteItemData,
    Page,
    SitemapItemData,
    UrlItemData,
)
from ktui.core.models.embedding import (
    EmbeddingModelInfo,
    ModelListing,
    ModelProfile,
    WindowOverflow,
)
from ktui.core.models.enums import (
    CONTAINER_TYPES,
    LEAF_TYPES,
    BaseStatus,
    ItemPhase,
    ItemStatus,
    ItemType,
    KnowledgeBaseErrorCode,
    ScoreKind,
    SearchMode,
)
from ktui.core.models.events import (
    BaseChanged,
    BaseRemoved,
    Event,
    FolderFollower,
    ItemChanged,
    ItemsAdded,
    ItemsRemoved,
    QueueStats,
    Resync,
)
from ktui.core.models.retrieval import (
    BaseSearchNotice,
    Chunk,
    ChunkRecord,
    Document,
    KnowledgeSearchResult,
    SearchFilters,
    SearchResponse,
)

__all__ = [
    "ANY_GROUP",
    "BaseChanged",
    "BaseConfig",
    "BaseRemoved",
    "BaseSearchNotice",
    "BaseStatus",
    "CONTAINER_TYPES",
    "Chunk",
    "ChunkRecord",
    "DEFAULT_CHUNK_OVERLAP",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_EMOJI",
    "DEFAULT_HYBRID_ALPHA",
    "DEFAULT_TOP_K",
    "DirectoryItemData",
    "Document",
    "EmbeddingModelInfo",
    "Event",
    "FileItemData",
    "GroupFilter",
    "ITEM_DATA_CLASSES",
    "ItemChanged",
    "ItemData",
    "ItemInput",
    "ItemPhase",
    "ItemStatus",
    "ItemType",
    "ItemsAdded",
    "ItemsRemoved",
    "KnowledgeBase",
    "KnowledgeBaseErrorCode",
    "KnowledgeGroup",
    "KnowledgeItem",
    "KnowledgeSearchResult",
    "LEAF_TYPES",
    "ModelListing",
    "ModelProfile",
    "NoteItemData",
    "OCR_LOW_CONFIDENCE",
    "Page",
    "CursorPage",
    "FolderFollower",
    "QueueStats",
    "Resync",
    "ROOT",
    "ScoreKind",
    "SearchFilters",
    "SearchMode",
    "SearchResponse",
    "SitemapItemData",
    "UrlItemData",
    "WINDOW_FILL",
    "WindowOverflow",
]
