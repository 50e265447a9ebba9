"""The events the runtime publishes (what changed in the catalogue) and the queue's figures."""

from __future__ import annotations

from dataclasses import dataclass

from ktui.core.models.enums import ItemPhase, ItemStatus


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
class Resync:
    """Changes may have been missed (a shared PostgreSQL store's event connection was lost and
    is back): whoever shows catalogue state reloads it instead of waiting for events."""

    reason: str = ""


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
    recovering: int | None = None  # items the holder's recovery has still to look at; None: none runs
    recovery_error: str | None = None  # why the last recovery pass stopped early (also logged)


@dataclass(frozen=True, slots=True)
class FolderFollower:
    """Who keeps a watched folder fresh (`KnowledgeService.folder_followers`). On a shared
    store a folder belongs to one machine (`host`, None until one recorded it) and is
    followed by one process there (`follower`: its machine, None when nobody follows it
    now); `here` is True when this process follows it, `mine` when the folder belongs to
    this process's machine (or to none yet). On SQLite `host` and `follower` are None and
    `here` says whether this process watches it."""

    here: bool
    host: str | None = None
    follower: str | None = None
    mine: bool = True


Event = ItemChanged | ItemsAdded | ItemsRemoved | BaseChanged | BaseRemoved | QueueStats | Resync
