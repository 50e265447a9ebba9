"""Start-up cost of headless `ktui` commands (they must feel instant in scripts).

Run: .venv/bin/python -m pytest tests/benchmarks/test_bench_cli.py -m benchmark -s

Figures are wall-clock medians of fresh processes, printed next to their target
and as a ratio to a bare `python -c pass` measured in the same run. Nothing is
asserted about timing.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.benchmark

ROOT = Path(__file__).resolve().parents[2]
RUNS = 5


def _median_seconds(args: list[str], env: dict[str, str]) -> float:
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        subprocess.run(args, env=env, cwd=ROOT, capture_output=True, check=True, timeout=60)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def test_bench_cli_startup(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KTUI_")}
    env.update(PYTHONPATH=str(ROOT), KTUI_HOME=str(tmp_path / "home"), OLLAMA_HOST="127.0.0.1:9")
    config = tmp_path / "c.toml"
    config.write_text("auto_ollama = false\n", encoding="utf-8")
    env["KTUI_CONFIG"] = str(config)
    cli = [sys.executable, "-m", "ktui.tui.cli"]
    baseline = _median_seconds([sys.executable, "-c", "pass"], env)
    figures = [
        ("ktui --help (argparse only)", _median_seconds([*cli, "--help"], env), 0.3),
        ("ktui base list (opens the data directory)", _median_seconds([*cli, "base", "list"], env), 1.0),
        ("ktui base list --json", _median_seconds([*cli, "base", "list", "--json"], env), 1.0),
    ]
    probe = subprocess.run([*cli[:1], "-c", "import sys, tui.cli, tui.cli_commands; print('textual' in sys.modules)"],
                           env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    print(f"\npython -c pass (baseline): {baseline * 1000:.0f} ms")
    for label, seconds, target in figures:
        print(f"{label}: {seconds * 1000:.0f} ms (target < {target * 1000:.0f} ms; {seconds / baseline:.1f}x baseline)")
    print(f"textual imported by headless commands: {probe.stdout.strip()} (target False)")
