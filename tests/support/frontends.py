"""A data directory with a settings file, for tests that start ktui as real processes
(`ktui mcp`, `ktui serve`, readers beside a holder).

The settings file points the `fake` provider at tests/support/embedding_server.py
(a real OpenAI-compatible server on 127.0.0.1), so the processes embed exactly as
the in-process facade of the same test does.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.services import FAKE_MODEL

ROOT = Path(__file__).resolve().parents[2]
LISTENING = re.compile(r"listening on (http://\S+)")


class Workspace:
    """`home` (the data directory), `config` (its settings file) and `env()` for subprocesses."""

    def __init__(self, work: Path, server_url: str):
        self.work = work
        work.mkdir(parents=True, exist_ok=True)
        self.home = work / "home"
        self.config = work / "ktui.toml"
        self.server_url = server_url
        self.config.write_text(
            "auto_ollama = false\n"
            f'default_embedding_model = "{FAKE_MODEL}"\n'
            "[providers.fake]\n"
            'kind = "openai"\n'
            f'base_url = "{server_url}/v1"\n'
            "max_retries = 0\n",
            encoding="utf-8",
        )

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KTUI_")}
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        env["KTUI_HOME"] = str(self.home)
        env["KTUI_CONFIG"] = str(self.config)
        env.update(extra)
        return env

    def settings(self):  # the same settings, for the in-process facade
        from ktui.core.config import load_settings

        return load_settings(config_file=self.config, data_dir=self.home)

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "ktui.tui.cli", *args]


class ServeProcess:
    """`ktui serve --port 0` as a real process; `url` once it listens, `stop()` ends it (SIGTERM)."""

    def __init__(self, ws: Workspace, *args: str):
        self.proc = subprocess.Popen(ws.command("serve", "--port", "0", *args), env=ws.env(), cwd=ws.work,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        assert self.proc.stderr is not None
        for line in self.proc.stderr:  # blocks until the server says where it listens (or dies)
            self.lines.append(line)
            match = LISTENING.search(line)
            if match:
                self.url = match.group(1)
                return
        raise AssertionError(f"ktui serve did not start: {''.join(self.lines)}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
