"""Process checks shared by the tests that kill things (Linux /proc)."""

from __future__ import annotations


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie nobody reaps counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
