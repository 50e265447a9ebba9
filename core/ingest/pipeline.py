"""Reading a file item in one pass: fingerprint, read, parse, chunk.

This is the CPU-heavy step of indexing a file. It takes and returns plain,
picklable values so the runtime can run it in a separate process (see
core/runtime/parse_pool.py): parsing then uses the second core instead of
competing for the event loop's interpreter lock.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, replace

from ktui.core.config import IngestSettings
from ktui.core.errors import IngestError, KnowledgeError
from ktui.core.ingest.chunking import chunk_documents
from ktui.core.ingest.ocr.options import OcrOptions, ProgressFn
from ktui.core.ingest.ocr.pages import OcrContext
from ktui.core.ingest.readers import is_supported_file, parse_bytes, read_file_bytes
from ktui.core.models import Chunk, FileItemData, ItemType

HASH_BLOCK = 1 << 20


@dataclass(frozen=True, slots=True)
class Fingerprint:
    size: int
    mtime_ns: int
    sha256: str


def file_fingerprint(path: str) -> Fingerprint:
    """Size, mtime and sha256 of a file (blocking: run it in a thread)."""
    st = os.stat(path)
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(HASH_BLOCK):
            digest.update(block)
    return Fingerprint(st.st_size, st.st_mtime_ns, digest.hexdigest())




def chunking_signature(chunk_size: int, chunk_overlap: int) -> str:
    return f"{chunk_size}/{chunk_overlap}"


def with_fingerprint(data: FileItemData, fp: Fingerprint, chunking: str) -> FileItemData:
    return replace(data, size=fp.size, mtime_ns=fp.mtime_ns, sha256=fp.sha256, chunking=chunking)



def read_and_chunk_file(
    data: FileItemData,
    item_id: str,
    settings: IngestSettings,
    chunk_size: int,
    chunk_overlap: int,
    ocr: OcrOptions | None = None,
    progress: ProgressFn | None = None,
) -> tuple[list[Chunk], FileItemData]:
    """A file item's chunks, and its payload with the fingerprint (and OCR summary) to record.

    The size and mtime are taken before reading and the hash from the bytes read, so
    the record is never newer than what was indexed. `ocr` None means no OCR; `progress`
    is told (pages done, pages to do) while pages are recognised.
    """
    if not is_supported_file(data.path):
        raise IngestError(f"Unsupported file type: {data.path}")
    try:
        st = os.stat(data.path)
    except OSError:
        st = None  # read_file_bytes reports the real problem
    raw = read_file_bytes(data.path, settings.max_file_bytes)
    sha256 = hashlib.sha256(raw).hexdigest()
    context = OcrContext(ocr, sha256, progress) if ocr is not None else None
    documents = parse_bytes(raw, data.path, data.source or data.path, context)
    chunks = chunk_documents(
        documents,
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        item_id=item_id,
        item_type=ItemType.FILE,
        source=data.source or data.path,
    )
    summary = context.report.summary() if context is not None else None
    if st is None:
        return chunks, replace(data, ocr=summary)
    fingerprint = Fingerprint(st.st_size, st.st_mtime_ns, sha256)
    return chunks, replace(with_fingerprint(data, fingerprint, chunking_signature(chunk_size, chunk_overlap)), ocr=summary)


FileOutcome = tuple[str, object, object]
"""One file of `read_and_chunk_files`: ("ok", chunks, recorded payload) or
("error", message, is_ingest_error)."""


def read_and_chunk_files(
    files: list[tuple[FileItemData, str]],
    settings: IngestSettings,
    chunk_size: int,
    chunk_overlap: int,
) -> list[FileOutcome]:
    """`read_and_chunk_file` for many plain-text files in one call (one parse-pool task).

    What a parse worker costs per call (a pickle each way, a pipe round trip, the
    event loop waking for the answer) is what a small file costs to read, so the
    runtime hands a batch of them over at once. Each file's failure is its own
    outcome, with the message the one-file path gives (the pool's wording for a
    parser bug), so one bad file never fails the others. No OCR: only plain text
    is batched.
    """
    outcomes: list[FileOutcome] = []
    for data, item_id in files:
        try:
            chunks, recorded = read_and_chunk_file(data, item_id, settings, chunk_size, chunk_overlap)
        except MemoryError:
            raise  # the worker's own handling: it restarts, and the batch is read file by file
        except KnowledgeError as exc:  # what the worker counts as an ingest error
            outcomes.append(("error", str(exc), True))
        except Exception as exc:  # a parser bug: reported on that file alone
            outcomes.append(("error", f"{type(exc).__name__}: {exc}", False))
        else:
            outcomes.append(("ok", chunks, recorded))
    return outcomes
