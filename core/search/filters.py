"""Search filters: validate what a front end passes, and turn it into an item test.

The store knows chunks, not items; the catalogue knows items. A filter is resolved
once per search into the set of item ids it allows (one catalogue read of the base's
items, done off the event loop), and the search keeps only candidates of those items.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from ktui.core.errors import ValidationError
from ktui.core.models import ItemType, KnowledgeItem, SearchFilters


def require_filters(value: Any) -> SearchFilters | None:
    """A SearchFilters from a SearchFilters, a mapping of its fields, or None."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - {"item_types", "source_prefix", "modified_after"})
        if unknown:
            raise ValidationError.field("filters", f"unknown filter '{unknown[0]}'")
        value = SearchFilters(
            item_types=tuple(value.get("item_types") or ()),
            source_prefix=value.get("source_prefix"),
            modified_after=value.get("modified_after"),
        )
    if not isinstance(value, SearchFilters):
        raise ValidationError.field("filters", "must be a SearchFilters or a mapping")
    types: list[ItemType] = []
    for t in value.item_types if isinstance(value.item_types, (list, tuple)) else [value.item_types]:
        try:
            types.append(ItemType(t))
        except ValueError:
            raise ValidationError.field(
                "item_types", f"'{t}' is not an item type (file, url, note, directory, sitemap)"
            ) from None
    prefix = value.source_prefix
    if prefix is not None and (not isinstance(prefix, str) or not prefix.strip()):
        raise ValidationError.field("source_prefix", "must be a non-empty path or URL prefix")
    after = value.modified_after
    if after is not None:
        after = _utc_iso(after)
    out = SearchFilters(tuple(dict.fromkeys(types)), prefix, after)
    return out if out.active else None


def _utc_iso(value: Any) -> str:
    """The catalogue's timestamp form (ISO UTC with microseconds and Z), which sorts lexically."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ValidationError.field(
                "modified_after", f"'{value}' is not an ISO-8601 date or time (e.g. 2026-03-01 or 2026-03-01T12:00)"
            ) from None
    else:
        raise ValidationError.field("modified_after", "must be an ISO-8601 date or time")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def allowed_items(filters: SearchFilters, items: Iterable[KnowledgeItem]) -> frozenset[str]:
    """Ids of the items whose chunks pass ``filters`` (pure CPU: call it off the loop)."""
    by_id = {i.id: i for i in items}
    types = set(filters.item_types)

    def type_ok(item: KnowledgeItem) -> bool:
        seen = 0
        node: KnowledgeItem | None = item
        while node is not None and seen < 64:
            if node.type in types:
                return True
            node = by_id.get(node.group_id) if node.group_id else None
            seen += 1
        return False

    out = []
    for item in by_id.values():
        if item.type.is_container:
            continue
        if types and not type_ok(item):
            continue
        if filters.source_prefix and not item.source.startswith(filters.source_prefix):
            continue
        if filters.modified_after and item.updated_at < filters.modified_after:
            continue
        out.append(item.id)
    return frozenset(out)
