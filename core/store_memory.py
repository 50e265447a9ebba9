"""`[store] build_memory`: the PostgreSQL memory size an HNSW index is built with.

The value ends up in ``SET maintenance_work_mem = <literal>`` on the store's connection, so
it is read by a strict pattern (digits and one of PostgreSQL's memory units, nothing else)
and rebuilt from the parsed number and unit: the user's text never reaches SQL, and the
SQL side still passes it as a ``sql.Literal``. No driver is imported here (the settings
of a SQLite user are checked without psycopg).

Bounds (settings file only, ``MIN_BUILD_MEMORY``..``MAX_BUILD_MEMORY``): below 64 MB
(PostgreSQL's own default) a base of HNSW size is built almost wholly on disk; above
64 GB is more than any machine ktui targets has, and the server would refuse or swap.
"""

from __future__ import annotations

import re

BUILD_MEMORY = "512MB"  # the default: a 100k x 768 base builds in memory, a 1M x 384 one does not
UNITS_KB = {"kB": 1, "MB": 1024, "GB": 1024**2, "TB": 1024**3}  # PostgreSQL's spellings, in kB
MIN_BUILD_MEMORY_KB = 64 * 1024  # 64MB
MAX_BUILD_MEMORY_KB = 64 * 1024**2  # 64GB
# at most 12 digits: a number no bound check needs a big integer for; ASCII digits only
_MEMORY = re.compile(r"([0-9]{1,12}) ?(kB|MB|GB|TB)", re.ASCII | re.IGNORECASE)
_CANONICAL = {unit.lower(): unit for unit in UNITS_KB}


class MemorySizeError(ValueError):
    """Why a memory size cannot be used; the message names no field (the caller does)."""


def parse_memory(value: object) -> tuple[int, str]:
    """``value`` as (kilobytes, canonical text) when it is a whole number and a PostgreSQL
    memory unit (``"512MB"``, ``"4GB"``, ``"262144kB"``; the unit's case is forgiven and
    normalised, one space before it allowed); else MemorySizeError. No bounds."""
    if not isinstance(value, str):
        raise MemorySizeError('must be a string with a unit, e.g. "512MB" or "4GB"')
    match = _MEMORY.fullmatch(value)
    if match is None:
        raise MemorySizeError('must be a whole number and one of the units kB, MB, GB, TB, e.g. "512MB" or "4GB"')
    number, unit = int(match[1]), _CANONICAL[match[2].lower()]
    return number * UNITS_KB[unit], f"{number}{unit}"


def check_build_memory(value: object) -> str:
    """The canonical text of a `[store] build_memory` value within the bounds; else
    MemorySizeError saying why."""
    kb, text = parse_memory(value)
    if kb < MIN_BUILD_MEMORY_KB:
        raise MemorySizeError(f"must be at least 64MB (got {text})")
    if kb > MAX_BUILD_MEMORY_KB:
        raise MemorySizeError(f"must be at most 64GB (got {text})")
    return text


__all__ = [
    "BUILD_MEMORY",
    "MAX_BUILD_MEMORY_KB",
    "MIN_BUILD_MEMORY_KB",
    "MemorySizeError",
    "check_build_memory",
    "parse_memory",
]
