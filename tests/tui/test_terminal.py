"""The app in a real terminal: tmux runs `python -m ktui`, send-keys types, capture-pane reads.

This is what a user sees: the real process, the real terminal renderer, escape
handling and all. The data directory holds hostile names made through the facade
(a base `Team [link=http://x]wiki`, a note whose first line is markup, a file
`Meeting notes [draft].md`); the test checks they show literally, that the
keyboard conventions work (1/2/3, Enter, i, /, Esc, q) and that q ends the process.

tmux is installed by `.ci/run`; where it truly cannot be installed the test is
skipped with that reason. Waiting is by polling the screen with a deadline, never
by asserting how long something took.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

from ktui.core.models import ItemInput
from ktui.core.service import KnowledgeService
from tests.tui.conftest import MODEL, make_settings

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None,
                       reason="tmux is not installed and could not be installed (.ci/run installs it with apt-get)"),
]

WIDTH, HEIGHT = 160, 40


class Terminal:
    """One tmux server of its own (its own socket, no user config): the sessions, sizes and
    global options of any other tmux on the machine (a person's, another test's) cannot
    reach it."""

    def __init__(self, command: str) -> None:
        self.name = f"ktui-test-{uuid.uuid4().hex[:8]}"
        self.socket = os.path.join(tempfile.gettempdir(), self.name)
        self.tmux = ["tmux", "-S", self.socket, "-f", "/dev/null"]
        subprocess.run([*self.tmux, "new-session", "-d", "-s", self.name, "-x", str(WIDTH), "-y", str(HEIGHT),
                        command], check=True)
        # a detached session's size can follow tmux's defaults: pin it
        subprocess.run([*self.tmux, "set-option", "-t", self.name, "window-size", "manual"], capture_output=True)
        subprocess.run([*self.tmux, "resize-window", "-t", self.name, "-x", str(WIDTH), "-y", str(HEIGHT)],
                       capture_output=True)

    def screen(self) -> str:
        out = subprocess.run([*self.tmux, "capture-pane", "-p", "-t", self.name], capture_output=True, text=True)
        return out.stdout

    def keys(self, *keys: str) -> None:
        for key in keys:
            subprocess.run([*self.tmux, "send-keys", "-t", self.name, key], check=True)
            time.sleep(0.15)  # pacing between keys (not an assertion): one key per frame, like a person

    def type(self, text: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", self.name, "-l", text], check=True)

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if text in screen:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never appeared; the screen was:\n{screen}")
            time.sleep(0.2)

    def wait_gone(self, text: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while text in self.screen():
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never went away:\n{self.screen()}")
            time.sleep(0.2)

    def alive(self) -> bool:
        return subprocess.run([*self.tmux, "has-session", "-t", self.name], capture_output=True).returncode == 0

    def close(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], capture_output=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket)


def test_real_terminal_shows_hostile_names_and_drives_by_keyboard(tmp_path, embedding_server):
    settings = make_settings(tmp_path / "data", embedding_server)
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "Meeting notes [draft].md").write_text("# Agenda\n\nKites [b]and[/b] spars.\n", encoding="utf-8")

    async def seed() -> None:
        async with await KnowledgeService.open(settings=settings) as ks:
            base = await ks.create_base("Team [link=http://x]wiki", MODEL, None)
            # two calls: roots are listed newest first, so the note is line 1 and the folder line 2
            await ks.add_items(base.id, [ItemInput("directory", {"path": str(folder)})])
            assert await ks.wait_idle(timeout=60)
            await ks.add_items(base.id, [ItemInput("note", {"content": "[link=http://a] [/] first line\n\nbody"})])
            assert await ks.wait_idle(timeout=60)

    asyncio.run(seed())
    config = tmp_path / "config.toml"
    config.write_text(
        f'default_embedding_model = "{MODEL}"\nauto_ollama = false\n\n'
        f'[providers.fake]\nkind = "openai"\nbase_url = "{embedding_server.openai_url}"\nmodels = ["any"]\n',
        encoding="utf-8")
    term = Terminal(f"env -u COLUMNS -u LINES {sys.executable} -m ktui --data-dir '{settings.data_dir}' --config '{config}'")
    try:
        screen = term.wait_for("Items — 📁 Team [link=http://x]wiki")
        assert "│ 📁 Team [link=http://x]w" in screen  # the bases pane too, literally (cut with …)
        screen = term.wait_for("[link=http://a] [/] first line")
        term.keys("2")  # the items pane
        time.sleep(1)  # pacing, not an assertion: the focus change is drawn before the next key
        term.keys("G", "Enter")  # G: the last line (the folder); Enter expands it
        screen = term.wait_for("Meeting notes [draft].md")
        term.keys("G", "i")  # the last line: the file; i opens its details
        screen = term.wait_for("Text indexed")
        assert "Meeting notes [draft].md" in screen and "Status" in screen
        term.keys("Escape")
        term.wait_gone("Text indexed")  # the dialog closed
        time.sleep(1)  # a lone ESC is told from an Alt+key sequence by a short pause (pacing, not an assertion)
        term.keys("/")
        time.sleep(1)
        term.type("[/] spars")
        term.wait_for("[/] spars")
        term.keys("Enter")
        screen = term.wait_for("for “[/] spars”")
        assert "Meeting notes [draft].md" in screen or "result" in screen
        term.keys("Escape")  # leaves the query box for the results
        time.sleep(1)
        term.keys("q")
        deadline = time.monotonic() + 30
        while term.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not term.alive(), "q did not quit:\n" + term.screen()
    finally:
        term.close()


def _pane_children(term: Terminal) -> list[int]:
    shell = subprocess.run([*term.tmux, "list-panes", "-t", term.name, "-F", "#{pane_pid}"],
                           capture_output=True, text=True).stdout.split()
    found: list[int] = []
    for pid in shell:
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as handle:
                found += [int(p) for p in handle.read().split()]
        except FileNotFoundError:
            pass
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_quits_like_q_and_gives_the_terminal_back(tmp_path, embedding_server):
    settings = make_settings(tmp_path / "data", embedding_server)

    async def seed() -> None:
        async with await KnowledgeService.open(settings=settings) as ks:
            await ks.create_base("Signals", MODEL, None)

    asyncio.run(seed())
    config = tmp_path / "config.toml"
    config.write_text(
        f'default_embedding_model = "{MODEL}"\nauto_ollama = false\n\n'
        f'[providers.fake]\nkind = "openai"\nbase_url = "{embedding_server.openai_url}"\nmodels = ["any"]\n',
        encoding="utf-8")
    # after ktui ends, the shell says how it ended and whether the terminal is back in
    # cooked mode ("icanon"; raw mode would show "-icanon")
    term = Terminal(f"sh -c \"env -u COLUMNS -u LINES {sys.executable} -m ktui --data-dir '{settings.data_dir}' "
                    f"--config '{config}'; echo exit=\\$?; stty -a | grep -o -- '-*icanon'; sleep 60\"")
    try:
        term.wait_for("Signals")
        app_pids = _pane_children(term)
        assert app_pids, "the app's process was not found"
        for pid in app_pids:
            subprocess.run(["kill", "-TERM", str(pid)], check=True)
        screen = term.wait_for("exit=143")
        assert "ktui: stopped by SIGTERM" in screen
        assert "Traceback" not in screen
        term.wait_for("icanon")
        assert "-icanon" not in term.screen(), "the terminal was left in raw mode"
    finally:
        term.close()
