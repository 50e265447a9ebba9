"""`ktui watch`: a real `ktui` process following a real folder, stopped by a real SIGTERM."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading

import pytest

from tests.cli.test_cli import Ktui, server  # noqa: F401 - the module's embedding server fixture

LINE_TIMEOUT = 90  # generous: only how long to wait for a line, never a measured figure


class Lines:
    """The process's stdout, line by line, read on a thread so waiting can time out."""

    def __init__(self, proc: subprocess.Popen):
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def drain(self) -> list[str]:
        """Every line, once the process has ended (its stdout closed)."""
        while (line := self._queue.get(timeout=LINE_TIMEOUT)) is not None:
            self.seen.append(line)
        return self.seen

    def until(self, predicate) -> str:
        while True:
            try:
                line = self._queue.get(timeout=LINE_TIMEOUT)
            except queue.Empty:
                raise AssertionError(f"no such line; seen: {self.seen}") from None
            if line is None:
                raise AssertionError(f"the process ended; seen: {self.seen}")
            self.seen.append(line)
            if predicate(line):
                return line


def start_watch(ktui: Ktui, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ktui.tui.cli", "watch", *args], cwd=ktui.work,
                            env=ktui.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_watch_logs_each_change_and_stops_cleanly_on_sigterm(tmp_path, server):  # noqa: F811
    ktui = Ktui(tmp_path, server.url)
    folder = ktui.work / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# Alpacas\nAlpacas hum.\n", encoding="utf-8")
    (folder / "b.md").write_text("# Badgers\nBadgers dig.\n", encoding="utf-8")
    ktui("base", "create", "Notes")
    ktui("add", "Notes", str(folder), "--watch", "--wait")

    proc = start_watch(ktui, "Notes", "--json")
    lines = Lines(proc)
    try:
        started = json.loads(lines.until(lambda s: '"watching"' in s))
        assert started["base"] == "Notes" and started["folder"] == str(folder)
        (folder / "c.md").write_text("# Capybaras\nCapybaras swim in rivers.\n", encoding="utf-8")
        added = json.loads(lines.until(lambda s: "c.md" in s))
        assert (added["event"], added["type"], added["source"]) == ("indexed", "file", str(folder / "c.md"))
        (folder / "b.md").unlink()
        removed = json.loads(lines.until(lambda s: '"removed"' in s))
        assert removed["count"] == 1  # a number (it was the text "1 item(s)")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=LINE_TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stderr.read() == ""
    # the other lines were about these changes only: b.md and a.md were not read again
    assert not [s for s in lines.seen if "a.md" in s]

    items = ktui.json("items", "Notes", "--all")["items"]
    assert sorted(i["name"] for i in items if i["type"] == "file") == ["a.md", "c.md"]
    assert {i["status"] for i in items} == {"completed"}


@pytest.mark.slow
def test_watch_sigint_stops_with_a_line_and_nothing_to_watch_is_an_error(tmp_path, server):  # noqa: F811
    ktui = Ktui(tmp_path, server.url)
    ktui("base", "create", "Empty")
    nothing = start_watch(ktui)
    assert nothing.wait(timeout=LINE_TIMEOUT) == 1
    assert "nothing to watch" in nothing.stderr.read()

    folder = ktui.work / "f"
    folder.mkdir()
    (folder / "x.md").write_text("Xenops are birds.\n", encoding="utf-8")
    ktui("add", "Empty", str(folder), "--watch", "--wait")
    proc = start_watch(ktui)
    lines = Lines(proc)
    try:
        assert "watching" in lines.until(lambda s: "watching" in s)
        os.kill(proc.pid, signal.SIGINT)
        assert "stopping (SIGINT)" in lines.until(lambda s: "stopping" in s)
        assert proc.wait(timeout=LINE_TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_a_file_that_keeps_failing_is_logged_once_per_change_of_it(tmp_path, server):  # noqa: F811
    """Each refresh retries failed files; the log shows a broken file at the start and
    after it changes, not at every change of another file."""
    ktui = Ktui(tmp_path, server.url)
    folder = ktui.work / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# Alpacas\nAlpacas hum.\n", encoding="utf-8")
    (folder / "broken.md").write_bytes(b"\x00\x01\x02" * 40)  # binary: fails at every read
    ktui("base", "create", "Notes")
    ktui("add", "Notes", str(folder), "--watch", "--wait", rc=1)

    proc = start_watch(ktui, "Notes", "--json")
    lines = Lines(proc)

    def broken(line: str) -> bool:
        return "broken.md" in line and '"failed"' in line

    try:
        lines.until(broken)  # the start's refresh read it again: logged once
        for name in ("c.md", "d.md"):  # each change refreshes the folder, which retries broken.md
            (folder / name).write_text(f"# {name}\nCapybaras swim in rivers.\n", encoding="utf-8")
            lines.until(lambda s, name=name: name in s and '"indexed"' in s)
        (folder / "broken.md").write_bytes(b"\x00\x01\x02" * 80)  # changed, still broken: logged
        lines.until(broken)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=LINE_TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    seen = lines.drain()
    assert len([s for s in seen if broken(s)]) == 2, seen
    error = json.loads(next(s for s in seen if broken(s)))["error"]
    assert error.startswith("Not a text file (binary content)") and "broken.md" in error
