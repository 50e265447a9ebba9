"""Validation of what a caller asks to add: item inputs (type and payload), paths, URLs, filters.

Each function returns a clean, typed value or raises `ValidationError` naming the
field; paths are checked on disk (exists, right kind, not a system folder).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ktui.core.data.validation import (
    MAX_INPUTS_PER_CALL,
    MAX_NOTE_CHARS,
    MAX_PATH_CHARS,
    MAX_URL_CHARS,
    ValidItem,
    has_control,
    is_unicode,
    require_id,
)
from ktui.core.errors import ValidationError
from ktui.core.models import (
    ANY_GROUP,
    DirectoryItemData,
    FileItemData,
    ItemInput,
    ItemPhase,
    ItemStatus,
    ItemType,
    NoteItemData,
    SitemapItemData,
    UrlItemData,
)

_ALLOWED_KEYS: dict[ItemType, set[str]] = {
    ItemType.FILE: {"path"},
    ItemType.URL: {"url"},
    ItemType.NOTE: {"content", "source_url"},
    ItemType.DIRECTORY: {"path", "watch"},
    ItemType.SITEMAP: {"url"},
}


def require_http_url(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError.field(field, "must be a non-empty URL")
    url = value.strip()
    if len(url) > MAX_URL_CHARS:
        raise ValidationError.field(field, f"must be at most {MAX_URL_CHARS} characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        raise ValidationError.field(field, f"Invalid knowledge url: {url}") from None
    if (
        parts.scheme.lower() not in ("http", "https")
        or not parts.hostname
        or any(c.isspace() for c in url)
        or has_control(url)
        or not is_unicode(url)
    ):
        raise ValidationError.field(field, f"Invalid knowledge url: {url}")
    return url


# Folders whose whole tree is never a knowledge base: the system's own, and the home
# folder itself (its sub-folders are fine). The TUI may ask for confirmation instead.
_SYSTEM_DIRS = frozenset(
    ["/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/proc",
     "/root", "/run", "/sbin", "/srv", "/sys", "/usr", "/var", "/snap", "/System", "/Library",
     "/Applications", "/Volumes", "/private", "/nix"]
)


def _too_broad(path: Path) -> str | None:
    """Why a directory item for `path` is refused, or None."""
    try:
        real = Path(os.path.realpath(path))
    except (OSError, ValueError):
        real = path
    if real.parent == real:
        return "the root of a file system"
    if str(real) in _SYSTEM_DIRS:
        return "a system folder"
    try:
        home = Path(os.path.realpath(Path.home()))
    except (OSError, RuntimeError):
        home = None
    if home is not None and real == home and home.parent != home:
        return "your home folder itself"
    return None


def _require_path(value: Any, field: str, *, want_dir: bool) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError.field(field, "must be a non-empty path")
    if "\x00" in value or len(value) > MAX_PATH_CHARS:
        raise ValidationError.field(field, "is not a valid path")
    path = Path(os.path.abspath(os.path.expanduser(value.strip())))
    try:
        exists = path.exists()
        is_dir = path.is_dir()
        is_file = path.is_file()
    except (OSError, ValueError):
        raise ValidationError.field(field, f"cannot be accessed: {path}") from None
    if not exists:
        raise ValidationError.field(field, f"does not exist: {path}")
    if want_dir and not is_dir:
        raise ValidationError.field(field, f"is not a directory: {path}")
    if want_dir:
        too_broad = _too_broad(path)
        if too_broad:
            raise ValidationError.field(
                field, f"{path} is {too_broad}: indexing it would crawl far more than anyone means to; "
                "add the folders inside it that you want")
    if not want_dir and is_dir:
        raise ValidationError.field(field, f"is a directory (add it as a directory item): {path}")
    if not want_dir and not is_file:
        # a FIFO would block the reader thread forever; a device never ends
        raise ValidationError.field(field, f"is not a regular file (a pipe, socket or device): {path}")
    return str(path)


def validate_item_input(raw: Any, field: str = "items[0]") -> ValidItem:
    """Check one ItemInput (or a `{"type", "data"}` mapping) and fill `source`."""
    type_value: object
    data: object
    if isinstance(raw, ItemInput):
        type_value, data = raw.type, raw.data
    elif isinstance(raw, dict) and set(raw) <= {"type", "data"}:
        type_value, data = raw.get("type"), raw.get("data")
    else:
        raise ValidationError.field(field, "must be an ItemInput(type, data)")
    try:
        item_type = ItemType(type_value)  # type: ignore[arg-type]  # any raw value; a bad one raises
    except (ValueError, TypeError):
        raise ValidationError.field(
            f"{field}.type", "must be one of file, url, note, directory, sitemap"
        ) from None
    if not isinstance(data, dict):
        raise ValidationError.field(f"{field}.data", "must be a mapping")
    unknown = [k for k in data if k not in _ALLOWED_KEYS[item_type]]
    if unknown:
        raise ValidationError.field(f"{field}.data.{unknown[0]}", f"unknown field for a {item_type} item")
    match item_type:
        case ItemType.FILE:
            path = _require_path(data.get("path"), f"{field}.data.path", want_dir=False)
            return ValidItem(item_type, FileItemData(path=path, source=path))
        case ItemType.DIRECTORY:
            path = _require_path(data.get("path"), f"{field}.data.path", want_dir=True)
            watch = data.get("watch", False)
            if not isinstance(watch, bool):
                raise ValidationError.field(f"{field}.data.watch", "must be true or false")
            return ValidItem(item_type, DirectoryItemData(path=path, source=path, watch=watch))
        case ItemType.URL:
            url = require_http_url(data.get("url"), f"{field}.data.url")
            return ValidItem(item_type, UrlItemData(url=url, source=url))
        case ItemType.SITEMAP:
            url = require_http_url(data.get("url"), f"{field}.data.url")
            return ValidItem(item_type, SitemapItemData(url=url, source=url))
        case ItemType.NOTE:
            content = data.get("content")
            if not isinstance(content, str) or not content.strip():
                raise ValidationError.field(f"{field}.data.content", "must be non-empty text")
            if len(content) > MAX_NOTE_CHARS:
                raise ValidationError.field(
                    f"{field}.data.content", f"must be at most {MAX_NOTE_CHARS:,} characters"
                )
            if not is_unicode(content):
                raise ValidationError.field(f"{field}.data.content", "must be valid Unicode text")
            source_url = data.get("source_url")
            if source_url is not None:
                source_url = require_http_url(source_url, f"{field}.data.source_url")
            return ValidItem(item_type, NoteItemData(content=content, source=source_url or "note", source_url=source_url))
    raise AssertionError(item_type)  # pragma: no cover


def validate_item_inputs(raw: Any) -> list[ValidItem]:
    if isinstance(raw, (str, bytes, dict)) or not isinstance(raw, (list, tuple)):
        raise ValidationError.field("items", "must be a list of ItemInput")
    if not raw:
        raise ValidationError.field("items", "must not be empty")
    if len(raw) > MAX_INPUTS_PER_CALL:
        raise ValidationError.field("items", f"at most {MAX_INPUTS_PER_CALL} items per call")
    return [validate_item_input(entry, f"items[{i}]") for i, entry in enumerate(raw)]


def require_item_type(value: Any) -> ItemType | None:
    if value is None:
        return None
    try:
        return ItemType(value)
    except (ValueError, TypeError):
        raise ValidationError.field("type", "must be one of file, url, note, directory, sitemap") from None


def require_group_filter(value: Any) -> Any:
    if value is None or value is ANY_GROUP:
        return value
    return require_id(value, "group_id")


def require_phase(value: Any, field: str = "phase") -> ItemPhase | None:
    if value is None:
        return None
    try:
        return ItemPhase(value)
    except (ValueError, TypeError):
        raise ValidationError.field(field, "must be one of preparing, reading, embedding") from None


def require_status(value: Any, field: str = "status") -> ItemStatus:
    try:
        return ItemStatus(value)
    except (ValueError, TypeError):
        raise ValidationError.field(field, "must be one of idle, processing, completed, failed") from None
