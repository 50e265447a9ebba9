"""Export and import of knowledge bases, including legacy desktop-client backups.

Two document shapes are read:

* ktui's own export (``{"format": "ktui-export", "version": 1, "bases": [...]}``,
  see docs/export-format.md): each base's settings and its root items' add
  payloads (notes carry their content). Vectors are rebuilt on import, so a
  document moves between machines and models; with ``vectors=True`` an entry also
  carries its ``index`` (every item and chunk with its vector, `vectors`), which an
  import for the same model and width restores without embedding.
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

The package is split by job: `reports` (plans and reports), `export`,
`documents` (reading a file, recognising its shape, ktui's own format), `legacy`
(the desktop-client backup), `cleaning` (settings and items shared by both
shapes), `importer` (creating the bases), `vectors` (a base's index in a document)
and `migrate` (a whole data directory to another backend, `ktui migrate`). Finding a base or an item by what a
person types lives in `ktui.core.naming`.
"""

from ktui.core.transfer.documents import parse_document, parse_export, read_document
from ktui.core.transfer.export import build_export, export_entry
from ktui.core.transfer.importer import Importer, ModelCheck
from ktui.core.transfer.legacy import legacy_model_id, parse_legacy_backup
from ktui.core.transfer.reports import (
    EXPORT_FORMAT,
    EXPORT_VERSION,
    BaseImportReport,
    BasePlan,
    ImportReport,
    ParsedDocument,
    PlannedItem,
    SkippedEntry,
)

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "BaseImportReport",
    "BasePlan",
    "ImportReport",
    "Importer",
    "ModelCheck",
    "ParsedDocument",
    "PlannedItem",
    "SkippedEntry",
    "build_export",
    "export_entry",
    "legacy_model_id",
    "parse_document",
    "parse_export",
    "parse_legacy_backup",
    "read_document",
]
