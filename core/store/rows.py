"""Small row-level helpers shared by the store's modules (no state, no I/O of their own)."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ktui.core.models import ChunkRecord

BATCH = 500  # ids per IN (...) query


def id_list(values: Iterable[str]) -> Iterable[str]:
    """A lone string is one id, not an iterable of characters."""
    return [values] if isinstance(values, str) else values


def dump_metadata(metadata: Any) -> str:
    """A chunk's metadata as JSON text. A non-UTF-8 file name (os.fsdecode gives lone
    surrogates) cannot be bound as text on either backend; \\uXXXX escapes keep it exact
    and json.loads restores it, so the chunk's source still matches its item's."""
    if metadata is None:
        return "{}"
    text = json.dumps(dict(metadata), ensure_ascii=False, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(dict(metadata), ensure_ascii=True, default=str)
    return text


def new_chunk_rows(item_id: str, chunks: Sequence[Any]) -> list[tuple[str, int, str, str]]:
    """(new chunk id, index, text, metadata JSON) of each chunk an item is written with,
    refusing a chunk without text: the step every store backend's write starts with."""
    rows: list[tuple[str, int, str, str]] = []
    for index, chunk in enumerate(chunks):
        text = getattr(chunk, "text", None)
        if not isinstance(text, str):
            raise TypeError(f"chunk {index} of item {item_id} has no text")
        rows.append((uuid.uuid4().hex, index, text, dump_metadata(getattr(chunk, "metadata", None))))
    return rows


def record(row: Sequence[Any]) -> ChunkRecord:
    cid, item_id, chunk_index, text, metadata = row
    try:
        meta = json.loads(metadata) if metadata else {}
    except ValueError:
        meta = {}
    return ChunkRecord(
        id=cid,
        item_id=item_id,
        chunk_index=int(chunk_index),
        text=text,
        metadata=meta if isinstance(meta, dict) else {},
    )


@dataclass(frozen=True, slots=True)
class StoredRows:
    """A run of a store's chunk rows exactly as stored, in insertion order: what moves between
    backends unchanged (`read_rows` / `write_rows`, used by `ktui migrate`), ids and vectors
    included, so nothing is embedded again. Columns, not row objects: a batch of 1,000
    rows of 768 dimensions is one 3 MB matrix."""

    seqs: list[int]  # the source's insertion positions: `read_rows(after=seqs[-1])` pages on
    ids: list[str]
    item_ids: list[str]
    indexes: list[int]
    texts: list[str]
    metadata: list[str]  # JSON text, as stored
    vectors: np.ndarray  # (n, dimensions) float32

    def __len__(self) -> int:
        return len(self.ids)


def batches(values: Sequence[Any], size: int = BATCH) -> Iterator[list[Any]]:
    values = list(values)
    for start in range(0, len(values), size):
        yield values[start : start + size]


_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26


def is_corruption(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return True
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text or "corrupt" in text
