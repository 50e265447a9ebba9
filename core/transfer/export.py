"""Export: a versioned document of each base's settings and its root items' payloads."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from ktui.core.models import (
    KnowledgeBase,
    KnowledgeItem,
    SearchMode,
)
from ktui.core.transfer.reports import CONFIG_KEYS, EXPORT_FORMAT, EXPORT_VERSION

# --- export ---------------------------------------------------------------


def export_entry(base: KnowledgeBase, roots: Iterable[KnowledgeItem], group_name: str | None) -> dict[str, Any]:
    """One base of an export document: its settings and its root items' payloads."""
    from ktui.core.orchestration import (
        payload_of,  # lazy: orchestration pulls in the runtime
    )

    entry: dict[str, Any] = {
        "id": base.id,
        "name": base.name,
        "group": group_name,
        "embedding_model_id": base.embedding_model_id,
        "dimensions": base.dimensions,
        "status": base.status.value,
        "error": base.error.value if base.error else None,
    }
    for key in CONFIG_KEYS:
        value = getattr(base, key)
        entry[key] = value.value if isinstance(value, SearchMode) else value
    entry["items"] = [{"type": item.type.value, "data": payload_of(item)} for item in roots]
    return entry


def build_export(entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "bases": list(entries),
    }
