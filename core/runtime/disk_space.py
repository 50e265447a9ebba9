"""A full disk pauses the queue; it resumes by itself once there is space again.

When a write fails with "no space left", the running items fail with that cause,
the pending ones wait, and a probe looks for free space every `probe_interval`
seconds. A reserve file (LOW_SPACE_BYTES, kept while there is room) is deleted
first, so the failures themselves can still be written and nothing is left
`processing` without a word. Once space is back the queue resumes and the
recovery re-queues what the full disk failed.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from ktui.core.errors import DiskFullError
from ktui.core.runtime.queue import TaskQueue
from ktui.core.storage_faults import LOW_SPACE_BYTES, free_bytes

log = logging.getLogger(__name__)

RESERVE_FILENAME = ".space-reserve"
SPACE_PROBE_S = 1.0  # how often a queue paused by a full disk looks for free space again


class SpaceGuard:
    """Pauses `queue` on a full disk and resumes it (then calls `on_space_back`)."""

    def __init__(
        self,
        queue: TaskQueue,
        data_dir: Path | str,
        on_space_back: Callable[[], Awaitable[object]],
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.queue = queue
        self.data_dir = Path(data_dir)
        self.on_space_back = on_space_back
        self.probe_interval = SPACE_PROBE_S
        self._sleep = sleep  # injectable: a test decides when the probe runs
        self._watch: asyncio.Task[None] | None = None  # runs while a full disk pauses the queue
        self._closed = False

    async def start(self) -> None:
        """Write the reserve when there is clearly room for it."""
        space = await asyncio.to_thread(free_bytes, self.data_dir)
        if space is None or space > 4 * LOW_SPACE_BYTES:
            await asyncio.to_thread(self.make_reserve)

    def close(self) -> None:
        self._closed = True
        if self._watch is not None:
            self._watch.cancel()

    def pause_for_space(self, exc: DiskFullError) -> None:
        """Stop starting work (the running items fail with the cause, the pending ones wait)
        and look for free space every `probe_interval` seconds; once there is some,
        resume and retry what the full disk failed."""
        if self._closed or self.queue.paused is not None:
            return
        log.warning("queue paused: %s", exc)
        self.release_reserve()  # room for recording the failures
        self.queue.pause(str(exc))
        self._watch = asyncio.get_running_loop().create_task(self._wait_for_space())

    async def _wait_for_space(self) -> None:
        try:
            while not self._closed:
                await self._sleep(self.probe_interval)
                if await asyncio.to_thread(self.space_is_back):
                    break
            if self._closed:
                return
            self.queue.resume()
            await self.on_space_back()  # the items the full disk failed (or left processing) run again
        except asyncio.CancelledError:
            raise
        except DiskFullError as exc:  # filled up again while recovering
            self._watch = None
            self.queue.resume()
            self.pause_for_space(exc)
        except Exception:
            log.exception("could not resume after the disk was full")
        finally:
            if self._watch is asyncio.current_task():
                self._watch = None

    def space_is_back(self) -> bool:
        """Free space above the floor and the reserve could be written again (statvfs
        alone lies on quota'd and compressed file systems)."""
        space = free_bytes(self.data_dir)
        if space is not None and space < 2 * LOW_SPACE_BYTES:
            return False
        return self.make_reserve()

    @property
    def reserve_path(self) -> Path:
        return self.data_dir / RESERVE_FILENAME

    def make_reserve(self) -> bool:
        """Keep LOW_SPACE_BYTES of the disk in a file of our own (see the module docstring)."""
        path = self.reserve_path
        try:
            if path.is_file() and path.stat().st_size >= LOW_SPACE_BYTES:
                return True
            with open(path, "wb") as fh:
                fh.write(b"\0" * LOW_SPACE_BYTES)
                fh.flush()
                os.fsync(fh.fileno())
            return True
        except OSError:
            try:
                path.unlink()
            except OSError:
                pass
            return False

    def release_reserve(self) -> None:
        try:
            self.reserve_path.unlink()
        except OSError:
            pass
