"""Reports and plans of an import: what a document will create and what happened to each base."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ktui.core.data.base_validation import BASE_PATCHABLE
from ktui.core.models import ItemType

EXPORT_FORMAT = "ktui-export"
EXPORT_VERSION = 1
LEGACY_MAX_VERSION = 5
LEGACY_PERSIST_KEY = "persist:cherry-studio"

# Settings copied between a base and a document, in document order: every setting a
# base can be patched with, but its name and group (a document carries those apart),
# so a new base setting travels in exports without a second list to remember.
CONFIG_KEYS = tuple(key for key in BASE_PATCHABLE if key not in ("name", "group_id"))
LEGACY_SKIPPED_TYPES = ("memory", "video")



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
    ``missing_embedding_model`` base, items idle), ``duplicate`` (the same base was
    imported before and still exists: `base_id` names it, nothing was created), or
    ``error`` (not created; `reason` says why).
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
    vectors: int = 0  # chunks restored with their vectors from the document's index (nothing queued)
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
    fingerprint: str = ""
    index: Any = None  # the document's `index` (an export with --vectors), checked when imported  # set by the importer (ktui.core.data.imports.fingerprint)


@dataclass(slots=True)
class ParsedDocument:
    format: str
    plans: list[BasePlan]
    skipped_bases: list[SkippedEntry] = field(default_factory=list)
