"""One process per data directory.

Each open KnowledgeService runs a runtime that owns the base stores' in-memory
matrices and re-queues unfinished work at start; two processes on one data
directory would index the same items twice and let the matrices drift from
the files. An advisory lock (flock) on `<data_dir>/ktui.lock` makes the second
opener fail at once with a clear message. The kernel drops the lock when the
holder exits, even on SIGKILL, so a crash never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ktui.core.errors import InvalidOperationError

LOCK_NAME = "ktui.lock"


class DataDirLock:
    def __init__(self, data_dir: Path):
        self.path = Path(data_dir) / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise InvalidOperationError(
                f"The data directory {self.path.parent} is in use by ktui (pid {holder}); "
                "close it first or choose another --data-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
