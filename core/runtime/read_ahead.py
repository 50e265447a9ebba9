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
the file's size, modification time, status-change time and inode the same as
just before it was read (ctime cannot be set back by tools that restore an mtime,
and a replaced file has a new inode). A changed file, a deleted or re-queued item
or a failed read of a file that has changed since reads the file again the normal
way. A read that failed on a file that has not changed (a parser timeout, a crash,
unreadable content) fails the task with that error at once: reading it again
would only fail again, after another timeout.

Embed-ahead: the files are read ahead in groups (the window refills when it is
half empty), and once a group is read its chunk texts are embedded into the
cache in one call (`EmbeddingService.embed_ahead`). With `depth` files ahead (at
least a provider batch of them, whatever `concurrency` is) the embedding requests
fill up to the provider's batch size across files, instead of carrying the few
texts of the five files that happen to run at once; the task
that later indexes the file finds its vectors in the cache, or joins the
request still in flight. Content-keyed, so a file that changed meanwhile only
leaves an unused cache entry behind.

OCR progress: a scan read ahead reports its pages as they are recognised; the
report is kept with the read and passed on only once the item's own task takes
it (`take(..., on_progress=)`), so a queued item never looks as if it ran.

Read-ahead never changes an item's status, and it only runs with worker processes
(`ingest.parse_workers` >= 1), whose time it would otherwise waste. The stat calls
run on the event loop: they are microseconds on a file that was just read.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ktui.core.config import IngestSettings
from ktui.core.data.item_service import KnowledgeItemService
from ktui.core.errors import IngestError
from ktui.core.models import Chunk, FileItemData, KnowledgeBase, KnowledgeItem
from ktui.core.runtime.parse_pool import ParsePool
from ktui.core.runtime.queue import TaskKind, TaskQueue

if TYPE_CHECKING:
    from ktui.core.ingest.ocr.options import OcrOptions

log = logging.getLogger(__name__)

Parsed = tuple[list[Chunk], FileItemData]
Stamp = tuple[int, int, int, int]  # size, mtime_ns, ctime_ns, inode
EmbedAhead = Callable[[KnowledgeBase, list[str]], Awaitable[None]]


ProgressFn = Callable[[int, int], None]


class _PageProgress:
    """The last (done, total) a read ahead reported, and who hears it once the item runs."""

    __slots__ = ("last", "listener")

    def __init__(self) -> None:
        self.last: tuple[int, int] | None = None
        self.listener: ProgressFn | None = None

    def report(self, done: int, total: int) -> None:
        self.last = (done, total)
        if self.listener is not None:
            self.listener(done, total)

    def listen(self, listener: ProgressFn | None) -> None:
        self.listener = listener
        if listener is not None and self.last is not None:
            listener(*self.last)


@dataclass(frozen=True)
class _Ahead:
    path: str
    chunk_size: int
    chunk_overlap: int
    stamp: Stamp  # the file just before it was read
    ocr: OcrOptions | None  # what OCR the read was allowed
    task: asyncio.Task[Parsed]
    progress: _PageProgress


