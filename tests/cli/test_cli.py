"""The `ktui` command line, run as a real subprocess on a real data directory.

Embeddings come from tests/support/embedding_server.py (a real OpenAI-compatible
server on 127.0.0.1), configured through a settings TOML written by the test.
Every command and example of docs/cli.md is exercised here; subprocesses are
grouped into a few scenario tests because each one costs ~0.5 s of start-up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.embedding_server import embedding_server_fixture

ROOT = Path(__file__).resolve().parents[2]
DIMS = 32


server = embedding_server_fixture(DIMS, scope="module")


class Ktui:
    """Runs `python -m tui.cli` with a settings file and a data directory of its own."""

    def __init__(self, work: Path, server_url: str):
        self.work = work
        self.server_url = server_url
        work.mkdir(parents=True, exist_ok=True)
        self.home = work / "home"
        self.config = work / "ktui.toml"
        self.config.write_text(
            "auto_ollama = false\n"
            'default_embedding_model = "fake::deterministic"\n'
            "[providers.fake]\n"
            'kind = "openai"\n'
            f'base_url = "{server_url}/v1"\n'
            "max_retries = 0\n"
            "[providers.ollama]\n"
            'kind = "openai"\n'
            f'base_url = "{server_url}/v1"\n'
            "max_retries = 0\n"
            "[providers.dead]\n"
            'kind = "openai"\n'
            'base_url = "http://127.0.0.1:9/v1"\n'
            "max_retries = 0\n"
            "timeout = 2\n",
            encoding="utf-8",
        )

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KTUI_")}
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        env["KTUI_HOME"] = str(self.home)
        env["KTUI_CONFIG"] = str(self.config)
        env["COLUMNS"] = "200"
        env.update(extra)
        return env

    def __call__(self, *args: str, rc: int = 0, stdin: str | None = None, env: dict[str, str] | None = None,
                 **kw) -> subprocess.CompletedProcess:
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "ktui.tui.cli", *args],
            cwd=self.work, env=env or self.env(), input=stdin, capture_output=True, text=True, timeout=60, check=False, **kw,
        )
        if os.environ.get("KTUI_TEST_TIMING"):
            print(f"{time.perf_counter() - started:.2f}s ktui {' '.join(args)}")
        assert proc.returncode == rc, f"ktui {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return proc

    def json(self, *args: str, **kw) -> dict:
        return json.loads(self(*args, "--json", **kw).stdout)


@pytest.fixture
def ktui(tmp_path, server):
    return Ktui(tmp_path, server.url)


def make_docs(root: Path) -> None:
    (root / "docs" / "sub").mkdir(parents=True)
    (root / "docs" / "otters.md").write_text("# Otters\nSea otters hold hands while they sleep.", encoding="utf-8")
    (root / "docs" / "sub" / "volcano.txt").write_text("Volcanoes erupt molten lava and ash.", encoding="utf-8")
    (root / "single.txt").write_text("Penguins huddle together through the polar winter.", encoding="utf-8")
    (root / "empty.txt").write_text("", encoding="utf-8")


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ktui: error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_usage_errors_exit_2(ktui):
    assert "usage: ktui" in ktui("bogus", rc=2).stderr
    assert "the following arguments are required: base" in ktui("add", rc=2).stderr
    assert "nothing to change" in ktui("base", "update", "X", rc=2).stderr
    assert "--demo only applies to the TUI" in ktui("--demo", "base", "list", rc=2).stderr
    assert "--sitemap expects http(s) URLs" in ktui("add", "B", "./local", "--sitemap", rc=2).stderr
    assert "name the bases to export, or give --all" in ktui("base", "export", rc=2).stderr
    assert "usage: ktui search [options] BASE [BASE ...] QUERY\n       ktui search [options] --all QUERY" in \
        ktui("search", "--help").stdout
    refused = ktui("search", "Notes", rc=2).stderr  # a command's own usage, not the top level's
    assert refused.startswith("usage: ktui search [options] BASE") and "give a base and a query" in refused
    help_text = ktui("--help").stdout
    for command in ("base", "add", "items", "reindex", "rm", "search", "chunks", "models", "rank", "wait", "groups"):
        assert f"    {command}" in help_text


@pytest.mark.slow
def test_base_and_item_workflow(ktui):
    make_docs(ktui.work)
    created = ktui.json("base", "create", "Notes", "--chunk-size", "200", "--chunk-overlap", "20")
    assert created["name"] == "Notes" and created["status"] == "completed" and created["error"] is None
    assert (created["embedding_model_id"], created["dimensions"], created["chunk_size"]) == ("fake::deterministic", DIMS, 200)
    assert created["search_mode"] == "hybrid" and created["item_count"] == 0

    # add: a directory, a file and a note; --wait prints summary lines (not a bar) off a terminal.
    added = ktui("add", "Notes", "docs", "single.txt", "--note", "Hummingbirds hover by beating wings fast", "--wait")
    assert added.stdout.count("added ") == 3
    assert "progress: " in added.stderr and "\r" not in added.stderr
    assert "done: 6 completed, 0 failed" in added.stderr

    listing = ktui.json("items", "Notes", "--all")
    items = listing["items"]
    assert sorted(i["type"] for i in items) == ["directory", "directory", "file", "file", "file", "note"]
    position = {i["id"]: n for n, i in enumerate(items)}
    assert all(position[i["group_id"]] < position[i["id"]] for i in items if i["group_id"])  # tree order
    assert {i["status"] for i in items} == {"completed"}
    single = next(i for i in items if i["name"] == "single.txt")
    assert single["source"] == str(ktui.work / "single.txt") and single["data"]["path"] == single["source"]
    roots = ktui("items", "Notes").stdout
    assert "otters.md" not in roots and "single.txt" in roots and "Hummingbirds" in roots

    hits = ktui.json("search", "Notes", "sea otters sleep", "--top-k", "2")
    assert hits["mode"] == "hybrid" and hits["degraded"] is False and len(hits["results"]) == 2
    top = hits["results"][0]
    assert top["rank"] == 1 and top["score_kind"] == "fused" and top["source"].endswith("otters.md")
    assert "Sea otters hold hands" in top["text"] and top["item_id"] and top["chunk_id"]
    text = ktui("search", "Notes", "penguins winter", "--mode", "bm25").stdout
    assert text.splitlines()[0].startswith(" 1. ") and "bm25" in text and "single.txt" in text
    assert "no results" in ktui("search", "Notes", "xylophone", "--mode", "bm25").stdout

    chunks = ktui.json("chunks", "Notes", "single.txt")
    assert chunks["item_id"] == single["id"]
    assert [c["text"] for c in chunks["chunks"]] == ["Penguins huddle together through the polar winter."]

    docs_id = next(i["id"] for i in items if i["name"] == "docs")
    shared = os.path.commonprefix([docs_id, single["id"]])  # time-ordered ids share prefixes
    line = one_error_line(ktui("reindex", "Notes", shared, rc=1).stderr)
    assert "items: " in line and single["id"] in line and docs_id in line and "name one by its id" in line
    reindexed = ktui.json("reindex", "Notes", single["id"][-8:], "--wait")
    assert [i["id"] for i in reindexed["items"]] == [single["id"]]
    assert reindexed["wait"] == {"total": 1, "completed": 1, "unfinished": 0, "paused": None, "failed": [],
                                 "window_overflow": [], "skipped": []}

    removed = ktui.json("rm", "Notes", "single.txt", "docs")
    assert len(removed["removed"]) == 2
    assert [i["type"] for i in ktui.json("items", "Notes", "--all")["items"]] == ["note"]

    # A file that fails to index makes --wait exit 1 and names the error.
    failed = ktui("add", "Notes", "empty.txt", "--wait", rc=1)
    assert "failed  file" in failed.stderr and "empty" in failed.stderr.lower()

    updated = ktui.json("base", "update", "Notes", "--threshold", "0.2", "--top-k", "3", "--emoji", "🦦",
                        "--group", "Research", "--mode", "default")
    assert (updated["threshold"], updated["document_count"], updated["top_k"], updated["emoji"]) == (0.2, 3, 3, "🦦")
    assert updated["search_mode"] == "default" and updated["hybrid_alpha"] is None and updated["group_id"]
    shown = ktui("base", "show", "notes").stdout
    assert "group         Research" in shown and "threshold     0.2" in shown and "🦦 Notes" in shown
    cleared = ktui.json("base", "update", "Notes", "--threshold", "none", "--name", "Renamed")
    assert cleared["threshold"] is None and cleared["name"] == "Renamed"
    ocr = ktui.json("base", "update", "Renamed", "--ocr", "off", "--ocr-languages", "eng+deu", "--ocr-max-pages", "10")
    assert (ocr["ocr_enabled"], ocr["ocr_languages"], ocr["ocr_max_pages"]) == (False, "eng+deu", 10)
    assert "OCR           off; languages eng+deu; pages per file 10" in ktui("base", "show", "Renamed").stdout
    ocr = ktui.json("base", "update", "Renamed", "--ocr", "default", "--ocr-languages", "none")
    assert (ocr["ocr_enabled"], ocr["ocr_languages"], ocr["ocr_max_pages"]) == (None, None, 10)
    listed = ktui.json("base", "list")["bases"]
    assert [(b["name"], b["item_count"]) for b in listed] == [("Renamed", 2)]
    assert "Renamed" in ktui("base", "list").stdout

    groups = ktui.json("groups", "list")["groups"]
    assert [g["name"] for g in groups] == ["Research"]
    ktui("groups", "rename", "Research", "Reading")
    ktui("groups", "create", "Spare")
    ktui("groups", "delete", "Spare")
    assert [g["name"] for g in ktui.json("groups", "list")["groups"]] == ["Reading"]

    assert ktui.json("base", "delete", "Renamed")["deleted"] == [created["id"]]
    line = one_error_line(ktui("base", "show", "Renamed", rc=1).stderr)
    assert line == "ktui: error: Knowledge base not found: Renamed"


@pytest.mark.slow
def test_export_import_restore(ktui):
    ktui("base", "create", "Zoo", "--emoji", "🦒")
    ktui("add", "Zoo", "--note", "Giraffes have long necks to reach acacia leaves", "--note", "-",
         stdin="Zebras have black and white stripes", rc=0)
    out = ktui.work / "zoo.json"
    assert "exported 1 base(s), 2 item(s)" in ktui("base", "export", "Zoo", "-o", str(out)).stdout
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["format"] == "ktui-export" and doc["bases"][0]["emoji"] == "🦒"
    assert json.loads(ktui("base", "export", "Zoo").stdout)["bases"][0]["items"] == doc["bases"][0]["items"]

    # Another machine: the model's provider is not configured there.
    doc["bases"][0]["embedding_model_id"] = "lmstudio::nomic-embed-text"
    doc["bases"][0]["items"].append({"type": "file", "data": {"path": "/old/path.pdf"}})
    moved = ktui.work / "moved.json"
    moved.write_text(json.dumps(doc), encoding="utf-8")
    other = Ktui(ktui.work / "other", ktui.server_url)
    imported = other("base", "import", str(moved))
    assert "FAILED missing_embedding_model (provider 'lmstudio' is not configured here)" in imported.stdout
    assert "3 item(s) kept as data" in imported.stdout
    (failed,) = other.json("base", "list")["bases"]
    assert failed["status"] == "failed" and failed["error"] == "missing_embedding_model"
    assert failed["embedding_model_id"] is None and failed["dimensions"] == DIMS
    assert "failed: missing_embedding_model (restore it)" in other("base", "list").stdout
    assert {i["status"] for i in other.json("items", "Zoo")["items"]} == {"idle"}
    for args in (("search", "Zoo", "giraffes"), ("add", "Zoo", "--note", "x"), ("reindex", "Zoo", "Giraffes have long necks to reach acacia leaves")):
        line = one_error_line(other(*args, rc=1).stderr)
        assert "no usable embedding model" in line and "restore" in line

    # Restore is all-or-nothing: the file from the old machine blocks it until removed.
    line = one_error_line(other("base", "restore", "Zoo", "--model", "ollama::nomic-embed-text", rc=1).stderr)
    assert "1 root item(s) could not be accepted" in line and "/old/path.pdf" in line
    assert other.json("rm", "Zoo", "/old/path.pdf")["removed"]
    restored = other.json("base", "restore", "Zoo", "--model", "ollama::nomic-embed-text", "--name", "Zoo 2", "--wait")
    assert restored["base"]["status"] == "completed" and restored["base"]["dimensions"] == DIMS
    assert restored["source_id"] == failed["id"] and restored["wait"]["completed"] == 2
    hits = other.json("search", "Zoo 2", "zebra stripes")["results"]
    assert hits[0]["text"] == "Zebras have black and white stripes"

    # Import of the original document (model available) with --wait, read from stdin.
    again = other.json("base", "import", "-", "--wait", stdin=out.read_text(encoding="utf-8"))
    assert again["ok"] and again["bases"][0]["status"] == "completed" and again["wait"]["completed"] == 2
    # the same document once more: a duplicate, and the CLI (not the facade) says how to copy it
    twice = other("base", "import", str(out)).stdout
    assert "not imported again: already imported as base 'Zoo" in twice
    assert f"a second copy: ktui base import {out} --again" in twice and "again=True" not in twice


def test_legacy_backup_import(ktui):
    (ktui.work / "guide.md").write_text("Beekeepers harvest honey in late summer.", encoding="utf-8")
    knowledge = {"bases": [
        {"id": "kb1", "name": "Bees", "model": {"id": "deterministic", "provider": "fake"}, "dimensions": DIMS,
         "chunkSize": 300, "threshold": 7, "rerankModel": {"id": "rr", "provider": "gone"},
         "items": [{"id": "f", "type": "file", "content": {"id": "file-1"}},
                   {"id": "m", "type": "memory", "content": "likes tea"},
                   {"id": "n", "type": "note", "content": "old"}]},
        {"id": "kb2", "name": "Lost", "model": {"id": "bge-m3", "provider": "silicon"}, "dimensions": 1024,
         "items": [{"id": "p", "type": "file", "content": {"id": "file-2", "path": "/old/machine/report.pdf"}}]},
    ]}
    backup = {"version": 5, "localStorage": {"persist:cherry-studio": json.dumps({"knowledge": json.dumps(knowledge)})},
              "indexedDB": {"knowledge_notes": [{"id": "n", "content": "Bees communicate by dancing."}],
                            "files": [{"id": "file-1", "path": str(ktui.work / "guide.md")}]}}
    (ktui.work / "data.json").write_text(json.dumps(backup), encoding="utf-8")
    result = ktui("base", "import", "data.json", "--wait")
    out = result.stdout
    assert "read a desktop-client backup: 2 base(s), 2 imported" in out
    assert "ready (fake::deterministic), 2 item(s) queued, 1 skipped" in out
    assert "skipped memory m: memory items are not supported by ktui" in out
    assert "warning: threshold 7 dropped" in out and "rerank model 'gone::rr' is not available here; cleared" in out
    assert "Lost" in out and "FAILED missing_embedding_model (provider 'silicon' is not configured here)" in out
    assert "done: 2 completed, 0 failed" in result.stderr
    assert ktui.json("search", "Bees", "dancing bees")["results"][0]["text"] == "Bees communicate by dancing."


def test_rank_json_lines(ktui):
    records = [
        {"id": 1, "content": "Otters use stones to crack shellfish"},
        {"id": 2, "content": "The stock market closed higher today"},
        {"id": 3, "body": "otters otters otters", "content": "Shellfish are eaten by otters"},
    ]
    lines = "\n".join(json.dumps(r) for r in records) + "\n\n"
    out = ktui("rank", "otters shellfish", "--top-k", "2", stdin=lines).stdout.splitlines()
    ranked = [json.loads(line) for line in out]
    assert [r["rank"] for r in ranked] == [1, 2] and {r["record"]["id"] for r in ranked} == {1, 3}
    assert all(r["degraded"] is False and 0 < r["score"] <= 1 for r in ranked)

    (ktui.work / "records.jsonl").write_text(lines, encoding="utf-8")
    by_body = ktui("rank", "otters", "--input", "records.jsonl", "--field", "content", "--min-score", "0.3").stdout
    assert all(json.loads(line)["score"] >= 0.3 for line in by_body.splitlines())
    assert "has no text field 'body'" in ktui("rank", "x", "-i", "records.jsonl", "--field", "body", rc=1).stderr

    degraded = ktui("rank", "stock market", "--model", "dead::model", stdin=lines)
    first = json.loads(degraded.stdout.splitlines()[0])
    assert first["degraded"] is True and first["record"]["id"] == 2
    assert "ranked by keyword overlap" in degraded.stderr


@pytest.mark.slow
def test_errors_config_and_environment(ktui, tmp_path):
    ktui("base", "create", "Twin")
    line = one_error_line(ktui("base", "create", "twin", "--model", "fake::other", rc=1).stderr)
    assert "name: a base named 'Twin' already exists (names ignore case)" in line
    debug = ktui("search", "Nope", "anything", "--debug", rc=1).stderr
    assert "Traceback" in debug and "Knowledge base not found: Nope" in debug
    line = one_error_line(ktui("add", "Twin", "no/such/file.txt", rc=1).stderr)
    assert "does not exist: no/such/file.txt" in line

    # --data-dir and --config win over KTUI_HOME / KTUI_CONFIG.
    elsewhere = tmp_path / "elsewhere"
    assert ktui.json("base", "list", "--data-dir", str(elsewhere))["bases"] == []
    assert not elsewhere.exists()  # a reading command creates nothing
    ktui("groups", "create", "G", "--data-dir", str(elsewhere))
    assert (elsewhere / "knowledge.db").exists()
    bad = tmp_path / "bad.toml"
    bad.write_text("chunk_size = 'big'\n", encoding="utf-8")
    line = one_error_line(ktui("base", "list", "--config", str(bad), rc=1).stderr)
    assert "must be an integer" in line and "bad.toml" in line and "chunk_size" in line
    line = one_error_line(ktui("models", env=ktui.env(KTUI_CONFIG=str(tmp_path / "absent.toml")), rc=1).stderr)
    assert "Settings file does not exist" in line

    models = ktui.json("models")
    ids = [m["id"] for m in models["models"]]
    assert models["default"] == "fake::deterministic" and "fake::deterministic" in ids and "builtin::wordllama" in ids
    assert "dead" in models["errors"]


@pytest.mark.slow
def test_wait_resumes_work_queued_without_wait(ktui):
    ktui("base", "create", "Later")
    queued = ktui("add", "Later", "--note", "Narwhals have a long spiral tusk")
    assert "use --wait, or run `ktui wait`, to index now" in queued.stderr
    done = ktui.json("wait")
    assert done["wait"]["failed"] == [] and done["wait"]["completed"] == 1
    assert ktui.json("items", "Later")["items"][0]["status"] == "completed"
    assert "nothing to do" in ktui("wait", "Later").stderr


def read_to_end(master: int) -> bytes:
    """What a pty's other end wrote until it closed (EOF, or EIO once the last writer is gone)."""
    out = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            return out
        if not data:
            return out
        out += data


