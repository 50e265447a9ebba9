"""Read-ahead: the parse workers read and chunk the next queued files while the
running leaves embed and write.

Five leaf tasks move through their steps together: they read, then wait on one
shared embedding request, then on one group commit. While they wait, the parse
worker has nothing to do, and when they finish, the next five start by reading
again. Reading the files queued next during that wait takes the read off the
critical path: measured on the 2,000-file benchmark it is about a third of a
round of five files.

What a read-ahead must never do is index stale content, so a result is used only
when it is still what the file holds: same path and chunking as the task's, and
the file's size and modification time unchanged since it was read (the same test
the folder refresh uses). Anything else (a failed read, a changed file, a deleted
or re-queued item) reads the file again the normal way, which also reports any
error. Read-ahead never changes an item's status; it only runs with worker
processes (`ingest.parse_workers` >= 1), whose time it would otherwise waste.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass

from core.config import IngestSettings
from core.data.item_service import KnowledgeItemService
from core.ingest.pipeline import read_and_chunk_file
from core.models import Chunk, FileItemData, KnowledgeBase, KnowledgeItem
from core.runtime.parse_pool import ParsePool
from core.runtime.queue import TaskKind, TaskQueue

log = logging.getLogger(__name__)

Parsed = tuple[list[Chunk], FileItemData]


@dataclass(frozen=True)
class _Ahead:
    path: str
    chunk_size: int
    chunk_overlap: int
    task: asyncio.Task[Parsed]


class ReadAhead:
    def __init__(self, queue: TaskQueue, items: KnowledgeItemService, parse_pool: ParsePool,
                 settings: IngestSettings, depth: int):
        self.queue = queue
        self.items = items
        self.parse_pool = parse_pool
        self.settings = settings
        self.depth = depth
        self._ahead: dict[str, _Ahead] = {}  # item id -> its read in progress or done
        self._loading: set[str] = set()  # item ids whose rows are being fetched
        self._closed = False
        self.used = 0  # reads taken by their task (a figure for tests and benchmarks)
        self.stale = 0  # reads dropped because the file changed after it was read

    @property
    def enabled(self) -> bool:
        return not self._closed and self.depth > 0 and self.parse_pool.workers > 0

    def schedule(self, base: KnowledgeBase) -> None:
        """Start reading the files queued next in `base`, in the background."""
        if not self.enabled:
            return
        for item_id in [i for i in self._ahead if not self.queue.is_active(i)]:
            del self._ahead[item_id]  # dropped from the queue: its read is left to finish unused
        wanted = [
            i for i in self.queue.next_pending(TaskKind.INDEX_LEAF, base.id, self.depth)
            if i not in self._ahead and i not in self._loading
        ]
        if wanted:
            self._loading.update(wanted)
            asyncio.get_running_loop().create_task(self._start(base, wanted))

    async def _start(self, base: KnowledgeBase, item_ids: list[str]) -> None:
        try:
            items = await self.items.get_many(item_ids)
        except Exception:  # the catalogue is busy or closing: the tasks read for themselves
            log.debug("read-ahead skipped", exc_info=True)
            return
        finally:
            self._loading.difference_update(item_ids)
        for item in items:
            if not self.enabled or not isinstance(item.data, FileItemData) or not self.queue.is_pending(item.id):
                continue
            task = asyncio.get_running_loop().create_task(self.parse_pool.run(
                item.source, "read_and_chunk_file", read_and_chunk_file,
                item.data, item.id, self.settings, base.chunk_size, base.chunk_overlap,
            ))
            task.add_done_callback(_retrieve)
            self._ahead[item.id] = _Ahead(item.data.path, base.chunk_size, base.chunk_overlap, task)

    async def take(self, item: KnowledgeItem, base: KnowledgeBase) -> Parsed | None:
        """The chunks read ahead for `item`, or None when there are none it may use."""
        ahead = self._ahead.pop(item.id, None)
        if ahead is None or not isinstance(item.data, FileItemData):
            return None
        if (ahead.path, ahead.chunk_size, ahead.chunk_overlap) != (item.data.path, base.chunk_size, base.chunk_overlap):
            return None
        try:
            chunks, recorded = await asyncio.shield(ahead.task)
        except asyncio.CancelledError:
            raise
        except Exception:
            return None  # read it again: that read reports the error, if it is still there
        if not _unchanged_since(recorded):
            self.stale += 1
            return None
        self.used += 1
        return chunks, recorded

    def close(self) -> None:
        self._closed = True
        self._ahead.clear()


def _unchanged_since(recorded: FileItemData) -> bool:
    """The file still has the size and modification time it had when it was read."""
    if recorded.size is None or recorded.mtime_ns is None:
        return False
    try:
        st = os.stat(recorded.path)  # one stat of a file just read: microseconds, fine on the loop
    except OSError:
        return False
    return st.st_size == recorded.size and st.st_mtime_ns == recorded.mtime_ns


def _retrieve(task: asyncio.Task[Parsed]) -> None:
    """Mark a background read's failure as seen: an unused read-ahead's error is not news."""
    if not task.cancelled():
        task.exception()
