"""Watching folders: watchfiles events → a debounced refresh request per folder item.

One watch task per watched directory item. watchfiles already groups a burst of
file-system events (an editor's save-by-rename, a `git checkout` touching 1,000
files) into one batch after `debounce_ms` of quiet; the watcher then asks the
runtime for one incremental refresh of that folder. If the folder disappears (or
the watch itself fails), the runtime is asked to refresh too: the refresh finds
the folder missing, removes its children and fails the item saying so. The folder
stays watched meanwhile: the watcher looks for it again every `retry_s` and, once
it is back (moved back, remounted), asks for a refresh and watches it again, so a
`mv notes x; mv x notes` costs no restart. A watch whose root itself was moved or
replaced is started again too (the old one would follow the moved inode).

On a shared catalogue (`retry_missing=False`) the watch of a missing folder stops
instead: following.py gives its lease back and an eligible process takes it again
once the folder is there.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable

log = logging.getLogger(__name__)

RefreshRequest = Callable[[str, str], None]  # (base_id, item_id)


class FolderWatcher:
    def __init__(self, on_change: RefreshRequest, *, debounce_ms: int = 400, step_ms: int = 50,
                 retry_missing: bool = True, retry_s: float = 1.0):
        self._on_change = on_change
        self._debounce_ms = debounce_ms
        self._step_ms = step_ms
        self._retry_missing = retry_missing
        self._retry_s = retry_s
        self._tasks: dict[str, tuple[str, asyncio.Task[None], asyncio.Event]] = {}  # item id -> (base, task, stop)

    def watching(self, item_id: str) -> bool:
        return item_id in self._tasks

    @property
    def watched(self) -> set[str]:
        return set(self._tasks)

    def watch(self, base_id: str, item_id: str, path: str) -> None:
        if item_id in self._tasks:
            return
        stop = asyncio.Event()
        task = asyncio.create_task(self._run(base_id, item_id, path, stop), name=f"ktui-watch-{item_id}")
        self._tasks[item_id] = (base_id, task, stop)

    def unwatch(self, item_id: str) -> None:
        entry = self._tasks.pop(item_id, None)
        if entry is not None:
            entry[2].set()

    def unwatch_base(self, base_id: str) -> None:
        for item_id in [i for i, (b, _, _) in self._tasks.items() if b == base_id]:
            self.unwatch(item_id)

    async def close(self) -> None:
        entries = list(self._tasks.values())
        self._tasks.clear()
        for _, _task, stop in entries:
            stop.set()
        for _, task, _ in entries:
            task.cancel()
        await asyncio.gather(*(t for _, t, _ in entries), return_exceptions=True)

    async def _run(self, base_id: str, item_id: str, path: str, stop: asyncio.Event) -> None:
        catch_up = False  # refresh once watched again: it was missing, moved or its watch failed
        failing = False  # the last watch failed: log once per streak
        try:
            while not stop.is_set():
                if self._retry_missing and not await asyncio.to_thread(os.path.isdir, path):
                    catch_up = True
                    await self._pause(stop)
                    continue
                if catch_up:
                    catch_up = False
                    self._on_change(base_id, item_id)  # back: catch up with what it holds now
                try:
                    gone = await self._watch(base_id, item_id, path, stop)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # unmounted, permission lost, watcher limit reached...
                    if stop.is_set():
                        break
                    if not failing:
                        log.warning("watching %s stopped: %s", path, exc)
                        self._on_change(base_id, item_id)
                    failing = catch_up = True
                    if not self._retry_missing:
                        break
                    await self._pause(stop)
                    continue
                failing = False
                if gone and not self._retry_missing:
                    break
                catch_up = True  # the root was moved or replaced: the last refresh may have missed it
        finally:
            current = self._tasks.get(item_id)
            if current is not None and current[2] is stop:
                self._tasks.pop(item_id, None)

    async def _watch(self, base_id: str, item_id: str, path: str, stop: asyncio.Event) -> bool:
        """One watch of the folder, until it is stopped, the folder goes (True: the refresh
        asked for fails the item) or the folder itself was moved or replaced (False: it is
        watched anew; the old watch would follow the moved directory)."""
        import watchfiles  # here, not at import: only a watching process needs it

        root = os.path.normpath(path)
        async for changes in watchfiles.awatch(
            path,
            debounce=self._debounce_ms,
            step=self._step_ms,
            stop_event=stop,
            ignore_permission_denied=True,
        ):
            self._on_change(base_id, item_id)
            if not await asyncio.to_thread(os.path.isdir, path):
                return True
            if any(os.path.normpath(p) == root for _, p in changes):
                return False
        return False

    async def _pause(self, stop: asyncio.Event) -> None:
        """Wait `retry_s` before looking again, or less when the watch is stopped."""
        try:
            await asyncio.wait_for(stop.wait(), self._retry_s)
        except TimeoutError:
            pass
