"""Conversions between SQLite rows and the models of core.models."""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any

from ktui.core.models import (
    ITEM_DATA_CLASSES,
    BaseStatus,
    ItemData,
    ItemPhase,
    ItemStatus,
    ItemType,
    KnowledgeBase,
    KnowledgeBaseErrorCode,
    KnowledgeGroup,
    KnowledgeItem,
    SearchMode,
)

BASE_COLUMNS = (
    "id, name, group_id, emoji, dimensions, embedding_model_id, status, error, rerank_model_id, "
    "chunk_size, chunk_overlap, threshold, document_count, search_mode, hybrid_alpha, created_at, updated_at, "
    "ocr_enabled, ocr_languages, ocr_max_pages"
)
ITEM_COLUMNS = "id, base_id, group_id, type, data, status, phase, error, created_at, updated_at"


def base_from_row(row: Any) -> KnowledgeBase:
    return KnowledgeBase(
        id=row["id"],
        name=row["name"],
        group_id=row["group_id"],
        emoji=row["emoji"],
        dimensions=row["dimensions"],
        embedding_model_id=row["embedding_model_id"],
        status=BaseStatus(row["status"]),
        error=KnowledgeBaseErrorCode(row["error"]) if row["error"] else None,
        rerank_model_id=row["rerank_model_id"],
        chunk_size=row["chunk_size"],
        chunk_overlap=row["chunk_overlap"],
        threshold=row["threshold"],
        document_count=row["document_count"],
        search_mode=SearchMode(row["search_mode"]),
        hybrid_alpha=row["hybrid_alpha"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        ocr_enabled=None if row["ocr_enabled"] is None else bool(row["ocr_enabled"]),
        ocr_languages=row["ocr_languages"],
        ocr_max_pages=row["ocr_max_pages"],
    )


def group_from_row(row: Any) -> KnowledgeGroup:
    return KnowledgeGroup(id=row["id"], name=row["name"], created_at=row["created_at"], updated_at=row["updated_at"])


def data_to_json(data: ItemData) -> str:
    """Store only the fields that are set, so older rows stay readable as fields are added."""
    payload = {k: v for k, v in dataclasses.asdict(data).items() if v is not None}
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A non-UTF-8 file name (os.fsdecode gives lone surrogates) cannot be bound as
        # SQLite text; \uXXXX escapes keep it exact and json.loads restores it.
        text = json.dumps(payload, ensure_ascii=True, separators=(",", ":"))
    return text


def stored_data_problem(item_type: ItemType, payload: dict[str, Any]) -> str | None:
    """What is wrong with a payload another program wrote (an export's index) for an item of
    `item_type`, or None. Every row read back is built with `data_from_json`, so a payload
    without a required field, or with a field of the wrong kind, would fail each listing of
    its base later (a TypeError far from the import that let it in)."""
    cls = ITEM_DATA_CLASSES[item_type]
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if f.name not in payload:
            if required:
                return f"needs '{f.name}'"
            continue
        value = payload[f.name]
        allowed = typing.get_args(hints[f.name]) or (hints[f.name],)
        kinds = tuple(typing.get_origin(a) or a for a in allowed)
        if value is None and type(None) in kinds:
            continue
        if isinstance(value, bool) and bool not in kinds:  # a bool is an int to isinstance
            return f"'{f.name}' must be {_kind_names(kinds)}"
        if not isinstance(value, tuple(k for k in kinds if isinstance(k, type))):
            return f"'{f.name}' must be {_kind_names(kinds)}"
        if required and isinstance(value, str) and not value.strip():
            return f"'{f.name}' must not be empty"
    return None


def _kind_names(kinds: tuple[Any, ...]) -> str:
    names = {str: "text", int: "a whole number", bool: "true or false", dict: "an object", type(None): "null"}
    return " or ".join(names.get(k, getattr(k, "__name__", str(k))) for k in kinds)


def data_from_json(item_type: ItemType, raw: str) -> ItemData:
    cls = ITEM_DATA_CLASSES[item_type]
    payload = json.loads(raw)
    known = {f.name for f in dataclasses.fields(cls)}
    data: ItemData = cls(**{k: v for k, v in payload.items() if k in known})
    return data


def item_from_row(row: Any) -> KnowledgeItem:
    item_type = ItemType(row["type"])
    return KnowledgeItem(
        id=row["id"],
        base_id=row["base_id"],
        group_id=row["group_id"],
        type=item_type,
        data=data_from_json(item_type, row["data"]),
        status=ItemStatus(row["status"]),
        phase=ItemPhase(row["phase"]) if row["phase"] else None,
        error=row["error"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )
