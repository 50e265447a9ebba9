"""Export and import of knowledge bases, including legacy desktop-client backups.

Two document shapes are read:

* ktui's own export (``{"format": "ktui-export", "version": 1, "bases": [...]}``,
  see docs/export-format.md): each base's settings and its root items' add
  payloads (notes carry their content). Vectors are never exported — they are
  rebuilt on import, so a document moves between machines and models.
* a legacy desktop AI client backup (``data.json``, backup ``version`` <= 5):
  ``localStorage["persist:cherry-studio"]`` is a JSON string whose ``knowledge``
  slice is itself a JSON string (decoded twice), with note bodies in
  ``indexedDB.knowledge_notes`` and file metadata in ``indexedDB.files``.

Parsing (`parse_document`) is pure and synchronous: it turns either shape into
`BasePlan`s and records everything it dropped or corrected on each plan's report.
`Importer` then creates the bases: a base whose embedding model is available here
becomes a normal completed base with its items queued; one whose model's provider
is not configured, or whose provider does not know the model (or cannot be
reached), is kept as data — a failed ``missing_embedding_model`` base with idle
items and no vectors — which `restore_base` turns back into a working base.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ktui.core.data.validation import (
    MAX_INPUTS_PER_CALL,
    MAX_PATH_CHARS,
    ValidItem,
    require_dimensions,
    require_http_url,
    require_model_id,
    validate_base_field,
    validate_item_input,
)
from ktui.core.errors import KnowledgeError, ProviderError, ValidationError
from ktui.core.models import (
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_CHUNK_SIZE,
    DirectoryItemData,
    FileItemData,
    ItemInput,
    ItemStatus,
    ItemType,
    KnowledgeBase,
    KnowledgeItem,
    SearchMode,
)

EXPORT_FORMAT = "ktui-export"
EXPORT_VERSION = 1
LEGACY_MAX_VERSION = 5
LEGACY_PERSIST_KEY = "persist:cherry-studio"

# Settings copied between a base and a document, in document order.
CONFIG_KEYS = (
    "emoji",
    "rerank_model_id",
    "chunk_size",
    "chunk_overlap",
    "threshold",
    "document_count",
    "search_mode",
    "hybrid_alpha",
)
LEGACY_SKIPPED_TYPES = ("memory", "video")

log = logging.getLogger(__name__)


# --- reports --------------------------------------------------------------


@dataclass(slots=True)
class SkippedEntry:
    """Something that was not imported, and why."""

    label: str
    reason: str


@dataclass(slots=True)
class BaseImportReport:
    """What happened to one base of the document.

    status: ``completed`` (runnable, items queued), ``failed`` (kept as a
    ``missing_embedding_model`` base, items idle), or ``error`` (not created;
    `reason` says why).
    """

    name: str
    source_id: str | None = None
    base_id: str | None = None
    status: str = "error"
    requested_model_id: str | None = None
    embedding_model_id: str | None = None
    dimensions: int | None = None
    reason: str | None = None
    kept: int = 0
    item_ids: list[str] = field(default_factory=list)
    skipped: list[SkippedEntry] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def skip(self, label: str, reason: str) -> None:
        self.skipped.append(SkippedEntry(label, reason))

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["skipped_count"] = len(self.skipped)
        return out


@dataclass(slots=True)
class ImportReport:
    format: str  # "ktui-export" | "legacy-backup"
    bases: list[BaseImportReport] = field(default_factory=list)
    skipped_bases: list[SkippedEntry] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every base of the document was created (possibly as a failed base)."""
        return not self.skipped_bases and all(b.status != "error" for b in self.bases)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "ok": self.ok,
            "bases": [b.to_dict() for b in self.bases],
            "skipped_bases": [asdict(s) for s in self.skipped_bases],
        }


# --- plans (parsed, not yet created) -------------------------------------


@dataclass(slots=True)
class PlannedItem:
    type: ItemType
    data: dict[str, Any]  # the add-items payload
    label: str


@dataclass(slots=True)
class BasePlan:
    name: str
    embedding_model_id: str | None
    dimensions: int | None
    config: dict[str, Any]
    group_name: str | None
    items: list[PlannedItem]
    report: BaseImportReport


@dataclass(slots=True)
class ParsedDocument:
    format: str
    plans: list[BasePlan]
    skipped_bases: list[SkippedEntry] = field(default_factory=list)


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


# --- reading documents ----------------------------------------------------


def read_document(path: Path | str) -> dict[str, Any]:
    """Load a JSON document from a file ('-' is stdin), naming the file in any error."""
    import sys

    label = "stdin" if str(path) == "-" else str(path)
    try:
        text = sys.stdin.read() if str(path) == "-" else Path(path).expanduser().read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValidationError.field("file", f"does not exist: {label}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationError.field("file", f"cannot be read: {label}: {exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError.field("file", f"{label} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ValidationError.field("file", f"{label} must hold a JSON object")
    return doc


def parse_document(doc: Any) -> ParsedDocument:
    """Recognise the document's shape and turn it into base plans."""
    if not isinstance(doc, dict):
        raise ValidationError.field("document", "must be a JSON object")
    if doc.get("format") == EXPORT_FORMAT:
        return parse_export(doc)
    if "localStorage" in doc or "indexedDB" in doc:
        return parse_legacy_backup(doc)
    raise ValidationError.field(
        "document",
        f"is neither a ktui export (format '{EXPORT_FORMAT}') nor a desktop-client backup (data.json)",
    )


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


def parse_export(doc: dict[str, Any]) -> ParsedDocument:
    version = doc.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValidationError.field("version", "must be a positive integer")
    if version > EXPORT_VERSION:
        raise ValidationError.field(
            "version", f"{version} is newer than this ktui understands ({EXPORT_VERSION}); upgrade ktui"
        )
    bases = doc.get("bases")
    if not isinstance(bases, list):
        raise ValidationError.field("bases", "must be a list")
    parsed = ParsedDocument(EXPORT_FORMAT, [])
    for raw, report in _base_entries(bases, parsed):
        name = report.name
        model = _model_or_none(raw.get("embedding_model_id"))
        report.requested_model_id = model
        dims = _dims_or_none(raw.get("dimensions"))
        config = clean_config({k: raw[k] for k in CONFIG_KEYS if k in raw}, report)
        plan = BasePlan(name, model, dims, config, _clean_name(raw.get("group")), [], report)
        seen: set[tuple[str, str]] = set()
        items = raw.get("items", [])
        if not isinstance(items, list):
            report.warnings.append("'items' is not a list; no items imported")
            items = []
        for i, entry in enumerate(items):
            label = f"items[{i}]"
            if not isinstance(entry, dict) or not isinstance(entry.get("data"), dict):
                report.skip(label, "not an item object with a 'data' mapping")
                continue
            _plan_item(plan, entry.get("type"), entry["data"], label, seen)
        parsed.plans.append(plan)
    return parsed


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


# --- shared cleaning ------------------------------------------------------


def clean_config(raw: dict[str, Any], report: BaseImportReport) -> dict[str, Any]:
    """Validate each imported setting; invalid ones are dropped (with a warning) or defaulted."""
    cfg: dict[str, Any] = {}
    for key in CONFIG_KEYS:
        if key not in raw:
            continue
        value = raw[key]
        if value is None:
            if key in ("threshold", "document_count", "rerank_model_id", "hybrid_alpha"):
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


# --- creating the bases ---------------------------------------------------


@dataclass(slots=True)
class ModelCheck:
    available: bool
    dimensions: int | None = None
    reason: str | None = None


class Importer:
    """Create the planned bases through the data services and the workflow.

    Collaborators are passed in (the facade owns them) so that this module holds
    the logic and the facade stays a thin list of methods.
    """

    def __init__(self, *, bases: Any, items: Any, workflow: Any, embeddings: Any,
                 publish: Callable[[Any], None]):
        self.bases = bases
        self.items = items
        self.workflow = workflow
        self.embeddings = embeddings
        self.publish = publish
        self._models: dict[str, ModelCheck] = {}
        self._groups: dict[str, str] | None = None

    async def run(self, parsed: ParsedDocument) -> ImportReport:
        report = ImportReport(parsed.format, skipped_bases=list(parsed.skipped_bases))
        for plan in parsed.plans:
            try:
                await self._import_base(plan)
            except KnowledgeError as exc:
                plan.report.status = "error"
                plan.report.reason = str(exc)
                plan.report.base_id = None
                plan.report.item_ids = []
                plan.report.kept = 0
            report.bases.append(plan.report)
        return report

    async def check_model(self, model_id: str | None) -> ModelCheck:
        """Is the embedding model usable here? Probes it once per import."""
        if model_id is None:
            return ModelCheck(False, reason="the document names no embedding model")
        if model_id in self._models:
            return self._models[model_id]
        provider = model_id.split("::", 1)[0]
        if not self.embeddings.has_model_provider(model_id):
            check = ModelCheck(False, reason=f"provider '{provider}' is not configured here")
        else:
            config, _ = self.embeddings.parse_model_id(model_id)
            if config.kind not in ("builtin", "ollama", "openai"):
                check = ModelCheck(False, reason=f"provider '{provider}' cannot embed (kind {config.kind})")
            else:
                try:
                    dims = await self.embeddings.detect_dimensions(model_id)
                    check = ModelCheck(True, dims)
                except ProviderError as exc:
                    check = ModelCheck(False, reason=f"model '{model_id}' is not usable here: {exc}")
        self._models[model_id] = check
        return check

    def _rerank_usable(self, model_id: str) -> bool:
        if "::" not in model_id:
            return False
        try:
            self.embeddings.check_rerank_model(model_id)  # the rule create and update apply
        except ValidationError:
            return False
        return True

    async def _group_id(self, name: str) -> str:
        if self._groups is None:  # group names are unique regardless of case
            self._groups = {g.name.casefold(): g.id for g in await self.bases.list_groups()}
        key = name.casefold()
        if key not in self._groups:
            group = await self.bases.create_group(name)
            self._groups[key] = group.id
        return self._groups[key]

    async def _import_base(self, plan: BasePlan) -> None:
        report = plan.report
        config = dict(plan.config)
        rerank = config.get("rerank_model_id")
        if rerank and not self._rerank_usable(rerank):
            report.warnings.append(f"rerank model '{rerank}' is not available here; cleared")
            config["rerank_model_id"] = None
        if plan.group_name:
            config["group_id"] = await self._group_id(plan.group_name)
        check = await self.check_model(plan.embedding_model_id)
        if check.available:
            await self._import_runnable(plan, config, check)
        else:
            await self._import_failed(plan, config, check)

    async def _import_runnable(self, plan: BasePlan, config: dict[str, Any], check: ModelCheck) -> None:
        report = plan.report
        assert plan.embedding_model_id is not None and check.dimensions is not None
        if plan.dimensions is not None and plan.dimensions != check.dimensions:
            report.warnings.append(
                f"dimensions {plan.dimensions} in the document differ from the model's {check.dimensions} "
                "here; using the model's"
            )
        accepted: list[ItemInput] = []
        for item in plan.items:
            try:
                valid = validate_item_input(ItemInput(item.type, item.data), item.label)
            except ValidationError as exc:
                report.skip(item.label, _why_not_addable(exc))
                continue
            accepted.append(_as_input(valid))
        base = await self.workflow.create_base(plan.name, plan.embedding_model_id, check.dimensions,
                                               free_name=True, **config)
        report.base_id = base.id
        report.status = "completed"
        report.embedding_model_id = base.embedding_model_id
        report.dimensions = base.dimensions
        try:
            for start in range(0, len(accepted), MAX_INPUTS_PER_CALL):
                created = await self.workflow.add_items(base.id, accepted[start : start + MAX_INPUTS_PER_CALL])
                report.item_ids.extend(i.id for i in created)
        except BaseException:
            await self._discard(base.id)
            raise
        report.kept = len(report.item_ids)

    async def _import_failed(self, plan: BasePlan, config: dict[str, Any], check: ModelCheck) -> None:
        from ktui.core.models import BaseChanged, ItemsAdded

        report = plan.report
        valid = [structural_item(item.type, item.data, item.label) for item in plan.items]
        base = await self.bases.create_failed(name=plan.name, dimensions=plan.dimensions, config=config)
        report.base_id = base.id
        report.status = "failed"
        report.reason = check.reason
        report.dimensions = base.dimensions
        self.publish(BaseChanged(base.id))
        try:
            for start in range(0, len(valid), 500):
                created = await self.items.create_roots(base.id, valid[start : start + 500], status=ItemStatus.IDLE)
                report.item_ids.extend(i.id for i in created)
        except BaseException:
            await self._discard(base.id)
            raise
        if report.item_ids:
            self.publish(ItemsAdded(base.id, tuple(report.item_ids), None))
        report.kept = len(report.item_ids)

    async def _discard(self, base_id: str) -> None:
        try:
            await self.workflow.delete_base(base_id)
        except KnowledgeError:  # best effort: the original error is what the user needs
            log.exception("could not delete the partially imported base %s", base_id)


def _as_input(valid: ValidItem) -> ItemInput:
    data = valid.data
    if valid.type == ItemType.NOTE:
        payload: dict[str, Any] = {"content": data.content}
        if data.source_url:
            payload["source_url"] = data.source_url
    elif valid.type == ItemType.DIRECTORY:
        payload = {"path": data.path, "watch": data.watch}
    elif valid.type == ItemType.FILE:
        payload = {"path": data.path}
    else:
        payload = {"url": data.url}
    return ItemInput(valid.type, payload)


def _why_not_addable(exc: ValidationError) -> str:
    message = next(iter(exc.errors.values()), str(exc))
    if "does not exist" in message:
        return f"path {message} on this machine (a runnable base can only index existing paths)"
    return message


# --- naming bases and items (the CLI and the TUI's command palette) -------

MAX_LISTED_CANDIDATES = 8


def resolve_base(bases: Sequence[KnowledgeBase], ref: Any) -> KnowledgeBase:
    """A base by id, unique name, unique id prefix or suffix (4+ characters), or case-insensitive name.

    Ids are time-ordered UUIDs: their prefixes are shared by things created together,
    so the random tail (suffix) is usually the shorter unique handle.
    """
    if not isinstance(ref, str) or not ref.strip():
        raise ValidationError.field("base", "must be a base id or name")
    ref = ref.strip()
    for stage in (
        lambda b: b.id == ref,
        lambda b: b.name == ref,
        lambda b: len(ref) >= 4 and (b.id.startswith(ref) or b.id.endswith(ref)),
        lambda b: b.name.casefold() == ref.casefold(),
    ):
        hits = [b for b in bases if stage(b)]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise ValidationError.field("base", _ambiguous(ref, "bases", [f"{b.name} ({b.id})" for b in hits]))
    from ktui.core.errors import NotFoundError

    raise NotFoundError("Knowledge base", ref)


def resolve_item(items: Sequence[KnowledgeItem], ref: Any) -> KnowledgeItem:
    """An item by id, unique id prefix or suffix (4+ characters), source (path / URL) or display name."""
    if not isinstance(ref, str) or not ref.strip():
        raise ValidationError.field("item", "must be an item id, id prefix, source or name")
    ref = ref.strip()
    absolute = os.path.abspath(os.path.expanduser(ref))
    for stage in (
        lambda i: i.id == ref,
        lambda i: len(ref) >= 4 and (i.id.startswith(ref) or i.id.endswith(ref)),
        lambda i: i.source == ref or i.source == absolute,
        lambda i: i.display_name == ref,
        lambda i: i.display_name.casefold() == ref.casefold(),
    ):
        hits = [i for i in items if stage(i)]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise ValidationError.field(
                "item", _ambiguous(ref, "items", [f"{i.type.value} {i.display_name} ({i.id})" for i in hits])
            )
    from ktui.core.errors import NotFoundError

    raise NotFoundError("Item", ref)


def _ambiguous(ref: str, what: str, labels: list[str]) -> str:
    shown = ", ".join(labels[:MAX_LISTED_CANDIDATES])
    more = f" and {len(labels) - MAX_LISTED_CANDIDATES} more" if len(labels) > MAX_LISTED_CANDIDATES else ""
    return f"'{ref}' matches {len(labels)} {what}: {shown}{more}; name one by its id"


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


__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "BaseImportReport",
    "ImportReport",
    "Importer",
    "ParsedDocument",
    "SkippedEntry",
    "build_export",
    "export_entry",
    "parse_document",
    "read_document",
    "resolve_base",
    "resolve_item",
]
