"""Validation of everything a caller hands the services.

Each function either returns a clean, typed value or raises `ValidationError`
naming the offending field. Nothing here touches the database: the services call
these first, so a bad argument never opens a transaction.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import regex

from ktui.core.config import LANGUAGE_CODE
from ktui.core.errors import ValidationError
from ktui.core.models import (
    ANY_GROUP,
    DirectoryItemData,
    FileItemData,
    ItemData,
    ItemInput,
    ItemPhase,
    ItemStatus,
    ItemType,
    NoteItemData,
    SearchMode,
    SitemapItemData,
    UrlItemData,
)

MAX_INPUTS_PER_CALL = 100
MAX_NOTE_CHARS = 1_000_000
MAX_QUERY_CHARS = 1000
MAX_NAME_CHARS = 200
MAX_ID_CHARS = 200
MAX_PAGE_LIMIT = 100
DEFAULT_PAGE_LIMIT = 20
MAX_URL_CHARS = 8192
MAX_PATH_CHARS = 4096

MAX_EMOJI_CODEPOINTS = 16  # the longest standard emoji ZWJ sequences are ~10

_GRAPHEME = regex.compile(r"\X")
_HAS_WORD_CHAR = regex.compile(r"[\p{L}\p{N}]")


def _is_unicode(value: str) -> bool:
    """False for strings SQLite cannot store (lone surrogates, e.g. from bad JSON)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _has_control(value: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in value)


def require_id(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError.field(field, "must be a non-empty string id")
    if len(value) > MAX_ID_CHARS or value != value.strip() or "\x00" in value or not _is_unicode(value):
        raise ValidationError.field(field, "is not a valid id")
    return value


def require_ids(values: Any, field: str, *, max_count: int = 10_000) -> list[str]:
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple, set, frozenset)):
        raise ValidationError.field(field, "must be a list of ids")
    if not values:
        raise ValidationError.field(field, "must not be empty")
    if len(values) > max_count:
        raise ValidationError.field(field, f"must hold at most {max_count} ids")
    out: list[str] = []
    seen: set[str] = set()
    for i, v in enumerate(values):
        ident = require_id(v, f"{field}[{i}]")
        if ident not in seen:
            seen.add(ident)
            out.append(ident)
    return out


def require_name(raw: Any, field: str = "name") -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise ValidationError.field(field, "must be a non-empty string")
    value = raw.strip()
    if len(value) > MAX_NAME_CHARS:
        raise ValidationError.field(field, f"must be at most {MAX_NAME_CHARS} characters")
    if any(ord(c) < 32 for c in value):
        raise ValidationError.field(field, "must not contain control characters")
    if not _is_unicode(value):
        raise ValidationError.field(field, "must be valid Unicode text")
    return value


def require_emoji(value: Any, field: str = "emoji") -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError.field(field, "must be a non-empty string")
    if value != value.strip():
        raise ValidationError.field(field, "must not be padded with whitespace")
    if not _is_unicode(value):
        raise ValidationError.field(field, "must be valid Unicode text")
    # one grapheme cluster, but not an unbounded one ("e" + 10,000 combining marks)
    if len(value) > MAX_EMOJI_CODEPOINTS or len(_GRAPHEME.findall(value)) != 1:
        raise ValidationError.field(field, "must be exactly one character (one emoji)")
    if _has_control(value):
        raise ValidationError.field(field, "must not contain control characters")
    return value


