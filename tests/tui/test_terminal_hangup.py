"""The terminal goes away while the app is busy drawing: the process must end and free the
data directory.

QA: closing the terminal of a TUI that was drawing a folder of 20,000 files left, about
one time in two, a process that ignored SIGTERM and kept the lock, so every new `ktui`
said "The data directory … is in use by ktui (pid N)" until a `kill -9`. On a hangup
the kernel sends SIGHUP and SIGCONT; Textual's SIGCONT handler started a second
writer thread, which died on the first write to the dead tty (EIO), and the event
loop then blocked for ever on the writer's full queue (tui/terminal_driver.py).

The real app runs in tmux (its own socket, no user config), the folder is expanded and
its children are loading, a dialog is opened and closed, and the tmux server is killed:
the pty closes. The app's process must be gone within a generous hang guard and
`ktui base list` on the same data directory must work (the lock is free). The close is
repeated, since without the fix the hang came in about half of the closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

from ktui.core.service import KnowledgeService
from tests.benchmarks.test_bench_tui_tree import folder_document
from tests.tui.conftest import MODEL, make_settings
from tests.tui.test_terminal import Terminal, _pane_children

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

FILES = 20_000
CLOSES = 6
HANG_GUARD = 30.0  # seconds; the fixed app ends in a few


def _running(pid: int) -> bool:
    """True while `pid` runs (a zombie waiting for its parent to reap it has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.timeout(600)
def test_closing_the_terminal_while_drawing_ends_the_app_and_frees_the_lock(tmp_path, embedding_server):
    settings = make_settings(tmp_path / "data", embedding_server)

    async def seed() -> None:
        async with await KnowledgeService.open(settings=settings) as ks:
            await ks.import_bases(folder_document(FILES))

    asyncio.run(seed())
    config = tmp_path / "config.toml"
    config.write_text(
        f'default_embedding_model = "{MODEL}"\nauto_ollama = false\n\n'
        f'[providers.fake]\nkind = "openai"\nbase_url = "{embedding_server.openai_url}"\nmodels = ["any"]\n',
        encoding="utf-8")
    ktui = [sys.executable, "-m", "ktui", "--data-dir", str(settings.data_dir), "--config", str(config)]
    # the app is not the session leader: like a terminal's shell running it (the kernel
    # sends the hangup's SIGHUP and SIGCONT to the shell's process group)
    command = (f"sh -c \"env -u COLUMNS -u LINES {sys.executable} -m ktui --data-dir '{settings.data_dir}' "
               f"--config '{config}'; sleep 60\"")
    for attempt in range(1, CLOSES + 1):
        term = Terminal(command)
        pids: list[int] = []
        try:
            term.wait_for(f"Folder of {FILES}")
            pids = _pane_children(term)
            assert pids, "the app's process was not found"
            term.keys("2")  # the items pane
            time.sleep(0.5)  # pacing, not an assertion
            term.keys("l")  # expand the folder: its children load page by page, the tree redraws
            term.wait_for("doc0")
            time.sleep(2)  # pacing: close while the rest is still loading
            term.keys("i")  # the details dialog over it
            time.sleep(0.5)
            term.keys("Escape")
        finally:
            term.close()  # kill-server: the pty's master closes, the app's terminal hangs up
        deadline = time.monotonic() + HANG_GUARD
        while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        stuck = [pid for pid in pids if _running(pid)]
        for pid in stuck:  # never leave a stuck app behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert not stuck, f"close {attempt}: the app was still running {HANG_GUARD:.0f} s after its terminal closed"
        listed = subprocess.run([*ktui, "base", "list"], capture_output=True, text=True, timeout=120)
        assert listed.returncode == 0, f"close {attempt}: the data directory was not freed: {listed.stderr}"
        assert f"Folder of {FILES}" in listed.stdout
