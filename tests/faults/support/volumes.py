"""Real small file systems for fault tests: a tmpfs the test mounts and unmounts.

Needs root (the test machine and CI run as root). Where mounting is not permitted
the test is skipped with that reason rather than faked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(where: Path, size: str = "16m") -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        pytest.skip("no mount command: cannot make a small file system")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {proc.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)
        if os.path.ismount(where):
            subprocess.run(["umount", "-l", str(where)], check=False)


def fill(volume: Path, leave: int) -> Path:
    """Fill the volume with a ballast file until only `leave` bytes are free."""
    st = os.statvfs(volume)
    free = st.f_bavail * st.f_frsize
    ballast = volume / "ballast"
    with open(ballast, "wb") as fh:
        chunk = b"\0" * (1 << 20)
        remaining = max(0, free - leave)
        while remaining > 0:
            fh.write(chunk[: min(len(chunk), remaining)])
            remaining -= min(len(chunk), remaining)
    return ballast


def drop_privileges_prefix() -> list[str]:
    """A command prefix that runs the child as root *without* the capabilities that
    bypass file permissions, so mode bits apply to it as to any user."""
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is not installed: cannot drop CAP_DAC_OVERRIDE")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
