"""Dataclasses and enums shared by every layer of ktui.

These are plain values: the data services build them from SQLite rows, the
runtime emits them as events, the TUI and CLI render them. Nothing here does
I/O, so every layer (including the Textual app) may import this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from types import EllipsisType
from typing import Any, Generic, TypedDict, TypeVar

T = TypeVar("T")

ROOT = None
"""`group_id` value meaning "top level" (roots only) in `list_items`."""

ANY_GROUP: EllipsisType = ...
"""`group_id` value meaning "any parent" (roots and children) in `list_items`."""

GroupFilter = str | None | EllipsisType
"""`list_items(group_id=...)`: a container's id, ROOT (top level) or ANY_GROUP."""


class ItemType(StrEnum):
    FILE = "file"
    URL = "url"
    NOTE = "note"
    DIRECTORY = "directory"
    SITEMAP = "sitemap"

    @property
    def is_container(self) -> bool:
        return self in CONTAINER_TYPES

    @property
    def is_leaf(self) -> bool:
        return self not in CONTAINER_TYPES


CONTAINER_TYPES = frozenset({ItemType.DIRECTORY, ItemType.SITEMAP})
LEAF_TYPES = frozenset({ItemType.FILE, ItemType.URL, ItemType.NOTE})


class ItemStatus(StrEnum):
    IDLE = "idle"
    PROCESSING = "processing"
    COMPLETED = "completed"
    FAILED = "failed"

    @property
    def is_terminal(self) -> bool:
        return self in (ItemStatus.COMPLETED, ItemStatus.FAILED)


class ItemPhase(StrEnum):
    PREPARING = "preparing"  # containers only
    READING = "reading"  # leaves only
    EMBEDDING = "embedding"  # leaves only


