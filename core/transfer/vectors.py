"""A base's index in an export document (`ktui base export --vectors`): every item of every
level and every chunk with its vector, so an import into a data directory whose model
and width match restores the base without embedding anything again (docs/export-format.md).

Export reads the catalogue rows and the store's rows as stored (`read_rows`, a page at a
time). Import gives every item and chunk a new id (a document may be imported twice
into one catalogue, `--again`), keeps statuses, data, errors and timestamps, inserts the
items in one catalogue transaction (containers before their children) and the chunks in
batches into the new base's store. Nothing of a document is trusted: shapes, ids,
references and vector widths are checked, and the catalogue's own rules refuse the rest.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import uuid
from typing import Any

import numpy as np

from ktui.core.catalogue import Catalogue
from ktui.core.data.rows import stored_data_problem
from ktui.core.errors import InvalidOperationError, ValidationError
from ktui.core.ids import new_id
from ktui.core.models import ItemType
from ktui.core.store.protocol import ChunkStore
from ktui.core.store.rows import StoredRows, dump_metadata
from ktui.core.transfer.migrate import containers_first

_ITEM_FIELDS = ("id", "group_id", "type", "data", "status", "error", "created_at", "updated_at")
_STATUSES = ("idle", "completed", "failed")
_TYPES = ("file", "url", "note", "directory", "sitemap")
_CONTAINERS = ("directory", "sitemap")


async def export_index(db: Catalogue, store: ChunkStore, base_id: str, name: str, *, batch: int = 1000) -> dict[str, Any]:
    """The `index` of one base's export entry: its items and its chunks with their vectors
    (base64 of little-endian float32). Refused while items of the base are being indexed."""
    row = await db.fetchone("SELECT count(*) FROM knowledge_item WHERE base_id = ? AND status = 'processing'", [base_id])
    if row and int(row[0]):
        raise InvalidOperationError(
            f"Base '{name}' is being indexed ({int(row[0])} item(s) processing): its vectors cannot be exported "
            "yet; wait until it is done (`ktui wait`) or export without --vectors")
    items = []
    for r in await db.fetchall(f"SELECT {', '.join(_ITEM_FIELDS)} FROM knowledge_item WHERE base_id = ? ORDER BY rowid",
                               [base_id]):
        entry = dict(zip(_ITEM_FIELDS, r, strict=True))
        entry["data"] = json.loads(entry["data"])
        items.append(entry)
    chunks: list[dict[str, Any]] = []
    rows = await asyncio.to_thread(store.read_rows, 0, batch)
    while len(rows):
        vectors = np.ascontiguousarray(rows.vectors, dtype="<f4")
        for i, cid in enumerate(rows.ids):
            try:
                metadata = json.loads(rows.metadata[i]) if rows.metadata[i] else {}
            except ValueError:
                metadata = {}
            chunks.append({"id": cid, "item_id": rows.item_ids[i], "chunk_index": rows.indexes[i],
                           "text": rows.texts[i], "metadata": metadata if isinstance(metadata, dict) else {},
                           "vector": base64.b64encode(vectors[i].tobytes()).decode("ascii")})
        rows = await asyncio.to_thread(store.read_rows, rows.seqs[-1], batch)
    return {"dimensions": store.dimensions, "items": items, "chunks": chunks}


def index_problem(index: Any, dimensions: int | None) -> str | None:
    """Why a document's `index` cannot be restored as it is here (None: it can)."""
    if not isinstance(index, dict):
        return "'index' is not an object"
    if index.get("dimensions") != dimensions:
        return (f"its vectors are {index.get('dimensions')!r} wide, the model gives {dimensions} here")
    if not isinstance(index.get("items"), list) or not isinstance(index.get("chunks"), list):
        return "'index' has no 'items' and 'chunks' lists"
    if any(isinstance(i, dict) and i.get("status") == "processing" for i in index["items"]):
        return "it was exported while items were being indexed"
    return None


