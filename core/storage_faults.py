"""Which failures of a write are the *file system's* fault, and what to call them.

SQLite reports a full disk as ``SQLITE_FULL`` ("database or disk is full"), a
read-only file as ``SQLITE_READONLY`` and an unopenable one as ``SQLITE_CANTOPEN``;
plain file writes raise ``OSError`` with ``ENOSPC`` / ``EACCES`` / ``EROFS``. Each
becomes one error a user can act on — "no space left on device: PATH" or
"permission denied: PATH" — instead of SQLite's wording, a traceback, or (worse)
the "cannot rollback - no transaction is active" of a ROLLBACK that SQLite already
did by itself.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from ktui.core.errors import AccessDeniedError, DiskFullError, StoreError

_FULL_ERRNOS = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
_DENIED_ERRNOS = {errno.EACCES, errno.EPERM}
_SQLITE_FULL = 13
_SQLITE_READONLY = 8
_SQLITE_CANTOPEN = 14
_SQLITE_PERM = 3
_SQLITE_IOERR = 10

#: Below this much free space (bytes) an I/O error on the data directory counts as
#: "disk full", and the paused queue does not resume.
LOW_SPACE_BYTES = 1 << 20


def free_bytes(path: Path) -> int | None:
    """Free space for an unprivileged writer on `path`'s file system (None if unknown)."""
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        st = os.statvfs(probe)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _denied_reason(path: Path) -> str:
    probe = path if path.exists() else path.parent
    try:
        if os.statvfs(probe).f_flag & os.ST_RDONLY:
            return "read-only file system"
    except OSError:
        pass
    return "permission denied"


def storage_error(exc: BaseException, path: Path | str) -> StoreError | None:
    """The DiskFullError / AccessDeniedError `exc` amounts to, or None when it is
    something else (corruption, a bug, a constraint)."""
    path = Path(path)
    if isinstance(exc, (DiskFullError, AccessDeniedError)):
        return exc
    if isinstance(exc, OSError):
        where = Path(exc.filename) if isinstance(exc.filename, str) else path
        if exc.errno in _FULL_ERRNOS:
            return DiskFullError(str(where))
        if exc.errno == errno.EROFS:
            return AccessDeniedError(str(where), "read-only file system")
        if exc.errno in _DENIED_ERRNOS:
            return AccessDeniedError(str(where))
        return None
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        primary = code & 0xFF if isinstance(code, int) else None
        text = str(exc).lower()
        if primary == _SQLITE_FULL or "disk is full" in text:
            return DiskFullError(str(path))
        if primary in (_SQLITE_READONLY, _SQLITE_PERM) or "readonly database" in text:
            return AccessDeniedError(str(path), _denied_reason(path))
        if primary == _SQLITE_CANTOPEN or "unable to open database" in text:
            if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.R_OK | os.W_OK)):
                return AccessDeniedError(str(path), _denied_reason(path))
            space = free_bytes(path)
            if space is not None and space < LOW_SPACE_BYTES:
                return DiskFullError(str(path))
            return None
        if primary == _SQLITE_IOERR or "disk i/o error" in text:
            space = free_bytes(path)
            if space is not None and space < LOW_SPACE_BYTES:
                return DiskFullError(str(path))
        return None
    return None


def rollback_quietly(con: sqlite3.Connection) -> None:
    """ROLLBACK if a transaction is still open. SQLite ends the transaction itself on
    SQLITE_FULL and some I/O errors; a second ROLLBACK would replace the real cause
    with "cannot rollback - no transaction is active"."""
    if not con.in_transaction:
        return
    try:
        con.execute("ROLLBACK")
    except sqlite3.Error:
        pass
