"""Watching folders: watchfiles events → a debounced refresh request per folder item.

One watch task per watched directory item. watchfiles already groups a burst of
file-system events (an editor's save-by-rename, a `git checkout` touching 1,000
files) into one batch after `debounce_ms` of quiet; the watcher then asks the
runtime for one incremental refresh of that folder. If the folder disappears (or
the watch itself fails), the runtime is asked to refresh too: the refresh finds
the folder missing, removes its children and fails the item saying so, and the
watch stops.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable

log = logging.getLogger(__name__)

RefreshRequest = Callable[[str, str], None]  # (base_id, item_id)


class FolderWatcher:
    def __init__(self, on_change: RefreshRequest, *, debounce_ms: int = 400, step_ms: int = 50):
        self._on_change = on_change
        self._debounce_ms = debounce_ms
        self._step_ms = step_ms
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
        try:
            import watchfiles  # here, not at import: only a watching process needs it

            async for _changes in watchfiles.awatch(
                path,
                debounce=self._debounce_ms,
                step=self._step_ms,
                stop_event=stop,
                ignore_permission_denied=True,
            ):
                self._on_change(base_id, item_id)
                if not os.path.isdir(path):
                    break  # the folder itself is gone: the refresh fails the item
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # unmounted, permission lost, watcher limit reached...
            log.warning("watching %s stopped: %s", path, exc)
            if not stop.is_set():
                self._on_change(base_id, item_id)
        finally:
            current = self._tasks.get(item_id)
            if current is not None and current[2] is stop:
                self._tasks.pop(item_id, None)
