"""Start-up of whole `ktui` processes against `python -c 'import numpy'` (issue 17).

Run: .venv/bin/python -m pytest tests/benchmarks/test_bench_startup.py -m benchmark -s -p no:xdist

* `ktui search`, `ktui base list`, `ktui --help` as fresh processes on a real base
  (200 notes through the zero-latency OpenAI-compatible server, its own process),
  each interleaved with `python -c 'import numpy'` round by round, so that every
  ratio comes from the same minutes of the shared machine. Target: `ktui search`
  <= 2.5x numpy.
* The TUI's first frame: `ktui` on a pseudo-terminal (120 x 40), from the fork to
  the moment the screen holds the base's name (what a user looks for). Target <= 1 s.

Bytecode: an installed wheel has its `.pyc` files (pip compiles them), numpy in the
venv has them too; a checkout run with PYTHONDONTWRITEBYTECODE=1 would compile
every ktui module from source on every start (~270 ms) and measure that instead.
The processes run without that variable, after one warm-up run.

Nothing about timing is asserted; figures are printed next to their targets, with
the spread (min..max) of the rounds.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import statistics
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from tests.benchmarks.test_bench_scale import make_corpus, write_config
from tests.support.embedding_server import start_embedding_server

pytestmark = pytest.mark.benchmark

ROUNDS = int(os.environ.get("KTUI_BENCH_STARTUP_ROUNDS", "9"))
ESCAPES = re.compile(rb"\x1b\[[0-9;?<>=]*[A-Za-z~]|\x1b[()][A-Z0-9]|\x1b[=>]")


def bench_env(work: Path, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KTUI_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(KTUI_HOME=str(work / "home"), KTUI_CONFIG=str(write_config(work / "c.toml", url)))
    return env


def wall(cmd: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, env=env, capture_output=True, check=True, timeout=120)
    return time.perf_counter() - started


def first_frame(env: dict[str, str], marker: bytes, timeout: float = 30.0) -> float | None:
    """Seconds from the fork of `ktui` on a pty to the screen showing `marker`."""
    started = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # the child: the TUI on the pty
        os.execve(sys.executable, [sys.executable, "-m", "ktui"], dict(env, TERM="xterm-256color"))
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    screen, seen = b"", None
    try:
        while time.perf_counter() - started < timeout:
            if select.select([fd], [], [], 0.02)[0]:
                try:
                    screen += os.read(fd, 65536)
                except OSError:
                    break
                if marker in ESCAPES.sub(b"", screen):
                    seen = time.perf_counter() - started
                    break
    finally:
        os.kill(pid, signal.SIGTERM)
        deadline = time.perf_counter() + 10
        while not os.waitpid(pid, os.WNOHANG)[0]:
            if time.perf_counter() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            if select.select([fd], [], [], 0.05)[0]:  # keep draining: a full pty blocks its exit
                try:
                    os.read(fd, 65536)
                except OSError:
                    pass
        os.close(fd)
    return seen


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:5.0f} ms ({min(values) * 1000:.0f}..{max(values) * 1000:.0f})"


@pytest.mark.timeout(1800)
def test_bench_startup_against_numpy(tmp_path):
    server = start_embedding_server(384, subprocess=True)
    try:
        env = bench_env(tmp_path, server.url)
        ktui = [sys.executable, "-m", "ktui"]
        corpus = make_corpus(tmp_path / "corpus", 200)
        subprocess.run([*ktui, "base", "create", "Bench", "--dimensions", "384"], env=env, check=True,
                       capture_output=True, timeout=300)
        subprocess.run([*ktui, "add", "Bench", str(corpus), "--wait"], env=env, check=True, capture_output=True,
                       timeout=600)
        commands = {
            "numpy": [sys.executable, "-c", "import numpy"],
            "ktui search": [*ktui, "search", "Bench", "vector search terminal"],
            "ktui base list": [*ktui, "base", "list"],
            "ktui --help": [*ktui, "--help"],
        }
        for cmd in commands.values():  # warm-up: bytecode written, files in the page cache
            wall(cmd, env)
        times: dict[str, list[float]] = {name: [] for name in commands}
        ratios: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(ROUNDS):
            numpy = wall(commands["numpy"], env)
            times["numpy"].append(numpy)
            for name, cmd in commands.items():
                if name != "numpy":
                    seconds = wall(cmd, env)
                    times[name].append(seconds)
                    ratios[name].append(seconds / numpy)
        frames = [first_frame(env, b"Bench") for _ in range(5)]
        print(f"\nstart-up, whole processes, {ROUNDS} interleaved rounds (load average "
              f"{os.getloadavg()[0]:.1f})")
        print(f"  python -c 'import numpy': {spread(times['numpy'])}")
        targets = {"ktui search": " (target <= 2.5x)"}
        base = statistics.median(times["numpy"])
        for name in commands:
            if name == "numpy":
                continue
            rs = ratios[name]
            print(f"  {name}: {spread(times[name])} = {statistics.median(times[name]) / base:.2f}x numpy; "
                  f"per-round ratio median {statistics.median(rs):.2f} ({min(rs):.2f}..{max(rs):.2f})"
                  f"{targets.get(name, '')}")
        shown = [f for f in frames if f is not None]
        if shown:
            print(f"  TUI first frame (base name on screen): {spread(shown)} (target <= 1000 ms); "
                  f"{len(frames) - len(shown)} of {len(frames)} runs never showed it")
        else:
            print("  TUI first frame: the base name never appeared within 30 s")
    finally:
        server.stop()
