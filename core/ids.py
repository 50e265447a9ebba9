"""Ids and times for catalogue rows: time-ordered UUIDs and sortable UTC timestamps."""

from __future__ import annotations

import os
import time
import uuid
from datetime import UTC, datetime


def utc_now() -> str:
    """ISO-8601 UTC with microseconds: sorts lexically in time order."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


_last_ms = 0
_seq = 0


def new_id() -> str:
    """A time-ordered UUID (version 7 layout) so that `id DESC` breaks created_at ties in
    insertion order within this process."""
    global _last_ms, _seq
    ms = time.time_ns() // 1_000_000
    if ms <= _last_ms:
        ms = _last_ms
        _seq += 1
        if _seq > 0xFFF:  # 12-bit counter exhausted: borrow the next millisecond
            ms += 1
            _seq = 0
    else:
        _seq = 0
    _last_ms = ms
    rand = int.from_bytes(os.urandom(8), "big")
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= (_seq & 0xFFF) << 64
    value |= (0b10 << 62) | (rand & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))