class ReadAhead:
    def __init__(self, queue: TaskQueue, items: KnowledgeItemService, parse_pool: ParsePool,
                 settings: IngestSettings, depth: int, embed_ahead: EmbedAhead | None = None,
                 ocr_for: Callable[[KnowledgeBase], OcrOptions | None] = lambda base: None):
        self.queue = queue
        self.items = items
        self.parse_pool = parse_pool
        self.settings = settings
        self.depth = depth
        self.embed_ahead = embed_ahead
        self.ocr_for = ocr_for
        self._ahead: dict[str, _Ahead] = {}  # item id -> its read in progress or done
        self._loading: set[str] = set()  # item ids whose rows are being fetched
        self._tasks: set[asyncio.Task[object]] = set()  # every background task, until it ends
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
        ahead = len(self._ahead) + len(self._loading)
        if ahead > self.depth // 2:
            return  # refill in halves: each group of reads shares embedding requests
        wanted = [
            i for i in self.queue.next_pending(TaskKind.INDEX_LEAF, base.id, self.depth)
            if i not in self._ahead and i not in self._loading
        ][: self.depth - ahead]
        if wanted:
            self._loading.update(wanted)
            self._spawn(self._start(base, wanted))

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()  # an unused read-ahead's failure is not news: mark it seen

    async def _start(self, base: KnowledgeBase, item_ids: list[str]) -> None:
        from ktui.core.ingest.pipeline import read_and_chunk_file  # not at import: searches never read

        try:
            items = await self.items.get_many(item_ids)
        except Exception:  # the catalogue is busy or closing: the tasks read for themselves
            log.debug("read-ahead skipped", exc_info=True)
            return
        finally:
            self._loading.difference_update(item_ids)
        reads: list[asyncio.Task[Parsed]] = []
        for item in items:
            if not self.enabled or not isinstance(item.data, FileItemData) or not self.queue.is_pending(item.id):
                continue
            stamp = _stamp(item.data.path)
            if stamp is None:
                continue  # gone or unreadable: the task reports it
            ocr = self.ocr_for(base)
            progress = _PageProgress()
            task = self._spawn(self.parse_pool.run(
                item.source, "read_and_chunk_file", read_and_chunk_file,
                item.data, item.id, self.settings, base.chunk_size, base.chunk_overlap, ocr,
                on_progress=progress.report if ocr is not None and ocr.enabled else None,
            ))
            self._ahead[item.id] = _Ahead(item.data.path, base.chunk_size, base.chunk_overlap, stamp, ocr, task,
                                          progress)
            reads.append(task)
        if reads and self.embed_ahead is not None:
            self._spawn(self._embed_when_read(base, reads))

    async def _embed_when_read(self, base: KnowledgeBase, reads: list[asyncio.Task[Parsed]]) -> None:
        """Embed a group's chunks in one call, once the group is read: its texts share requests."""
        assert self.embed_ahead is not None
        results = await asyncio.gather(*(asyncio.shield(r) for r in reads), return_exceptions=True)
        texts = [c.text for r in results if not isinstance(r, BaseException) for c in r[0]]
        if texts and not self._closed:  # failed reads are left to their tasks to report
            await self.embed_ahead(base, texts)

    async def take(self, item: KnowledgeItem, base: KnowledgeBase,
                   on_progress: ProgressFn | None = None) -> Parsed | None:
        """The chunks read ahead for `item`, or None when there are none it may use.
        `on_progress` hears the read's OCR progress from now on (the last report at once)."""
        ahead = self._ahead.pop(item.id, None)
        if ahead is None or not isinstance(item.data, FileItemData):
            return None
        if (ahead.path, ahead.chunk_size, ahead.chunk_overlap) != (item.data.path, base.chunk_size, base.chunk_overlap):
            return None
        if ahead.ocr != self.ocr_for(base):
            return None  # the base's OCR settings changed since
        ahead.progress.listen(on_progress)
        try:
            chunks, recorded = await asyncio.shield(ahead.task)  # the read goes on if this task is cancelled
        except asyncio.CancelledError:
            if ahead.task.cancelled():
                return None  # the read-ahead was called off (shutdown): read normally
            raise
        except IngestError:
            if _stamp(ahead.path) == ahead.stamp:
                raise  # the same file would fail the same way, after another timeout
            return None
        except Exception:
            return None
        finally:
            ahead.progress.listen(None)  # a read that goes on after this task is nobody's news
        unchanged = _stamp(ahead.path) == ahead.stamp and (recorded.size, recorded.mtime_ns) == ahead.stamp[:2]
        if not unchanged:
            self.stale += 1
            return None
        self.used += 1
        return chunks, recorded

    async def close(self) -> None:
        """Call off every read-ahead (after the queue has stopped) and wait for them."""
        self._closed = True
        self._ahead.clear()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _stamp(path: str) -> Stamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino
