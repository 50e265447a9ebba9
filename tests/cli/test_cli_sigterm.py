"""SIGTERM stops a real `ktui` command as gracefully as Ctrl+C (issue 16).

A real `ktui add --wait` process indexes through a real embedding server that is
made slow, receives a real SIGTERM while it works, and must exit 143 with one line
and no traceback, leave no parse worker behind, and leave nothing it cannot
finish: a later `ktui wait` (a holder, which recovers unfinished work) completes
every item.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.cli.test_cli import Ktui, server  # noqa: F401 - the module's embedding server fixture
from tests.support.processes import alive

DEADLINE = 90  # generous: only how long to wait for the process, never a measured figure


def _children_of(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(p) for p in handle.read().split()]
    except FileNotFoundError:
        return []


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_during_add_wait_exits_143_cleanly_and_the_work_resumes(tmp_path, server):  # noqa: F811
    ktui = Ktui(tmp_path, server.url)
    folder = ktui.work / "notes"
    folder.mkdir()
    for n in range(40):
        (folder / f"note {n} [draft].md").write_text(f"# Note {n}\nOtters and kites, part {n}.\n", encoding="utf-8")
    ktui("base", "create", "Notes")
    server.faults.delay(0.5)  # every embedding request now takes half a second: the command is mid-work
    try:
        proc = subprocess.Popen([sys.executable, "-m", "ktui.tui.cli", "add", "Notes", str(folder), "--wait"],
                                cwd=ktui.work, env=ktui.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        assert proc.stderr is not None
        seen: list[str] = []
        progress = threading.Event()

        def read() -> None:
            for line in proc.stderr:  # type: ignore[union-attr]
                seen.append(line)
                if line.startswith("progress: "):
                    progress.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert progress.wait(DEADLINE), f"no progress line; stderr: {seen}"
        workers = _children_of(proc.pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(DEADLINE) == 143
        reader.join(DEADLINE)
        stderr = "".join(seen)
        assert "ktui: terminated; unfinished work resumes at the next start" in stderr
        assert "Traceback" not in stderr and "internal error" not in stderr
        deadline = time.monotonic() + DEADLINE
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(pid) for pid in workers), "a parse worker outlived ktui"
    finally:
        server.faults.delay(0)
        if proc.poll() is None:
            proc.kill()
    ktui("wait", "Notes")
    items = json.loads(ktui("items", "Notes", "--all", "--json").stdout)["items"]
    assert len(items) == 41 and {i["status"] for i in items} == {"completed"}

