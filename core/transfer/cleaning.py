"""Cleaning imported settings and items (shared by both document shapes); no file system access."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from ktui.core.data.base_validation import validate_base_field
from ktui.core.data.item_validation import validate_item_input
from ktui.core.data.validation import MAX_PATH_CHARS, ValidItem, require_dimensions, require_model_id
from ktui.core.errors import ValidationError
from ktui.core.models import (
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_CHUNK_SIZE,
    DirectoryItemData,
    FileItemData,
    ItemInput,
    ItemType,
    SearchMode,
)
from ktui.core.transfer.reports import (
    CONFIG_KEYS,
    BaseImportReport,
    BasePlan,
    ParsedDocument,
    PlannedItem,
    SkippedEntry,
)

# --- shared cleaning ------------------------------------------------------


def clean_config(raw: dict[str, Any], report: BaseImportReport) -> dict[str, Any]:
    """Validate each imported setting; invalid ones are dropped (with a warning) or defaulted."""
    cfg: dict[str, Any] = {}
    for key in CONFIG_KEYS:
        if key not in raw:
            continue
        value = raw[key]
        if value is None:
            if key in ("threshold", "document_count", "rerank_model_id", "hybrid_alpha",
                       "ocr_enabled", "ocr_languages", "ocr_max_pages"):
                cfg[key] = None
            continue
        try:
            cfg[key] = validate_base_field(key, value)
        except ValidationError as exc:
            what = {"document_count": "top-K (document_count)"}.get(key, key)
            report.warnings.append(f"{what} {value!r} dropped: {exc.errors.get(key, exc)}")
    size = cfg.get("chunk_size", DEFAULT_CHUNK_SIZE)
    cfg["chunk_size"] = size
    default_overlap = min(DEFAULT_CHUNK_OVERLAP, size - 1)
    overlap = cfg.get("chunk_overlap", default_overlap)
    if overlap >= size:
        report.warnings.append(f"chunk_overlap {overlap} is not smaller than chunk_size {size}; using {default_overlap}")
        overlap = default_overlap
    cfg["chunk_overlap"] = overlap
    mode = cfg.get("search_mode")
    if cfg.get("hybrid_alpha") is not None and mode not in (None, SearchMode.HYBRID):
        report.warnings.append("hybrid_alpha dropped: it only applies to hybrid search")
        cfg.pop("hybrid_alpha")
    if isinstance(mode, SearchMode):
        cfg["search_mode"] = mode.value
    return cfg


def _plan_item(plan: BasePlan, kind: Any, data: dict[str, Any], label: str, seen: set[tuple[str, str]]) -> None:
    """Check an item's shape (not whether its path exists here) and drop duplicates."""
    try:
        item_type = ItemType(kind)
    except (ValueError, TypeError):
        plan.report.skip(label, f"unknown item type {kind!r}")
        return
    try:
        structural_item(item_type, data, label)
    except ValidationError as exc:
        plan.report.skip(label, str(exc))
        return
    key = (item_type.value, _identity(item_type, data))
    if key in seen:
        plan.report.skip(label, "duplicate of an earlier item")
        return
    seen.add(key)
    plan.items.append(PlannedItem(item_type, data, f"{item_type.value} {_identity(item_type, data)[:80]}"))


def _identity(item_type: ItemType, data: dict[str, Any]) -> str:
    if item_type == ItemType.NOTE:
        return str(data.get("content", ""))
    if item_type in (ItemType.FILE, ItemType.DIRECTORY):
        return os.path.abspath(os.path.expanduser(str(data.get("path", ""))))
    return str(data.get("url", ""))


def structural_item(item_type: ItemType, data: dict[str, Any], label: str) -> ValidItem:
    """Validate a payload without touching the file system.

    A failed base keeps its file and directory items even when the paths do not
    exist on this machine (they are data until the base is restored), so the
    existence check of `validate_item_input` is not applied here.
    """
    if item_type not in (ItemType.FILE, ItemType.DIRECTORY):
        return validate_item_input(ItemInput(item_type, data), label)
    allowed = {"path"} | ({"watch"} if item_type == ItemType.DIRECTORY else set())
    unknown = [k for k in data if k not in allowed]
    if unknown:
        raise ValidationError.field(f"{label}.data.{unknown[0]}", f"unknown field for a {item_type} item")
    raw = data.get("path")
    if not isinstance(raw, str) or not raw.strip() or "\x00" in raw or len(raw) > MAX_PATH_CHARS:
        raise ValidationError.field(f"{label}.data.path", "must be a non-empty path")
    path = os.path.abspath(os.path.expanduser(raw.strip()))
    if item_type == ItemType.FILE:
        return ValidItem(item_type, FileItemData(path=path, source=path))
    watch = data.get("watch", False)
    if not isinstance(watch, bool):
        raise ValidationError.field(f"{label}.data.watch", "must be true or false")
    return ValidItem(item_type, DirectoryItemData(path=path, source=path, watch=watch))



# --- small helpers --------------------------------------------------------


def _json_value(value: Any, where: str) -> Any:
    """A persisted slice: usually a JSON string, tolerated as an already-decoded value."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValidationError.field(where, f"is not valid JSON: {exc}") from None
    return value


def _rows_by_id(rows: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(rows, list):
        return {}
    return {str(r["id"]): r for r in rows if isinstance(r, dict) and r.get("id") is not None}


def _str_or_none(value: Any) -> str | None:
    if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
        return str(value).strip()
    return None


def _clean_name(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    cleaned = "".join(c for c in value if ord(c) >= 32).strip()
    return cleaned[:200] or None


def _model_or_none(value: Any) -> str | None:
    try:
        return require_model_id(value) if value is not None else None
    except ValidationError:
        return None


def _dims_or_none(value: Any) -> int | None:
    try:
        return require_dimensions(value) if value is not None else None
    except ValidationError:
        return None

def _base_entries(bases: list[Any], parsed: ParsedDocument) -> Iterator[tuple[dict[str, Any], BaseImportReport]]:
    """The usable base objects of a document, each with a fresh report; entries that are
    not objects or have no name are recorded as skipped."""
    for index, raw in enumerate(bases):
        if not isinstance(raw, dict):
            parsed.skipped_bases.append(SkippedEntry(f"bases[{index}]", "not an object"))
            continue
        name = _clean_name(raw.get("name"))
        if name is None:
            parsed.skipped_bases.append(SkippedEntry(f"bases[{index}]", "has no name"))
            continue
        yield raw, BaseImportReport(name=name, source_id=_str_or_none(raw.get("id")))