def test_progress_bar_on_a_terminal(ktui):
    import pty

    ktui("base", "create", "Tty")
    master, slave = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "ktui.tui.cli", "add", "Tty", "--note", "Capybaras are calm", "--wait"],
            cwd=ktui.work, env=ktui.env(), stdout=subprocess.PIPE, stderr=slave, text=True, timeout=60, check=False,
        )
        os.close(slave)
        slave = -1
        chunks = [read_to_end(master)]
    finally:
        if slave != -1:
            os.close(slave)
        os.close(master)
    tty_err = b"".join(chunks).decode("utf-8", "replace")
    assert proc.returncode == 0, tty_err
    assert "█" in tty_err and "\r" in tty_err and "1/1" in tty_err
    assert "progress: " not in tty_err  # summary lines are for logs, not terminals


def test_ctrl_c_on_a_narrow_terminal_leaves_one_bar_row_and_a_message_of_its_own(ktui, server):
    """On a 60-column terminal every redraw of the bar fits in it (a wrapped line leaves a
    row behind at each redraw) and the `interrupted` line starts a line of its own."""
    import fcntl
    import pty
    import signal
    import struct
    import termios

    notes = ktui.work / "many"
    notes.mkdir()
    for i in range(40):
        (notes / f"n{i}.md").write_text(f"# Note {i}\n\nOtter number {i} floats.\n", encoding="utf-8")
    ktui("base", "create", "Narrow")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 60, 0, 0))
    server.faults.delay(0.5)  # each request waits: the wait is still running when ^C comes
    out = b""
    try:
        proc = subprocess.Popen([sys.executable, "-m", "ktui.tui.cli", "add", "Narrow", str(notes), "--wait"],
                                cwd=ktui.work, env=ktui.env(), stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        slave = -1
        deadline = time.monotonic() + 60  # a hang guard only
        while b" items" not in out:  # the progress line is drawn (no bar on 60 columns): now interrupt
            assert time.monotonic() < deadline and proc.poll() is None, out
            out += os.read(master, 65536)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
        out += read_to_end(master)
    finally:
        server.faults.clear()
        if slave != -1:
            os.close(slave)
        os.close(master)
    text = out.decode("utf-8", "replace")
    assert text.replace("\r\n", "\n").endswith("\nktui: interrupted\n"), text
    bars = [part.split("\n")[0] for part in text.split("\r\x1b[2K")[1:]]
    assert bars and all(0 < len(bar) <= 57 for bar in bars if bar), bars


def test_plain_ktui_opens_the_tui_with_the_settings(tmp_path, monkeypatch):
    """No sub-command: the TUI entry point gets the loaded settings (and --demo)."""
    import ktui.tui.launch
    from ktui.tui.cli import main

    seen = {}

    def fake_run_app(settings, *, demo=False):
        seen.update(data_dir=settings.data_dir, demo=demo)
        return 0

    monkeypatch.setattr(ktui.tui.launch, "run_app", fake_run_app)
    assert main(["--data-dir", str(tmp_path / "d"), "--demo"]) == 0
    assert seen == {"data_dir": tmp_path / "d", "demo": True}


@pytest.mark.slow
def test_add_sources_and_base_options(ktui):
    """The examples of docs/cli.md for `base create` and `add`, with a local web server for URLs."""
    from tests.support.httpserver import Response, routes, serve

    notes = ktui.work / "notes"
    notes.mkdir()
    (notes / "intro.md").write_text("# Intro\nArmadillos roll into armoured balls.", encoding="utf-8")
    (ktui.work / "more").mkdir()
    (ktui.work / "more" / "m.txt").write_text("Meerkats stand guard on their hind legs.", encoding="utf-8")
    (ktui.work / "paper.md").write_text("Octopuses have three hearts and blue blood.", encoding="utf-8")
    (ktui.work / "journal.txt").write_text("Dear diary: saw a heron today.", encoding="utf-8")
    html = "<html><head><title>{0}</title></head><body><article><h1>{0}</h1><p>{1}</p></article></body></html>"
    with serve(lambda req: None) as web:
        base = web.url
        pages = {
            "/post": Response(200, html.format("Post", "Lighthouses guide ships along rocky coasts at night."),
                              {"Content-Type": "text/html; charset=utf-8"}),
            "/a": Response(200, html.format("A", "Glaciers carve valleys over thousands of years."),
                           {"Content-Type": "text/html; charset=utf-8"}),
            "/b": Response(200, html.format("B", "Coral reefs shelter a quarter of marine species."),
                           {"Content-Type": "text/html; charset=utf-8"}),
            "/sitemap.xml": Response(200, (
                '<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                f"<url><loc>{base}/a</loc></url><url><loc>{base}/b</loc></url></urlset>"),
                {"Content-Type": "application/xml"}),
        }
        web.handler = routes(pages)

        papers = ktui.json("base", "create", "Papers", "--model", "ollama::nomic-embed-text", "--chunk-size", "512",
                           "--mode", "hybrid", "--alpha", "0.7")
        assert (papers["embedding_model_id"], papers["chunk_size"], papers["hybrid_alpha"]) == (
            "ollama::nomic-embed-text", 512, 0.7)
        research = ktui.json("base", "create", "Research", "--group", "Work", "--emoji", "🔬", "--threshold", "0.3",
                             "--top-k", "5")
        assert research["group_id"] and (research["emoji"], research["threshold"], research["top_k"]) == ("🔬", 0.3, 5)
        assert ktui.json("base", "update", "Research", "--group", "none")["group_id"] is None

        added = ktui.json("add", "Papers", "notes", "./paper.md", f"{base}/post", "--wait")
        assert [i["type"] for i in added["items"]] == ["directory", "file", "url"]
        assert added["wait"]["failed"] == [] and added["wait"]["completed"] == 4
        sitemap = ktui.json("add", "Papers", f"{base}/sitemap.xml", "--sitemap", "--wait")
        assert sitemap["items"][0]["type"] == "sitemap" and sitemap["wait"]["completed"] == 3
        ktui("add", "Papers", "--note", "Buy milk", "--note", "-", "--source-url", "https://example.org/src",
             stdin=(ktui.work / "journal.txt").read_text(encoding="utf-8"))
        watched = ktui.json("add", "Papers", "more", "--dir", "--watch")
        assert watched["items"][0]["data"]["watch"] is True
        assert "is not a directory" in one_error_line(ktui("add", "Papers", "paper.md", "--dir", rc=1).stderr)

    notes_json = ktui.json("items", "Papers", "--type", "note")["items"]
    assert sorted(n["data"]["content"] for n in notes_json) == ["Buy milk", "Dear diary: saw a heron today."]
    assert {n["data"]["source_url"] for n in notes_json} == {"https://example.org/src"}
    urls = [i["source"] for i in ktui.json("items", "Papers", "--all", "--type", "url")["items"]]
    assert sorted(urls) == [f"{base}/a", f"{base}/b", f"{base}/post"]
    hits = ktui.json("search", "Papers", "glaciers carve valleys")["results"]
    assert hits[0]["source"] == f"{base}/a"

    paper = next(i for i in added["items"] if i["type"] == "file")
    again = ktui.json("reindex", "Papers", "intro.md", paper["id"][-8:], "--wait")
    assert len(again["items"]) == 2 and again["wait"]["failed"] == []  # a file inside a directory, by name, and one by id suffix
    exported = ktui("base", "export", "Papers", "Research", "-o", "bases.json").stdout
    assert "exported 2 base(s), 7 item(s) to bases.json" in exported
    everything = ktui.json("base", "export", "--all", "-o", "everything.json")
    assert (everything["bases"], everything["items"]) == (2, 7)
    assert json.loads((ktui.work / "everything.json").read_text(encoding="utf-8"))["format"] == "ktui-export"
    assert sorted(ktui.json("base", "delete", "Papers", "Research")["deleted"]) == sorted([papers["id"], research["id"]])


@pytest.mark.slow
def test_first_steps_with_the_builtin_model(tmp_path):
    """docs/user-guide.md "First steps", as written: no settings file, the offline built-in model."""
    home = tmp_path / "user"
    (home / "notes").mkdir(parents=True)
    (home / "notes" / "logging.md").write_text(
        "# Logging\nLog files are rotated every night by logrotate; old logs are compressed.", encoding="utf-8")
    (home / "notes" / "garden.md").write_text(
        "# Garden\nTomatoes need full sun and regular watering.", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KTUI_")}
    env.update(PYTHONPATH=str(ROOT), HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
               XDG_DATA_HOME=str(home / ".local" / "share"), OLLAMA_HOST="127.0.0.1:9")

    def run(*args):
        proc = subprocess.run([sys.executable, "-m", "ktui.tui.cli", *args], env=env, cwd=home,
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stderr
        return proc

    assert "builtin::wordllama" in run("base", "create", "Notes").stdout
    assert "done: 3 completed, 0 failed" in run("add", "Notes", "~/notes", "--wait").stderr
    first = run("search", "Notes", "how do I rotate the logs").stdout.splitlines()[0]
    assert first.endswith("logging.md")
    assert (home / ".local" / "share" / "ktui" / "knowledge.db").exists()  # the platform data directory


@pytest.mark.slow
def test_paths_and_values_a_user_can_get_wrong(ktui, tmp_path):
    """Mistakes found by a QA pass: each is a one-line error naming what is wrong, never
    an internal error, and nothing is written where the user did not ask."""
    line = ktui("--data-dir", "", "base", "list", rc=2).stderr  # an unset shell variable
    assert "--data-dir is empty" in line and not (ktui.home).exists()
    a_file = tmp_path / "a-file.txt"
    a_file.write_text("not a folder", encoding="utf-8")
    line = one_error_line(ktui("--data-dir", str(a_file), "base", "list", rc=1).stderr)
    assert str(a_file) in line and "internal error" not in line

    ktui("base", "create", "Out")
    line = one_error_line(ktui("base", "export", "Out", "-o", str(tmp_path), rc=1).stderr)
    assert "output: is a folder" in line
    missing = tmp_path / "no" / "such" / "dir" / "out.json"
    line = one_error_line(ktui("base", "export", "Out", "-o", str(missing), rc=1).stderr)
    assert "output: folder does not exist" in line and not (tmp_path / "no").exists()
    written = tmp_path / "out.json"
    ktui("base", "export", "Out", "-o", str(written))
    assert written.stat().st_mode & 0o044  # an ordinary file others may read (umask permitting)

    (tmp_path / "binary.bin").write_bytes(bytes(range(256)) * 8)
    line = one_error_line(ktui("rank", "x", "--input", str(tmp_path / "binary.bin"), rc=1).stderr)
    assert "input:" in line and "not UTF-8" in line
    record = '{"content": "otters"}\n'
    assert "top_k: must be at least 1" in one_error_line(ktui("rank", "x", "--top-k", "0", stdin=record, rc=1).stderr)
    assert "min_score" in one_error_line(ktui("rank", "x", "--min-score", "nan", stdin=record, rc=1).stderr)
    assert "query: must not be empty" in one_error_line(ktui("rank", " ", stdin=record, rc=1).stderr)

    ktui("groups", "create", "Research")
    line = one_error_line(ktui("groups", "create", "research", rc=1).stderr)
    assert "a group named 'Research' already exists" in line


@pytest.mark.slow
def test_reindex_wait_counts_the_files_a_folder_refresh_reads_again(ktui):
    folder = ktui.work / "many"
    folder.mkdir()
    for i in range(6):
        (folder / f"f{i}.txt").write_text(f"file {i} about otters", encoding="utf-8")
    ktui("base", "create", "Many")
    ktui("add", "Many", str(folder), "--wait")
    for i in range(3):  # three files change, one is new, two stay as they were
        (folder / f"f{i}.txt").write_text(f"file {i} now about volcanoes", encoding="utf-8")
    (folder / "g.txt").write_text("a new file about penguins", encoding="utf-8")
    waited = ktui.json("reindex", "Many", "many", "--wait")["wait"]
    assert waited == {"total": 5, "completed": 5, "unfinished": 0, "paused": None, "failed": [],
                      "window_overflow": [], "skipped": []}  # the folder, 3 changed, 1 new


@pytest.mark.slow
def test_a_search_that_falls_back_to_keywords_says_so_once(ktui):
    ktui("base", "create", "Offline", "--model", "dead::model", "--dimensions", "32")  # its server is down
    result = ktui("search", "Offline", "otters")
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "could not be embedded" in warnings[0]
    assert warnings[0].count("keyword (bm25)") == 1


@pytest.mark.slow
def test_search_several_bases_with_filters_and_relevance(ktui):
    (ktui.work / "zoo").mkdir()
    (ktui.work / "zoo" / "zebra.md").write_text("Zebras have black and white stripes.", encoding="utf-8")
    (ktui.work / "tea").mkdir()
    (ktui.work / "tea" / "oolong.txt").write_text("乌龙茶是一种半发酵茶。", encoding="utf-8")
    ktui("base", "create", "Zoo")
    small = ktui("base", "create", "Tea", "--model", "fake::all-minilm", "--chunk-size", "1024")
    assert "warning: chunks of up to 1024 tokens exceed the 256-token input window" in small.stderr
    ktui("add", "Zoo", "zoo", "--wait")
    ktui("add", "Tea", "tea", "--wait")
    both = ktui.json("search", "--all", "乌龙茶 stripes")
    assert {r["base_name"] for r in both["results"]} == {"Zoo", "Tea"}
    assert all(0 <= r["relevance"] <= 1 and r["base_id"] for r in both["results"])
    text = ktui("search", "Zoo", "Tea", "乌龙茶", "--mode", "bm25").stdout
    assert text.splitlines()[0].startswith(" 1. 1.00 (") and "[Tea]" in text and "oolong.txt" in text
    only = ktui.json("search", "--all", "stripes", "--under", "tea")["results"]
    assert only == [] or all("/tea/" in r["source"] for r in only)
    assert ktui.json("search", "Zoo", "stripes", "--after", "2999-01-01")["results"] == []
    assert "modified_after" in one_error_line(ktui("search", "Zoo", "x", "--after", "soon", rc=1).stderr)
    assert "with --all, give only the query" in ktui("search", "--all", "Zoo", "x", rc=2).stderr


@pytest.mark.slow
def test_scans_are_found_and_ktui_item_says_what_ocr_read(ktui):
    """A real folder of scans through the real worker and Tesseract; then the same with
    a PATH that has no Tesseract: the images fail saying so, nothing is left running."""
    from tests.support.ocr_pages import PageSpec, page_text, render_lines, save_image, save_multipage

    folder = ktui.work / "scans [2024]"
    folder.mkdir()
    pages = [render_lines(page_text(seed, lines=3, words_per_line=6), PageSpec(height=360)) for seed in (31, 32)]
    save_multipage([p.image for p in pages], folder / "fax.tiff")
    receipt = render_lines(page_text(33, lines=3, words_per_line=6), PageSpec(height=360))
    save_image(receipt.image, folder / "receipt 🧾.png")
    ktui("base", "create", "Scans")
    ktui("add", "Scans", str(folder), "--wait")
    for text, name in ((pages[1].text, "fax.tiff"), (receipt.text, "receipt 🧾.png")):
        phrase = " ".join(w.strip(".,;:") for w in text.splitlines()[1].split()[1:4])
        hits = ktui.json("search", "Scans", f'"{phrase}"', "--mode", "bm25")["results"]
        assert hits and Path(hits[0]["source"]).name == name, (phrase, hits)

    shown = ktui("item", "Scans", "fax.tiff").stdout
    detail = ktui.json("item", "Scans", "fax.tiff")
    ocr = detail["data"]["ocr"]
    assert ocr["pages"] == "1-2" and ocr["page_count"] == 2 and ocr["engine"].startswith("tesseract")
    assert detail["status"] == "completed" and detail["chunk_count"] >= 2
    assert f"ocr      pages 1-2 (2 pages), mean confidence {ocr['confidence']:g} % ({ocr['engine']})" in shown
    assert "status   completed" in shown

    no_tesseract = ktui.env(PATH=str(Path(sys.executable).parent))
    ktui("base", "create", "Elsewhere")
    waited = ktui("add", "Elsewhere", str(folder / "receipt 🧾.png"), "--wait", "--json", rc=1, env=no_tesseract)
    [failed] = json.loads(waited.stdout)["wait"]["failed"]
    assert "OCR needs Tesseract, which is not installed" in failed["error"] and "apt install tesseract-ocr" in failed["error"]
    assert "OCR needs Tesseract" in ktui("item", "Elsewhere", "receipt 🧾.png").stdout
    assert "nothing to do" in ktui("wait", "Elsewhere").stderr  # nothing left stuck in the queue


@pytest.mark.slow
def test_chunks_past_the_model_window_are_named_after_wait_and_in_item(ktui):
    with ktui.config.open("a", encoding="utf-8") as fh:  # a model with a 32-token window
        fh.write('[models."fake::tiny-window"]\nwindow_tokens = 32\n')
    long = ktui.work / "long.txt"
    long.write_text(" ".join(f"otters{i % 7} float on rivers and hold paws" for i in range(40)), encoding="utf-8")
    fits = ktui.json("base", "create", "Fits", "--model", "fake::tiny-window")
    assert fits["chunk_size"] <= 32  # a new base's default chunks fit the window
    created = ktui("base", "create", "Tight", "--model", "fake::tiny-window", "--chunk-size", "100",
                   "--chunk-overlap", "10")
    assert "exceed the 32-token input window" in created.stderr
    added = ktui("add", "Tight", "long.txt", "--note", "a short note", "--wait")
    lines = [line for line in added.stderr.splitlines() if line.startswith("warning: Tight:")]
    assert len(lines) == 1 and "1 item(s) have chunks longer than the 32-token input window" in lines[0]
    assert "--chunk-size 25" in lines[0]
    detail = ktui("item", "Tight", "long.txt").stdout
    assert "window   warning:" in detail and "-token window of the embedding model" in detail
    shown = ktui.json("item", "Tight", "long.txt")
    assert shown["window_overflow"]["window_tokens"] == 32 and shown["window_overflow"]["over"] >= 1
    assert shown["chunk_count"] == shown["window_overflow"]["chunks"]
    assert ktui.json("item", "Tight", "a short note")["window_overflow"] is None
    ktui("base", "update", "Tight", "--chunk-size", "25", "--chunk-overlap", "5")
    again = ktui.json("reindex", "Tight", "long.txt", "--wait")
    assert again["wait"]["window_overflow"] == [] and again["wait"]["completed"] == 1
    assert ktui.json("item", "Tight", "long.txt")["window_overflow"] is None


def test_a_folder_walk_says_what_it_skipped_and_why(ktui):
    folder = ktui.work / "mixed"
    (folder / "node_modules" / "pkg").mkdir(parents=True)
    (folder / "notes.md").write_text("# Notes\nKites fly.\n", encoding="utf-8")
    (folder / "setup.exe").write_bytes(b"MZ")
    (folder / "node_modules" / "pkg" / "readme.md").write_text("x", encoding="utf-8")
    (folder / ".gitignore").write_text("drafts/\n", encoding="utf-8")
    (folder / "drafts").mkdir()
    (folder / "drafts" / "d.md").write_text("draft", encoding="utf-8")
    ktui("base", "create", "Mixed")
    added = ktui("add", "Mixed", str(folder), "--wait")
    line = next(line for line in added.stderr.splitlines() if line.startswith("skipped in "))
    assert line == ("skipped in mixed: 1 ignore rule (drafts/), 1 skipped folder (node_modules/), "
                    "1 unsupported type (setup.exe)")
    shown = ktui("item", "Mixed", "mixed").stdout
    assert "skipped" in shown and "1 unsupported type (setup.exe)" in shown
    data = json.loads(ktui("item", "Mixed", "mixed", "--json").stdout)["data"]["skipped"]
    assert data["total"] == 3 and data["counts"]["unsupported type"] == 1
    waited = json.loads(ktui("reindex", "Mixed", "--all", "--wait", "--json").stdout)["wait"]
    assert waited["skipped"][0]["counts"] == {"ignore rule": 1, "skipped folder": 1, "unsupported type": 1}


def test_empty_files_in_a_folder_are_skipped_and_one_added_alone_fails_naming_it(ktui):
    folder = ktui.work / "project"
    (folder / "pkg").mkdir(parents=True)
    (folder / "pkg" / "__init__.py").write_bytes(b"")
    (folder / "pkg" / "core.py").write_text("def kite():\n    return 'flies'\n", encoding="utf-8")
    (folder / "README.md").write_text("# Project\nKites fly in spring.\n", encoding="utf-8")
    (folder / "TODO.md").write_text("\n\n", encoding="utf-8")
    (folder / "pkg" / "blank.py").write_text(" \n\t" * 100, encoding="utf-8")  # 300 bytes of whitespace
    ktui("base", "create", "Code")
    added = ktui("add", "Code", str(folder), "--wait")  # rc 0: nothing failed
    line = next(line for line in added.stderr.splitlines() if line.startswith("skipped in "))
    assert line == "skipped in project: 3 empty file (TODO.md, pkg/__init__.py, pkg/blank.py)", line
    assert "done: 4 completed, 0 failed" in added.stderr, added.stderr
    shown = ktui.json("item", "Code", "project")
    assert shown["status"] == "completed" and shown["data"]["skipped"]["counts"] == {"empty file": 3}
    listed = ktui.json("items", "Code", "--all")["items"]
    assert sorted(i["name"] for i in listed if i["type"] == "file") == ["README.md", "core.py"]
    assert {i["status"] for i in listed} == {"completed"}
    hits = ktui.json("search", "Code", "kites", "--mode", "bm25")["results"]
    assert hits and hits[0]["source"].endswith("README.md")
    # a single empty file, given by name: a failure that names it
    (ktui.work / "empty.md").write_bytes(b"")
    (ktui.work / "blank.txt").write_text("  \n", encoding="utf-8")
    failed = ktui("add", "Code", "empty.md", "--wait", rc=1)
    assert "File is empty" in failed.stderr and "empty.md" in failed.stderr, failed.stderr
    blank = ktui("add", "Code", "blank.txt", "--wait", rc=1)
    assert "no text content" in blank.stderr and "blank.txt" in blank.stderr, blank.stderr


def test_add_errors_name_the_paths_given_not_the_facades_fields(ktui, tmp_path):
    make_docs(tmp_path)
    ktui("base", "create", "Docs")
    ktui("add", "Docs", str(tmp_path / "docs"))
    inner = tmp_path / "docs" / "otters.md"
    err = ktui("add", "Docs", str(inner), rc=1).stderr
    assert "items[" not in err and f"{inner} is inside the folder {tmp_path / 'docs'}" in err
    err = ktui("add", "Docs", str(tmp_path / "docs"), "--note", "fine", rc=1).stderr
    assert "items[" not in err and "already in this base" in err


def test_a_folder_failed_by_its_file_is_counted_apart_and_errors_do_not_repeat_the_path(ktui):
    folder = ktui.work / "mixed"
    folder.mkdir()
    (folder / "ok.md").write_text("# Otters\n\nOtters float on their backs.\n", encoding="utf-8")
    (folder / "binary.md").write_bytes(b"\x00\x01\x02" * 40)
    ktui("base", "create", "Mixed")
    added = ktui("add", "Mixed", str(folder), "--wait", rc=1)
    assert "done: 1 completed, 1 failed (and 1 folder holding failed files)" in added.stderr, added.stderr
    binary = str(folder / "binary.md")
    failures = [line.strip() for line in added.stderr.splitlines() if line.strip().startswith("failed  ")]
    # once as it happened (by name), once at the end (by path); the folder has no line
    assert failures == ["failed  file binary.md: Not a text file (binary content)",
                        f"failed  file {binary}: Not a text file (binary content)"], added.stderr
    for shown in (ktui("items", "Mixed", "--all").stdout, ktui("item", "Mixed", "binary.md").stdout):
        assert "Not a text file (binary content)" in shown and f"(binary content): {binary}" not in shown, shown