async def restore_index(db: Catalogue, store: ChunkStore, base_id: str, index: dict[str, Any], *,
                        batch: int = 1000) -> tuple[list[str], int]:
    """Create the index's items in the (new, empty) base and write its chunks with their
    vectors; returns the new ids of the top-level items and the number of chunks.
    ValidationError names the first entry that is not usable (the caller discards the base)."""
    items, ids = _clean_items(index["items"], base_id)
    dims = store.dimensions
    chunk_rows = _clean_chunks(index["chunks"], ids, dims)
    ready, waiting = containers_first([tuple(i) for i in items], set())
    if waiting:
        raise ValidationError.field("index.items", f"{len(waiting)} item(s) belong to a folder the index does not hold")
    async with db.transaction() as conn:
        await conn.executemany(
            "INSERT INTO knowledge_item (id, base_id, group_id, type, data, status, phase, error, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?, ?)",
            ready)
    for start in range(0, len(chunk_rows), batch):
        part = chunk_rows[start : start + batch]
        rows = StoredRows(list(range(start, start + len(part))), [p[0] for p in part], [p[1] for p in part],
                          [p[2] for p in part], [p[3] for p in part], [p[4] for p in part],
                          np.stack([p[5] for p in part]))
        await asyncio.to_thread(store.write_rows, rows, settle=start + batch >= len(chunk_rows))
    return [r[0] for r in ready if r[2] is None], len(chunk_rows)


def _clean_items(raw: list[Any], base_id: str) -> tuple[list[list[Any]], dict[str, str]]:
    """Item rows with new ids (old id -> new id in the mapping), or ValidationError."""
    ids: dict[str, str] = {}
    kinds: dict[str, Any] = {}
    for n, entry in enumerate(raw):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or entry["id"] in ids:
            raise ValidationError.field(f"index.items[{n}]", "needs a unique string 'id'")
        ids[entry["id"]] = new_id()  # time-ordered, in the document's order: ties sort alike
        kinds[entry["id"]] = entry.get("type")
    rows: list[list[Any]] = []
    for n, entry in enumerate(raw):
        label = f"index.items[{n}]"
        kind, status, group = entry.get("type"), entry.get("status"), entry.get("group_id")
        if kind not in _TYPES or status not in _STATUSES or not isinstance(entry.get("data"), dict):
            raise ValidationError.field(label, "needs a known 'type', a 'status' of idle, completed or failed "
                                               "and a 'data' object")
        if (problem := stored_data_problem(ItemType(kind), entry["data"])) is not None:
            raise ValidationError.field(f"{label}.data", f"{problem} (a {kind} item's data)")
        if group is not None and kinds.get(group) not in _CONTAINERS:
            raise ValidationError.field(label, "'group_id' names no folder or sitemap of the index")
        error = entry.get("error") if status == "failed" else None
        if status == "failed" and (not isinstance(error, str) or not error.strip()):
            error = "failed before it was exported"
        stamps = [entry.get("created_at"), entry.get("updated_at")]
        if not all(isinstance(s, str) and s for s in stamps):
            raise ValidationError.field(label, "needs 'created_at' and 'updated_at'")
        rows.append([ids[entry["id"]], base_id, ids[group] if group is not None else None, kind,
                     json.dumps(entry["data"], ensure_ascii=False), status, error, *stamps])
    return rows, ids


def _clean_chunks(raw: list[Any], ids: dict[str, str], dims: int) -> list[tuple[str, str, int, str, str, np.ndarray]]:
    out = []
    seen: set[tuple[str, int]] = set()
    for n, entry in enumerate(raw):
        label = f"index.chunks[{n}]"
        if not isinstance(entry, dict) or entry.get("item_id") not in ids:
            raise ValidationError.field(label, "'item_id' names no item of the index")
        index, text, metadata = entry.get("chunk_index"), entry.get("text"), entry.get("metadata", {})
        if isinstance(index, bool) or not isinstance(index, int) or index < 0 or not isinstance(text, str) \
                or not isinstance(metadata, dict):
            raise ValidationError.field(label, "needs a 'chunk_index' >= 0, a 'text' and a 'metadata' object")
        item = ids[entry["item_id"]]
        if (item, index) in seen:
            raise ValidationError.field(label, "repeats an item's chunk_index")
        seen.add((item, index))
        try:
            vector = np.frombuffer(base64.b64decode(str(entry.get("vector", "")), validate=True), dtype="<f4")
        except (binascii.Error, ValueError):
            raise ValidationError.field(label, "'vector' is not base64 of float32 values") from None
        if vector.shape != (dims,) or not np.isfinite(vector).all():
            raise ValidationError.field(label, f"'vector' must hold {dims} finite float32 values")
        if "item_id" in metadata:
            metadata = {**metadata, "item_id": item}
        out.append((uuid.uuid4().hex, item, index, text, dump_metadata(metadata), vector.astype(np.float32)))
    return out
