"""Validation of a base's settings: one field (`validate_base_field`), a patch, their consistency.

Each function returns a clean value or raises `ValidationError` naming the field.
"""

from __future__ import annotations

from typing import Any

from ktui.core.config import LANGUAGE_CODE
from ktui.core.data.validation import (
    require_emoji,
    require_id,
    require_int,
    require_model_id,
    require_name,
    require_unit,
)
from ktui.core.errors import ValidationError
from ktui.core.models import SearchMode

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
            return require_int(value, "chunk_size", minimum=16, maximum=100_000)
        case "chunk_overlap":
            return require_int(value, "chunk_overlap", minimum=0, maximum=100_000)
        case "threshold":
            return require_unit(value, "threshold")
        case "document_count":
            return require_int(value, "document_count", minimum=1, maximum=1000)
        case "search_mode":
            try:
                return SearchMode(value)
            except (ValueError, TypeError):
                raise ValidationError.field("search_mode", "must be one of hybrid, vector (or default), bm25") from None
        case "hybrid_alpha":
            return require_unit(value, "hybrid_alpha")
        case "ocr_enabled":
            if not isinstance(value, bool):
                raise ValidationError.field("ocr_enabled", "must be true or false (or null to follow the settings)")
            return value
        case "ocr_languages":
            return require_ocr_languages(value)
        case "ocr_max_pages":
            return require_int(value, "ocr_max_pages", minimum=1, maximum=1_000_000)
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
