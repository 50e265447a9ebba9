"""One writer per data directory; any number of readers beside it.

The process that holds the directory runs the runtime: it owns the queue, the
base stores' in-memory matrices, and the recovery of unfinished work. Two such
processes would index the same items twice and let the matrices drift from the
files, so an advisory lock (flock) on `<data_dir>/ktui.lock` makes the second
one fail at once. The kernel drops the lock when the holder exits, even on
SIGKILL, so a crash never leaves a stale lock behind.

Readers (`KnowledgeService.open(read_only=True)`) never touch the lock: they read
committed state through SQLite's WAL and cannot delay a holder's start.

The lock file records who holds it — one JSON object: pid, the command
(`ktui`, `ktui serve`, ...), and where to reach it (`url` for `ktui serve`) — so a
refused write can say where to send it instead. Older ktui wrote a bare pid;
that is still understood.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path

from ktui.core.errors import DataDirInUseError

LOCK_NAME = "ktui.lock"
_MAX_INFO = 4096


@dataclass(frozen=True, slots=True)
class HolderInfo:
    """Who holds a data directory, as its lock file says."""

    pid: int | None
    command: str = "ktui"
    url: str | None = None

    def alive(self) -> bool:
        """Whether the recorded process still runs (the file outlives its holder)."""
        if self.pid is None:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def describe(self) -> str:
        who = f"{self.command} (pid {self.pid})" if self.pid is not None else self.command
        return f"{who} at {self.url}" if self.url else who


def parse_holder(text: str) -> HolderInfo:
    text = text.strip()
    if not text:
        return HolderInfo(pid=None, command="another process")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, int) and not isinstance(data, bool):
        return HolderInfo(pid=data)
    if not isinstance(data, dict):
        return HolderInfo(pid=None, command="another process")
    pid = data.get("pid")
    command = data.get("command")
    url = data.get("url")
    return HolderInfo(
        pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        command=command if isinstance(command, str) and command.strip() else "ktui",
        url=url if isinstance(url, str) and url.strip() else None,
    )


def read_holder(data_dir: Path) -> HolderInfo | None:
    """What the lock file of `data_dir` says (None when there is none). Takes no lock."""
    try:
        with open(Path(data_dir) / LOCK_NAME, "rb") as fh:
            return parse_holder(fh.read(_MAX_INFO).decode(errors="replace"))
    except OSError:
        return None


class DataDirLock:
    def __init__(self, data_dir: Path):
        self.path = Path(data_dir) / LOCK_NAME
        self._fd: int | None = None

    def acquire(self, command: str = "ktui") -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = parse_holder(os.read(fd, _MAX_INFO).decode(errors="replace"))
            os.close(fd)
            raise DataDirInUseError(busy_message(self.path.parent, holder)) from None
        self._fd = fd
        self.announce(command)

    def announce(self, command: str, url: str | None = None) -> None:
        """Record who holds the directory and where to reach it (the holder calls this)."""
        if self._fd is None:
            return
        info: dict[str, object] = {"pid": os.getpid(), "command": command}
        if url:
            info["url"] = url
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, json.dumps(info).encode(), 0)

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def busy_message(data_dir: Path, holder: HolderInfo) -> str:
    """Why a write is refused, and where it can go instead."""
    if holder.url:
        where = f"send writes to it ({holder.url}, see docs/http-api.md), or close it first"
    else:
        where = "make the change there, or close it first"
    return (
        f"The data directory {data_dir} is in use by {holder.describe()}; {where}. "
        "Reading (search, base list/show, items, chunks, export) works beside it"
    )
