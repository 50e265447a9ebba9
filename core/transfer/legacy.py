"""The legacy desktop-client backup (data.json, version <= 5): its knowledge slice, notes and files."""

from __future__ import annotations

from typing import Any

from ktui.core.data.item_validation import require_http_url
from ktui.core.errors import ValidationError
from ktui.core.models import (
    ItemType,
    SearchMode,
)
from ktui.core.transfer.cleaning import (
    _base_entries,
    _dims_or_none,
    _json_value,
    _model_or_none,
    _plan_item,
    _rows_by_id,
    _str_or_none,
    clean_config,
)
from ktui.core.transfer.reports import (
    LEGACY_MAX_VERSION,
    LEGACY_PERSIST_KEY,
    LEGACY_SKIPPED_TYPES,
    BasePlan,
    ParsedDocument,
)

# --- the legacy desktop-client backup -------------------------------------


def parse_legacy_backup(doc: dict[str, Any]) -> ParsedDocument:
    version = doc.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise ValidationError.field("version", "must be an integer")
    if isinstance(version, int) and version > LEGACY_MAX_VERSION:
        raise ValidationError.field(
            "version", f"backup version {version} is not supported (only {LEGACY_MAX_VERSION} and below)"
        )
    storage = doc.get("localStorage")
    if not isinstance(storage, dict) or LEGACY_PERSIST_KEY not in storage:
        raise ValidationError.field("localStorage", f"has no '{LEGACY_PERSIST_KEY}' entry")
    persisted = _json_value(storage[LEGACY_PERSIST_KEY], f"localStorage['{LEGACY_PERSIST_KEY}']")
    if not isinstance(persisted, dict):
        raise ValidationError.field(f"localStorage['{LEGACY_PERSIST_KEY}']", "must hold a JSON object")
    knowledge = _json_value(persisted.get("knowledge", "{}"), "knowledge")
    if not isinstance(knowledge, dict):
        raise ValidationError.field("knowledge", "must hold a JSON object")
    bases = knowledge.get("bases", [])
    if not isinstance(bases, list):
        raise ValidationError.field("knowledge.bases", "must be a list")

    idb = doc.get("indexedDB") if isinstance(doc.get("indexedDB"), dict) else {}
    notes = _rows_by_id(idb.get("knowledge_notes"))
    files = _rows_by_id(idb.get("files"))

    parsed = ParsedDocument("legacy-backup", [])
    for raw, report in _base_entries(bases, parsed):
        name = report.name
        model = legacy_model_id(raw.get("model"))
        report.requested_model_id = model
        if model is None:
            report.warnings.append("the backup names no usable embedding model")
        dims = _dims_or_none(raw.get("dimensions"))
        if raw.get("dimensions") is not None and dims is None:
            report.warnings.append(f"dimensions {raw.get('dimensions')!r} is not a positive integer; left unknown")
        legacy_cfg: dict[str, Any] = {}
        for src, dst in (("chunkSize", "chunk_size"), ("chunkOverlap", "chunk_overlap"),
                         ("threshold", "threshold"), ("documentCount", "document_count")):
            if raw.get(src) is not None:
                legacy_cfg[dst] = raw[src]
        rerank = legacy_model_id(raw.get("rerankModel"))
        if rerank is not None:
            legacy_cfg["rerank_model_id"] = rerank
        # The legacy client searched by vector similarity only.
        legacy_cfg["search_mode"] = SearchMode.DEFAULT.value
        config = clean_config(legacy_cfg, report)
        plan = BasePlan(name, model, dims, config, None, [], report)
        seen: set[tuple[str, str]] = set()
        seen_ids: set[str] = set()
        items = raw.get("items", [])
        if not isinstance(items, list):
            report.warnings.append("'items' is not a list; no items imported")
            items = []
        for i, item in enumerate(items):
            label = f"items[{i}]"
            if not isinstance(item, dict):
                report.skip(label, "not an object")
                continue
            item_id = _str_or_none(item.get("id"))
            if item_id:
                label = f"{item.get('type', '?')} {item_id}"
                if item_id in seen_ids:
                    report.skip(label, "duplicate item id")
                    continue
                seen_ids.add(item_id)
            kind = item.get("type")
            if kind in LEGACY_SKIPPED_TYPES:
                report.skip(label, f"{kind} items are not supported by ktui")
                continue
            if kind not in {t.value for t in ItemType}:
                report.skip(label, f"unknown item type {kind!r}")
                continue
            payload = _legacy_payload(item, notes, files)
            if payload is None:
                report.skip(label, f"no usable content for a {kind} item")
                continue
            if "source_url" in payload:
                try:
                    require_http_url(payload["source_url"], "source_url")
                except ValidationError:
                    report.warnings.append(f"{label}: source URL {payload.pop('source_url')!r} is not an http(s) URL; dropped")
            _plan_item(plan, kind, payload, label, seen)
        parsed.plans.append(plan)
    return parsed


def legacy_model_id(model: Any) -> str | None:
    """`{id, provider}` -> ``provider::id`` (an id already in that form is kept)."""
    if not isinstance(model, dict):
        return None
    ident = _str_or_none(model.get("id"))
    provider = _str_or_none(model.get("provider"))
    if ident is None:
        return None
    candidate = ident if "::" in ident else (f"{provider}::{ident}" if provider else None)
    return _model_or_none(candidate)


def _legacy_payload(item: dict[str, Any], notes: dict[str, dict], files: dict[str, dict]) -> dict[str, Any] | None:
    kind = item.get("type")
    content = item.get("content")
    if kind == "note":
        body = notes.get(str(item.get("id")), {}).get("content")
        if not isinstance(body, str) or not body.strip():
            body = content if isinstance(content, str) else None
        if body is None:
            return None
        payload: dict[str, Any] = {"content": body}
        source_url = item.get("sourceUrl") or notes.get(str(item.get("id")), {}).get("sourceUrl")
        if isinstance(source_url, str) and source_url.strip():
            payload["source_url"] = source_url.strip()
        return payload
    if kind == "file":
        meta = content if isinstance(content, dict) else {}
        file_id = meta.get("id") if meta else content
        row = files.get(str(file_id), {}) if file_id is not None else {}
        path = meta.get("path") or row.get("path")
        return {"path": path} if isinstance(path, str) and path.strip() else None
    if kind == "directory":
        path = content if isinstance(content, str) else None
        return {"path": path} if path and path.strip() else None
    if kind in ("url", "sitemap"):
        url = content if isinstance(content, str) and content.strip() else item.get("sourceUrl")
        return {"url": url} if isinstance(url, str) and url.strip() else None
    return None
