"""Hostile input through the CLI: random argument vectors against a real data directory.

Each invocation is `python -m tui.cli <argv>` in a subprocess (a real process start,
so the count is modest: KTUI_FAULT_CLI, default 72, run 3 at a time, each worker with
its own data directory because one data directory serves one process at a time).
Whatever the arguments: exit code 0, 1 or 2; never a traceback or an "internal
error"; exit 1 means exactly one stderr line `ktui: error: ...`; exit 2 is a usage
error that names the program.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.embedding_server import start_embedding_server

pytestmark = [pytest.mark.faults, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
RUNS = int(os.environ.get("KTUI_FAULT_CLI", "72"))
WORKERS = 3
DIMS = 16

COMMANDS = [
    ["base", "create"], ["base", "list"], ["base", "show"], ["base", "update"], ["base", "delete"],
    ["base", "restore"], ["base", "export"], ["base", "import"], ["base", "frobnicate"], ["base"],
    ["add"], ["items"], ["reindex"], ["rm"], ["search"], ["chunks"], ["models"], ["rank"],
    ["groups", "list"], ["groups", "create"], ["groups", "rename"], ["groups", "delete"], ["groups"],
    ["nonsense"], ["search", "Kites"], ["add", "Kites"], ["items", "Kites"], ["base", "update", "Kites"],
]
FLAGS = ["--json", "--top-k", "--mode", "--model", "--dimensions", "--name", "--type", "--all", "--dir",
         "--sitemap", "--note", "--source-url", "--input", "--field", "--min-score", "--chunk-size",
         "--chunk-overlap", "--threshold", "--alpha", "--emoji", "--group", "--rerank-model", "--bogus", "-x", "--",
         "-", "--top-k=0", "--mode=vector"]
# Well-formed commands whose values are hostile (V: a value, B: a base, P: a path); these get
# past argparse and exercise the service's own validation.
TEMPLATES = [
    "search B V", "search B V --mode V --top-k V", "search B V --json", "add B P", "add B P P --json",
    "add B V --dir", "add B V --sitemap", "add B --note V", "add B --note V --source-url V",
    "base create V --dimensions V", "base create V --chunk-size V --chunk-overlap V --dimensions 8",
    "base create V --model V --dimensions V", "base update B --threshold V", "base update B --alpha V",
    "base update B --emoji V --name V", "base update B --mode V", "base show V", "base delete V",
    "base restore B --model V --dimensions V", "base export B --output P", "base import P", "items B --type V",
    "items V --all", "reindex B V", "rm B V", "chunks B V", "rank V --input P --top-k V",
    "rank V --min-score V", "groups rename V V", "groups create V", "groups delete V",
]


def values(tmp: Path) -> list[str]:
    return ["", " ", "Kites", "kites", "0", "-1", "99999999999999999999", "1e309", "nan", "NaN", "3.5", "-0",
            "default", "bm25", "hybrid", "file", "note", "x" * 300, "☃", "\u202edlrow", "'; DROP TABLE x; --",
            "%s%n", "../../..", "file:///etc/passwd", "javascript:alert(1)", "http://127.0.0.1:1/x",
            "ftp://127.0.0.1/", str(tmp / "missing.md"), str(tmp / "docs"), str(tmp / "docs" / "a.md"),
            str(tmp / "bad.json"), str(tmp / "binary.md"), "/dev/null", "01a2", "\ud800".encode("utf-8",
            "surrogatepass").decode("utf-8", "surrogateescape"), "*", "-", "--json"]


def argv_for(rng: random.Random, tmp: Path) -> list[str]:
    if rng.random() < 0.6:
        paths = [v for v in values(tmp) if "/" in v] + ["relative.md"]
        fill = {"V": lambda: rng.choice(values(tmp)), "B": lambda: rng.choice(["Kites", "kites", "nope", ""]),
                "P": lambda: rng.choice(paths)}
        return [fill[t]() if t in fill else t for t in rng.choice(TEMPLATES).split()]
    argv = list(rng.choice(COMMANDS))
    for _ in range(rng.randint(0, 5)):
        argv.append(rng.choice(FLAGS) if rng.random() < 0.4 else rng.choice(values(tmp)))
    return argv


def check(argv: list[str], proc: subprocess.CompletedProcess) -> None:
    shown = f"ktui {[a[:80] for a in argv]!r} -> {proc.returncode}\nstdout: {proc.stdout[-500:]}\nstderr: {proc.stderr[-2000:]}"
    assert proc.returncode in (0, 1, 2), shown
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, shown
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    if proc.returncode == 1:
        assert len(lines) == 1 and lines[0].startswith("ktui: error: "), shown
    elif proc.returncode == 2:
        assert lines and any("ktui" in line for line in lines), shown


def test_cli_fuzz_never_tracebacks(tmp_path: Path) -> None:
    server = start_embedding_server(DIMS)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nKites fly in steady wind.\n")
    (tmp_path / "bad.json").write_text('{"format": "ktui-export", "version": 99, "bases": [1, {"x": null}]')
    (tmp_path / "binary.md").write_bytes(bytes(range(256)) * 8)
    config = tmp_path / "ktui.toml"
    config.write_text(
        'auto_ollama = false\ndefault_embedding_model = "fake::deterministic"\n'
        f'[providers.fake]\nkind = "openai"\nbase_url = "{server.url}/v1"\nmax_retries = 0\ntimeout = 5\n',
        encoding="utf-8",
    )

    def env(worker: int) -> dict[str, str]:
        out = {k: v for k, v in os.environ.items() if not k.startswith("KTUI_")}
        out.update(PYTHONPATH=str(ROOT), KTUI_HOME=str(tmp_path / f"home{worker}"), KTUI_CONFIG=str(config),
                   COLUMNS="120")
        return out

    def ktui(worker: int, argv: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "ktui.tui.cli", *argv], cwd=tmp_path, env=env(worker), input="",
                              capture_output=True, text=True, errors="replace", timeout=60, check=False)

    rng = random.Random(int(os.environ.get("KTUI_FAULT_SEED", "9")))
    plans = [[argv_for(rng, tmp_path) for _ in range(w, RUNS, WORKERS)] for w in range(WORKERS)]
    codes: dict[int, int] = {}

    def worker(w: int) -> None:
        seed = ktui(w, ["base", "create", "Kites", "--dimensions", str(DIMS)])
        assert seed.returncode == 0, seed.stderr
        for argv in plans[w]:
            proc = ktui(w, argv)
            check(argv, proc)
            codes[proc.returncode] = codes.get(proc.returncode, 0) + 1

    try:
        with ThreadPoolExecutor(WORKERS) as pool:
            for future in [pool.submit(worker, w) for w in range(WORKERS)]:
                future.result()
    finally:
        server.stop()
    print(f"\ncli fuzz: {sum(codes.values())} invocations, exit codes {dict(sorted(codes.items()))}")
    assert sum(codes.values()) == RUNS
    assert codes.get(1) and codes.get(2), codes  # both kinds of refusal were exercised


def test_cli_add_with_an_overlong_name_is_a_clear_error(tmp_path: Path) -> None:
    """Found by the CLI fuzz (KTUI_FAULT_SEED=1): `ktui add BASE <300 x>`."""
    config = tmp_path / "ktui.toml"
    config.write_text('auto_ollama = false\ndefault_embedding_model = "fake::m"\n'
                      '[providers.fake]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KTUI_")}
    env.update(PYTHONPATH=str(ROOT), KTUI_HOME=str(tmp_path / "home"), KTUI_CONFIG=str(config))

    def ktui(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "ktui.tui.cli", *argv], cwd=tmp_path, env=env, input="",
                              capture_output=True, text=True, timeout=60, check=False)

    assert ktui("base", "create", "Kites", "--dimensions", "8").returncode == 0
    argv = ["add", "Kites", "x" * 300]
    check(argv, ktui(*argv))
