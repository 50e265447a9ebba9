"""Validation of everything a caller hands the services: the shared checks.

Each function either returns a clean, typed value or raises `ValidationError`
naming the offending field. Nothing here touches the database: the services call
these first, so a bad argument never opens a transaction.

This module holds the checks every kind of argument uses (ids, names, emoji, numbers,
model ids, pages, queries) and `ValidItem`, a validated item input; a base's settings
are checked in `base_validation.py`, an item input's payload in `item_validation.py`.
"""

from __future__ import annotations

import functools
import math
import unicodedata
from dataclasses import dataclass
from typing import Any

from ktui.core.errors import ValidationError
from ktui.core.models import ItemData, ItemType

MAX_INPUTS_PER_CALL = 100
MAX_NOTE_CHARS = 1_000_000
MAX_QUERY_CHARS = 1000
MAX_NAME_CHARS = 200
MAX_ID_CHARS = 200
MAX_PAGE_LIMIT = 100
MAX_CURSOR_LIMIT = 1000  # keyset pages cost the same wherever they start: larger ones save round trips
DEFAULT_PAGE_LIMIT = 20
MAX_URL_CHARS = 8192
MAX_PATH_CHARS = 4096

MAX_EMOJI_CODEPOINTS = 16  # the longest standard emoji ZWJ sequences are ~10


@functools.cache
def _grapheme() -> Any:
    """The grapheme-cluster pattern; `regex` is imported by the few callers that set an emoji."""
    import regex

    return regex.compile(r"\X")


def _has_word_char(text: str) -> bool:
    """Whether `text` holds a letter or a digit (Unicode categories L* or N*, like ``[\\p{L}\\p{N}]``)."""
    return any(unicodedata.category(c)[0] in "LN" for c in text)


def is_unicode(value: str) -> bool:
    """False for strings SQLite cannot store (lone surrogates, e.g. from bad JSON)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def has_control(value: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in value)


def require_id(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError.field(field, "must be a non-empty string id")
    if len(value) > MAX_ID_CHARS or value != value.strip() or "\x00" in value or not is_unicode(value):
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
    if not is_unicode(value):
        raise ValidationError.field(field, "must be valid Unicode text")
    return value


def require_emoji(value: Any, field: str = "emoji") -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError.field(field, "must be a non-empty string")
    if value != value.strip():
        raise ValidationError.field(field, "must not be padded with whitespace")
    if not is_unicode(value):
        raise ValidationError.field(field, "must be valid Unicode text")
    # one grapheme cluster, but not an unbounded one ("e" + 10,000 combining marks)
    if len(value) > MAX_EMOJI_CODEPOINTS or len(_grapheme().findall(value)) != 1:
        raise ValidationError.field(field, "must be exactly one character (one emoji)")
    if has_control(value):
        raise ValidationError.field(field, "must not contain control characters")
    return value


def require_int(value: Any, field: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError.field(field, "must be an integer")
    if minimum is not None and value < minimum:
        raise ValidationError.field(field, f"must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise ValidationError.field(field, f"must be at most {maximum}")
    return value


def require_unit(value: Any, field: str) -> float:
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
    if has_control(value) or not is_unicode(value):
        raise ValidationError.field(field, "must look like 'provider::model'")
    return value.strip()


def require_dimensions(value: Any, field: str = "dimensions") -> int:
    return require_int(value, field, minimum=1, maximum=65_536)


def require_page(page: Any, limit: Any) -> tuple[int, int]:
    return require_int(page, "page", minimum=1, maximum=10**9), require_int(limit, "limit", minimum=1, maximum=MAX_PAGE_LIMIT)


def require_cursor_limit(limit: Any) -> int:
    return require_int(limit, "limit", minimum=1, maximum=MAX_CURSOR_LIMIT)


def require_query(value: Any, field: str = "query") -> str:
    if not isinstance(value, str):
        raise ValidationError.field(field, "must be a string")
    if not is_unicode(value):
        raise ValidationError.field(field, "must be valid Unicode text")
    text = value.strip()
    if not text:
        raise ValidationError.field(field, "must not be empty")
    if len(text) > MAX_QUERY_CHARS:
        raise ValidationError.field(field, f"must be at most {MAX_QUERY_CHARS} characters")
    if not _has_word_char(text):
        raise ValidationError.field(field, "must contain a letter or digit")
    return text


def require_top_k(value: Any, field: str = "top_k") -> int | None:
    if value is None:
        return None
    return require_int(value, field, minimum=1, maximum=1000)


@dataclass(frozen=True, slots=True)
class ValidItem:
    """An item input once validated: its type and its typed payload."""

    type: ItemType
    data: ItemData
