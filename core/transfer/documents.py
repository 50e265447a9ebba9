"""Reading a document (a file or stdin) and recognising its shape: ktui's export or a legacy backup."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ktui.core.errors import ValidationError
from ktui.core.transfer.cleaning import (
    _base_entries,
    _clean_name,
    _dims_or_none,
    _model_or_none,
    _plan_item,
    clean_config,
)
from ktui.core.transfer.legacy import parse_legacy_backup
from ktui.core.transfer.reports import (
    CONFIG_KEYS,
    EXPORT_FORMAT,
    EXPORT_VERSION,
    BasePlan,
    ParsedDocument,
)

# --- reading documents ----------------------------------------------------


# An export holds text and settings (with --vectors also ~1.4 x 4 bytes per dimension and
# chunk: 100k chunks of 384 dimensions ~ 200 MB more); $KTUI_IMPORT_MAX_MB changes it.
MAX_IMPORT_BYTES = max(1, int(os.environ.get("KTUI_IMPORT_MAX_MB", "256") or 256)) << 20


def read_document(path: Path | str) -> dict[str, Any]:
    """Load a JSON document from a file ('-' is stdin), naming the file in any error."""
    import sys

    label = "stdin" if str(path) == "-" else str(path)
    limit = MAX_IMPORT_BYTES
    try:
        if str(path) == "-":
            raw = sys.stdin.buffer.read(limit + 1)
        else:
            with open(Path(path).expanduser(), "rb") as fh:  # a FIFO or /dev/zero has no size: read a bounded amount
                raw = fh.read(limit + 1)
        if len(raw) > limit:
            raise ValidationError.field(
                "file", f"{label} is larger than the import limit of {limit // (1 << 20)} MiB "
                f"(an export of ktui is far smaller; is this the right file?)")
        text = raw.decode("utf-8")
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
        plan.index = raw.get("index")
        parsed.plans.append(plan)
    return parsed