class BaseStatus(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"


class KnowledgeBaseErrorCode(StrEnum):
    MISSING_EMBEDDING_MODEL = "missing_embedding_model"


class SearchMode(StrEnum):
    DEFAULT = "default"  # cosine similarity over vectors
    BM25 = "bm25"  # FTS5 full-text ranking
    HYBRID = "hybrid"  # reciprocal-rank fusion of both

    @classmethod
    def _missing_(cls, value: object) -> SearchMode | None:
        """`vector` is the name users see (TUI, CLI, docs); `default` stays the stored value."""
        return cls.DEFAULT if isinstance(value, str) and value == "vector" else None


class ScoreKind(StrEnum):
    """What a result's `score` measures, so callers never compare apples to pears."""

    COSINE = "cosine"
    BM25 = "bm25"
    RRF = "rrf"  # reciprocal-rank fusion (kept for callers that fuse with it)
    FUSED = "fused"  # hybrid: convex combination of the normalised vector and bm25 scores (0..1)
    RERANK = "rerank"
    KEYWORD = "keyword"


# --- groups, bases, items -------------------------------------------------


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


# --- ingestion and store --------------------------------------------------


@dataclass(frozen=True, slots=True)
class Document:
    """Text read from one source (a file, a PDF page, a web page) with its metadata."""

    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of a document sized for embedding.

    metadata holds at least item_id, item_type, source, chunk_index, token_count,
    plus page / heading where known.
    """

    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    """A chunk as stored in a base's store (what `list_item_chunks` returns)."""

    id: str
    item_id: str
    chunk_index: int
    text: str
    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class KnowledgeSearchResult:
    page_content: str
    score: float
    score_kind: ScoreKind
    rank: int
    metadata: dict[str, Any]
    item_id: str | None
    chunk_id: str
    relevance: float = 0.0  # 0..1, comparable across kinds and bases (core/search/relevance.py)
    base_id: str | None = None  # the base the chunk belongs to
    base_rank: int | None = None  # its rank within its own base (set when several bases were merged)


@dataclass(frozen=True, slots=True)
class SearchFilters:
    """Which chunks a search may return (all when every field is empty).

    * `item_types`: the chunk's item, or a container above it, has one of these types
      (so `directory` keeps everything read from folders);
    * `source_prefix`: the item's source (absolute path or URL) starts with this;
    * `modified_after`: the item was added or last (re)indexed at or after this
      ISO-8601 time (UTC when it names no zone).
    """

    item_types: tuple[ItemType, ...] = ()
    source_prefix: str | None = None
    modified_after: str | None = None

    @property
    def active(self) -> bool:
        return bool(self.item_types or self.source_prefix or self.modified_after)


@dataclass(frozen=True, slots=True)
class BaseSearchNotice:
    """What one base of a several-base search had to say: it degraded to bm25, or its
    reranker was unreachable (`degraded` False: the results are still semantic)."""

    base_id: str
    base_name: str
    degraded: bool
    reason: str


@dataclass(frozen=True, slots=True)
class SearchResponse:
    results: list[KnowledgeSearchResult]
    degraded: bool = False
    reason: str | None = None  # why it degraded, for the user (every cause, "; "-joined)
    mode: SearchMode | None = None  # the mode that produced the results (bm25 after a fallback)
    notices: tuple[BaseSearchNotice, ...] = ()  # per base, from search_bases


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """How ktui uses one embedding model (core/embeddings/profiles.py).

    Prefixes are prepended to the text before it is embedded (and before the cache
    key is taken, so changing one never serves vectors of the other); `window_tokens`
    is the model's input window (None = no limit known), `search_mode` /
    `hybrid_alpha` what a new base on this model gets by default.
    """

    model_id: str
    family: str  # "wordllama", "e5", "nomic-embed-text", ... or "unknown"
    query_prefix: str = ""
    document_prefix: str = ""
    window_tokens: int | None = None
    search_mode: SearchMode = SearchMode.HYBRID
    hybrid_alpha: float | None = DEFAULT_HYBRID_ALPHA
    overridden: bool = False  # True when the settings file changed any of it

    def fitting_chunk_size(self) -> int | None:
        """The longest chunk a new base on this model gets (None: no window known): the
        window less headroom, because the model's tokenizer counts a few more tokens for
        the same text than the chunker's estimate does."""
        if self.window_tokens is None:
            return None
        return max(16, int(self.window_tokens * WINDOW_FILL))

    def chunk_exceeds_window(self, tokens: int) -> bool:
        return self.window_tokens is not None and tokens > self.window_tokens

    def window_warning(self, chunk_size: int | None) -> str | None:
        """What to tell the user when chunks of `chunk_size` tokens do not fit the window."""
        if chunk_size is None or not self.chunk_exceeds_window(chunk_size):
            return None
        lost = 1 - (self.window_tokens or 0) / chunk_size
        return (
            f"chunks of up to {chunk_size} tokens exceed the {self.window_tokens}-token input window of "
            f"{self.model_id}: the model cuts them, so up to {lost:.0%} of a long chunk is never embedded; "
            f"use a chunk size of at most {self.window_tokens}"
        )


@dataclass(frozen=True, slots=True)
class WindowOverflow:
    """How far an item's chunks run past its model's input window, recorded at indexing.

    Stored as a plain dict (`as_dict`) in the leaf's data under `window_overflow`
    (None there when every chunk fits or the window is unknown). Token counts are the
    chunker's estimate (core/ingest/tokens.py), the same count that sizes chunks.

    * `window_tokens`: the model's window when the item was indexed;
    * `chunks` / `over`: the item's chunks, and how many of them exceed the window;
    * `longest`: the longest chunk, in tokens;
    * `cut_share`: the share of the item's tokens past the window (never embedded), 0..1.
    """

    window_tokens: int
    chunks: int
    over: int
    longest: int
    cut_share: float

    def as_dict(self) -> dict[str, Any]:
        return {"window_tokens": self.window_tokens, "chunks": self.chunks, "over": self.over,
                "longest": self.longest, "cut_share": self.cut_share}

    @classmethod
    def from_dict(cls, raw: Any) -> WindowOverflow | None:
        """The record read back from item data (None when absent or not a record of this shape)."""
        if not isinstance(raw, dict):
            return None
        try:
            return cls(int(raw["window_tokens"]), int(raw["chunks"]), int(raw["over"]), int(raw["longest"]),
                       float(raw["cut_share"]))
        except (KeyError, TypeError, ValueError):
            return None

    def describe(self) -> str:
        """One line for a person: "3 of 5 chunks exceed the 256-token window (up to 1024 tokens; 41% not embedded)"."""
        verb = "exceeds" if self.over == 1 else "exceed"
        return (f"{self.over} of {self.chunks} chunk{'s' if self.chunks != 1 else ''} {verb} the "
                f"{self.window_tokens}-token window of the embedding model (up to {self.longest} tokens; "
                f"{self.cut_share:.0%} of the text is cut off before embedding)")


@dataclass(frozen=True, slots=True)
class EmbeddingModelInfo:
    id: str  # provider::model
    provider: str
    model: str
    dimensions: int | None = None
    # None, or what is not known about the model, e.g. "capabilities unknown" (an
    # Ollama-API server whose /api/show lists no capabilities: it may not embed)
    note: str | None = None


@dataclass(frozen=True, slots=True)
class ModelListing:
    """Models from every configured provider; providers that failed are listed with why."""

    models: list[EmbeddingModelInfo]
    errors: dict[str, str] = field(default_factory=dict)


# --- events ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ItemChanged:
    base_id: str
    item_id: str
    status: ItemStatus
    phase: ItemPhase | None
    error: str | None
    progress: float | None = None  # 0..1 while embedding, and while OCR reads pages; else None
    ocr_pages: tuple[int, int] | None = None  # (pages recognised, pages to recognise) while OCR runs


@dataclass(frozen=True, slots=True)
class ItemsAdded:
    base_id: str
    item_ids: tuple[str, ...]
    group_id: str | None = None


@dataclass(frozen=True, slots=True)
class ItemsRemoved:
    base_id: str
    item_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class BaseChanged:
    base_id: str


@dataclass(frozen=True, slots=True)
class BaseRemoved:
    base_id: str


@dataclass(frozen=True, slots=True)
class QueueStats:
    pending: int
    running: int
    done: int
    failed: int
    chunks_per_second: float
    chunks: int = 0  # chunks stored since the service opened (running total, for progress bars)
    paused: str | None = None  # why the queue starts no new work (e.g. "no space left on device: PATH")
    slow: tuple[str, ...] = ()  # a line per provider that ktui is pacing down (timeouts, "too busy")


Event = ItemChanged | ItemsAdded | ItemsRemoved | BaseChanged | BaseRemoved | QueueStats