def _int(value: Any, field: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError.field(field, "must be an integer")
    if minimum is not None and value < minimum:
        raise ValidationError.field(field, f"must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise ValidationError.field(field, f"must be at most {maximum}")
    return value


def _unit(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError.field(field, "must be a number between 0 and 1")
    if isinstance(value, float) and not math.isfinite(value):  # math.isfinite(10**400) overflows
        raise ValidationError.field(field, "must be a number between 0 and 1")
    if not 0 <= value <= 1:
        raise ValidationError.field(field, "must be between 0 and 1")
    return float(value)


def require_model_id(value: Any, field: str = "embedding_model_id") -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError.field(field, "must be a 'provider::model' string")
    provider, sep, model = value.strip().partition("::")
    if not sep or not provider.strip() or not model.strip() or len(value) > 500:
        raise ValidationError.field(field, "must look like 'provider::model'")
    if _has_control(value) or not _is_unicode(value):
        raise ValidationError.field(field, "must look like 'provider::model'")
    return value.strip()


def require_dimensions(value: Any, field: str = "dimensions") -> int:
    return _int(value, field, minimum=1, maximum=65_536)


def require_page(page: Any, limit: Any) -> tuple[int, int]:
    return _int(page, "page", minimum=1, maximum=10**9), _int(limit, "limit", minimum=1, maximum=MAX_PAGE_LIMIT)


def require_query(value: Any, field: str = "query") -> str:
    if not isinstance(value, str):
        raise ValidationError.field(field, "must be a string")
    if not _is_unicode(value):
        raise ValidationError.field(field, "must be valid Unicode text")
    text = value.strip()
    if not text:
        raise ValidationError.field(field, "must not be empty")
    if len(text) > MAX_QUERY_CHARS:
        raise ValidationError.field(field, f"must be at most {MAX_QUERY_CHARS} characters")
    if not _HAS_WORD_CHAR.search(text):
        raise ValidationError.field(field, "must contain a letter or digit")
    return text


def require_top_k(value: Any, field: str = "top_k") -> int | None:
    if value is None:
        return None
    return _int(value, field, minimum=1, maximum=1000)


# --- base configuration ---------------------------------------------------

BASE_PATCHABLE = (
    "name",
    "emoji",
    "group_id",
    "rerank_model_id",
    "chunk_size",
    "chunk_overlap",
    "threshold",
    "document_count",
    "search_mode",
    "hybrid_alpha",
    "ocr_enabled",
    "ocr_languages",
    "ocr_max_pages",
)
BASE_IMMUTABLE = ("embedding_model_id", "dimensions")
BASE_READONLY = ("id", "status", "error", "created_at", "updated_at")
_NULLABLE = {"group_id", "rerank_model_id", "threshold", "document_count", "hybrid_alpha",
             "ocr_enabled", "ocr_languages", "ocr_max_pages"}


def validate_base_field(name: str, value: Any) -> Any:
    """Check one configurable base field in isolation (cross-field rules come after)."""
    if value is None:
        if name in _NULLABLE:
            return None
        raise ValidationError.field(name, "cannot be cleared")
    match name:
        case "name":
            return require_name(value)
        case "emoji":
            return require_emoji(value)
        case "group_id":
            return require_id(value, "group_id")
        case "rerank_model_id":
            return require_model_id(value, "rerank_model_id")
        case "chunk_size":
            return _int(value, "chunk_size", minimum=16, maximum=100_000)
        case "chunk_overlap":
            return _int(value, "chunk_overlap", minimum=0, maximum=100_000)
        case "threshold":
            return _unit(value, "threshold")
        case "document_count":
            return _int(value, "document_count", minimum=1, maximum=1000)
        case "search_mode":
            try:
                return SearchMode(value)
            except (ValueError, TypeError):
                raise ValidationError.field("search_mode", "must be one of hybrid, vector (or default), bm25") from None
        case "hybrid_alpha":
            return _unit(value, "hybrid_alpha")
        case "ocr_enabled":
            if not isinstance(value, bool):
                raise ValidationError.field("ocr_enabled", "must be true or false (or null to follow the settings)")
            return value
        case "ocr_languages":
            return require_ocr_languages(value)
        case "ocr_max_pages":
            return _int(value, "ocr_max_pages", minimum=1, maximum=1_000_000)
    raise ValidationError.field(name, "unknown field")


def require_ocr_languages(value: Any) -> str:
    """Tesseract language codes as a list or a "+"-joined string; stored joined by "+"."""
    parts = value.replace("+", " ").split() if isinstance(value, str) else value
    if not isinstance(parts, (list, tuple)) or not parts or not all(
        isinstance(p, str) and LANGUAGE_CODE.match(p) for p in parts
    ):
        raise ValidationError.field(
            "ocr_languages", "must be Tesseract language codes such as 'eng' or 'eng+deu' (letters, digits, _)"
        )
    return "+".join(dict.fromkeys(parts))


def check_base_consistency(cfg: dict[str, Any]) -> None:
    """Rules spanning fields, applied to the merged (current + patch) configuration."""
    if cfg["chunk_overlap"] >= cfg["chunk_size"]:
        raise ValidationError.field("chunk_overlap", "must be smaller than chunk_size")
    if cfg.get("hybrid_alpha") is not None and cfg["search_mode"] != SearchMode.HYBRID:
        raise ValidationError.field("hybrid_alpha", "only applies when search_mode is 'hybrid'")


def unknown_field(key: Any, message: str, container: str = "patch") -> ValidationError:
    """Name an unknown key as the field when it reads like one; otherwise blame the
    container (an empty or garbled key is no help as a field name)."""
    if isinstance(key, str) and key.isidentifier():
        return ValidationError.field(key, message)
    return ValidationError.field(container, f"{message}: {key!r}")


def validate_base_patch(patch: Any) -> dict[str, Any]:
    if not isinstance(patch, dict):
        raise ValidationError.field("patch", "must be a mapping of field names to values")
    if not patch:
        raise ValidationError.field("patch", "must change at least one field")
    clean: dict[str, Any] = {}
    for key, value in patch.items():
        if not isinstance(key, str):
            raise ValidationError.field("patch", "field names must be strings")
        if key in BASE_IMMUTABLE:
            raise ValidationError.field(
                key, "cannot be changed on an existing base; restore the base with another model instead"
            )
        if key in BASE_READONLY:
            raise ValidationError.field(key, "is read-only")
        if key not in BASE_PATCHABLE:
            raise unknown_field(key, "unknown field")
        clean[key] = validate_base_field(key, value)
    return clean


# --- item payloads --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ValidItem:
    type: ItemType
    data: ItemData


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
        or _has_control(url)
        or not _is_unicode(url)
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
            if not _is_unicode(content):
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

