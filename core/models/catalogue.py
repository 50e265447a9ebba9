"""Groups, bases and items as the catalogue stores them, what a caller asks to add, and a page of them."""

from __future__ import annotations

from dataclasses import dataclass
from types import EllipsisType
from typing import Any, Generic, TypedDict, TypeVar

from ktui.core.models.enums import BaseStatus, ItemPhase, ItemStatus, ItemType, KnowledgeBaseErrorCode, SearchMode

T = TypeVar("T")

ROOT = None
"""`group_id` value meaning "top level" (roots only) in `list_items`."""

ANY_GROUP: EllipsisType = ...
"""`group_id` value meaning "any parent" (roots and children) in `list_items`."""

GroupFilter = str | None | EllipsisType
"""`list_items(group_id=...)`: a container's id, ROOT (top level) or ANY_GROUP."""


@dataclass(frozen=True, slots=True)
class KnowledgeGroup:
    id: str
    name: str
    created_at: str
    updated_at: str


@dataclass(frozen=True, slots=True)
class KnowledgeBase:
    id: str
    name: str
    group_id: str | None
    emoji: str
    dimensions: int | None
    embedding_model_id: str | None
    status: BaseStatus
    error: KnowledgeBaseErrorCode | None
    rerank_model_id: str | None
    chunk_size: int
    chunk_overlap: int
    threshold: float | None
    document_count: int | None
    search_mode: SearchMode
    hybrid_alpha: float | None
    created_at: str
    updated_at: str
    # OCR of this base's images and scanned PDF pages; None follows the settings' [ocr]
    ocr_enabled: bool | None = None
    ocr_languages: str | None = None  # Tesseract codes joined by "+", e.g. "eng+deu"
    ocr_max_pages: int | None = None  # pages recognised per file
    # Why the base's chunk store cannot be used (missing, or damaged and set aside as
    # *.corrupt-<time>); None when it is fine or not yet known. Not stored: the facade
    # fills it in from the store files whenever it hands out a base.
    store_problem: str | None = None

    @property
    def is_usable(self) -> bool:
        """A failed base keeps its data but cannot index or search until restored."""
        return self.status == BaseStatus.COMPLETED

    @property
    def needs_rebuild(self) -> bool:
        """The store is gone or damaged: reindex the whole base (`reindex_items(all roots,
        force=True)`, `ktui reindex BASE --all`) to rebuild it from the items' sources."""
        return self.store_problem is not None

    @property
    def top_k(self) -> int:
        return self.document_count if self.document_count is not None else DEFAULT_TOP_K


class BaseConfig(TypedDict, total=False):
    """The optional settings `create_base(name, model, dimensions, **config)` takes
    (each is validated at run time; the names match KnowledgeBase's fields)."""

    emoji: str
    group_id: str | None
    rerank_model_id: str | None
    chunk_size: int
    chunk_overlap: int
    threshold: float | None
    document_count: int | None
    search_mode: SearchMode | str
    hybrid_alpha: float | None


DEFAULT_TOP_K = 10
DEFAULT_EMOJI = "📁"
DEFAULT_CHUNK_SIZE = 1024
DEFAULT_CHUNK_OVERLAP = 200
DEFAULT_HYBRID_ALPHA = 0.5  # measured per model in core/embeddings/profiles.py
# Share of a model's input window a new base's chunks may fill: the chunker counts its
# own tokens (core/ingest/tokens.py), a model's tokenizer usually a few more.
WINDOW_FILL = 0.8


@dataclass(frozen=True, slots=True)
class ItemInput:
    """What a caller asks to add: a type and its raw payload (validated by the service)."""

    type: ItemType | str
    data: dict[str, Any]


# Per-type payloads, as stored in knowledge_item.data (JSON). `source` is filled
# by the service: the absolute path of a file/directory or the URL.


OCR_LOW_CONFIDENCE = 70.0
"""A recognised page whose words average a confidence (0-100) below this is listed in the
item's `ocr.low_confidence_pages`: worth checking by eye."""


@dataclass(frozen=True, slots=True)
class FileItemData:
    path: str
    source: str
    size: int | None = None  # bytes, recorded when the file was last read
    mtime_ns: int | None = None  # modification time, recorded when last read
    sha256: str | None = None  # content hash, recorded when last read
    chunking: str | None = None  # "chunk_size/chunk_overlap" it was indexed with
    ocr: dict[str, Any] | None = None  # pages recognised and mean confidence (OcrReport.summary)
    window_overflow: dict[str, Any] | None = None  # chunks past the model's input window (WindowOverflow)


@dataclass(frozen=True, slots=True)
class UrlItemData:
    url: str
    source: str
    window_overflow: dict[str, Any] | None = None  # chunks past the model's input window (WindowOverflow)


@dataclass(frozen=True, slots=True)
class NoteItemData:
    content: str
    source: str
    source_url: str | None = None
    window_overflow: dict[str, Any] | None = None  # chunks past the model's input window (WindowOverflow)


@dataclass(frozen=True, slots=True)
class DirectoryItemData:
    path: str
    source: str
    watch: bool = False
    # what the last walk left out: {"total", "counts": {reason: n}, "examples": {reason: [rel paths]}}
    skipped: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class SitemapItemData:
    url: str
    source: str


ItemData = FileItemData | UrlItemData | NoteItemData | DirectoryItemData | SitemapItemData

ITEM_DATA_CLASSES: dict[ItemType, type] = {
    ItemType.FILE: FileItemData,
    ItemType.URL: UrlItemData,
    ItemType.NOTE: NoteItemData,
    ItemType.DIRECTORY: DirectoryItemData,
    ItemType.SITEMAP: SitemapItemData,
}


@dataclass(frozen=True, slots=True)
class KnowledgeItem:
    id: str
    base_id: str
    group_id: str | None
    type: ItemType
    data: ItemData
    status: ItemStatus
    phase: ItemPhase | None
    error: str | None
    created_at: str
    updated_at: str

    @property
    def source(self) -> str:
        return self.data.source

    @property
    def is_root(self) -> bool:
        return self.group_id is None

    @property
    def display_name(self) -> str:
        """A short label: the file name, the URL, or the first line of a note."""
        if isinstance(self.data, NoteItemData):
            first = self.data.content.strip().splitlines()[0] if self.data.content.strip() else ""
            return (first[:60] + "…") if len(first) > 60 else (first or "(empty note)")
        src = self.data.source
        if isinstance(self.data, (FileItemData, DirectoryItemData)):
            name = src.rstrip("/").rsplit("/", 1)[-1]
            return name or src
        return src


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    total: int
    page: int
    limit: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.limit))


@dataclass(frozen=True, slots=True)
class CursorPage(Generic[T]):
    """One page of a keyset listing (`KnowledgeService.list_items_after`): its items, and
    the opaque cursor that continues after the last of them (None when there are no more).
    Unlike `Page` it carries no total: counting the rows again for every page is what
    made listing a large base by page numbers quadratic."""

    items: list[T]
    next_cursor: str | None
