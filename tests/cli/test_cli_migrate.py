"""`ktui migrate --to URL|DIR`: real `ktui` processes move a whole data directory between
SQLite and PostgreSQL and back, with the vectors (nothing is embedded again).

A SQLite data directory gets a few bases indexed through the embedding server (a group,
settings that differ from the defaults, a folder with a sub-folder, notes); `ktui migrate` copies it to the test PostgreSQL and then back into a
new SQLite data directory. On each copy: every base's settings and every item (ids,
levels, statuses) are the source's, searches give the same chunks in the same order,
the counts are verified, a second migrate into the non-empty target is refused, a
source held by a running process and a bad URL are refused, and no output holds the
password of the URL.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.cli.test_cli import ROOT, Ktui, server  # noqa: F401 - the module's embedding server fixture

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SECRET = "hunter2-secret"
QUERIES = {"Notes": "sea otters sleeping", "Papers": "volcano lava eruption"}


@pytest.fixture
def store(postgres_server, pg_schema):
    url = postgres_server.url.replace("postgresql://postgres:@", f"postgresql://postgres:{SECRET}@")
    return url, pg_schema


def _ktui(work, server_url, schema):  # noqa: F811
    ktui = Ktui(work, server_url)
    ktui.config.write_text(ktui.config.read_text(encoding="utf-8") + f'[store]\nschema = "{schema}"\n', encoding="utf-8")
    return ktui


def _fill(ktui: Ktui) -> None:
    docs = ktui.work / "docs"
    (docs / "deep").mkdir(parents=True)
    for i in range(6):
        (docs / f"otters{i}.md").write_text(
            f"# Otters {i}\n\n" + " ".join(f"Sea otters {i} hold hands while they sleep, word{i}x{j}." for j in range(30)),
            encoding="utf-8")
    (docs / "deep" / "badgers.md").write_text("# Badgers\n\nBadgers dig long tunnels called setts.\n", encoding="utf-8")
    papers = ktui.work / "papers"
    papers.mkdir()
    (papers / "volcano.txt").write_text(" ".join(f"Volcanoes erupt molten lava and ash {j}." for j in range(80)),
                                        encoding="utf-8")
    ktui("base", "create", "Notes", "--group", "Research", "--chunk-size", "48", "--chunk-overlap", "8")
    ktui("add", "Notes", str(docs), "--wait")
    ktui("add", "Notes", "--note", "Otters use stones as tools.", "--wait")
    ktui("base", "create", "Papers", "--chunk-size", "40", "--chunk-overlap", "4", "--mode", "hybrid", "--alpha", "0.7",
         "--threshold", "0.01", "--top-k", "7", "--emoji", "🌋", "--ocr", "off")
    ktui("add", "Papers", str(papers / "volcano.txt"), "--wait")


def _snapshot(ktui: Ktui, *store: str) -> dict:
    """Everything a user sees of the data directory: bases, items, search results."""
    listed = ktui.json(*store, "base", "list")
    bases = {}
    for b in listed["bases"]:
        shown = ktui.json(*store, "base", "show", b["id"])
        shown.pop("store_problem", None)
        items = ktui.json(*store, "items", b["id"], "--all")["items"]
        entry = {"base": shown, "items": sorted((i["id"], i["type"], i["status"], i.get("group_id")) for i in items)}
        if b["name"] in QUERIES:
            found = ktui.json(*store, "search", b["id"], QUERIES[b["name"]], "--top-k", "5")["results"]
            entry["top"] = [(r["chunk_id"], r["item_id"]) for r in found]
            entry["scores"] = [r["score"] for r in found]
            for mode in ("vector", "bm25"):
                found = ktui.json(*store, "search", b["id"], QUERIES[b["name"]], "--top-k", "5", "--mode", mode)["results"]
                entry[mode] = [r["chunk_id"] for r in found]
        bases[b["name"]] = entry
    groups = sorted((g["id"], g["name"]) for g in ktui.json(*store, "groups", "list")["groups"])
    return {"bases": bases, "groups": groups}


def _same(a: dict, b: dict) -> None:
    assert a["groups"] == b["groups"]
    assert a["bases"].keys() == b["bases"].keys()
    for name, one in a["bases"].items():
        two = b["bases"][name]
        assert one["base"] == two["base"], name
        assert one["items"] == two["items"], name
        for key in ("top", "vector", "bm25"):
            assert one.get(key) == two.get(key), (name, key)
        assert one.get("scores") == pytest.approx(two.get("scores"), abs=1e-4), name


def test_migrate_sqlite_to_postgres_and_back(tmp_path, server, store):  # noqa: F811
    url, schema = store
    ktui = _ktui(tmp_path / "one", server.url, schema)
    _fill(ktui)
    before = _snapshot(ktui)
    assert before["bases"]["Notes"]["top"] and before["bases"]["Papers"]["top"]
    outputs = []

    embedded = server.texts_embedded
    moved = ktui.json("migrate", "--to", url)
    assert server.texts_embedded == embedded  # nothing was embedded again
    assert moved["ok"] is True and SECRET not in str(moved)
    counts = {b["name"]: (b["items"], b["chunks"], b["vectors"]) for b in moved["bases"]}
    assert counts["Notes"][0] == 10 and counts["Notes"][1] > 10  # folder, sub-folder, 7 files, the note
    assert counts["Notes"][1] == counts["Notes"][2] and counts["Papers"][1] > 3
    assert all(b["status"] == "moved" and b["verified"] for b in moved["bases"])
    assert all((b["target_items"], b["target_chunks"], b["target_vectors"]) == counts[b["name"]] for b in moved["bases"])
    on_pg = _snapshot(ktui, "--store", url)
    _same(before, on_pg)

    # the source is untouched and still works; the target is not empty any more: refused
    assert _snapshot(ktui) == before
    refused = ktui("migrate", "--to", url, rc=1)
    assert "already holds 2 base(s)" in refused.stderr and "--merge" in refused.stderr
    outputs.append(refused)
    # --merge: the bases already there are checked and kept
    kept = ktui.json("migrate", "--to", url, "--merge")
    assert kept["ok"] and {b["status"] for b in kept["bases"]} == {"kept"}

    # and back: PostgreSQL -> a new SQLite data directory
    home2 = tmp_path / "two-home"
    plain = ktui("--store", url, "migrate", "--to", str(home2))
    outputs.append(plain)
    assert "counts verified" in plain.stdout and "every base's items, chunks and vectors verified" in plain.stdout
    two = _ktui(tmp_path / "one", server.url, schema)
    two.home = home2
    _same(before, _snapshot(two))
    # the copy is a working data directory: it indexes and searches
    two("add", "Papers", "--note", "Lava tubes form when lava flows.", "--wait")
    assert two.json("search", "Papers", "lava tubes")["results"]
    for proc in outputs:
        assert SECRET not in proc.stdout + proc.stderr


def test_migrate_refuses_a_busy_source_a_bad_url_and_itself(tmp_path, server, store):  # noqa: F811
    url, schema = store
    ktui = _ktui(tmp_path, server.url, schema)
    ktui("base", "create", "Notes")
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys; from pathlib import Path; from ktui.core.lockfile import DataDirLock; "
         f"lock = DataDirLock(Path({str(ktui.home)!r})); lock.acquire('ktui watch'); print('held', flush=True); "
         "sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ktui.env(), cwd=ROOT)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        busy = ktui("migrate", "--to", url, rc=1)
        assert "in use by ktui watch" in busy.stderr and SECRET not in busy.stderr
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    bad = ktui("migrate", "--to", f"mysql://bob:{SECRET}@db/kb", rc=1)
    assert "to" in bad.stderr and "postgresql://" in bad.stderr and SECRET not in bad.stderr
    unreachable = ktui("migrate", "--to", f"postgresql://bob:{SECRET}@127.0.0.1:9/kb?connect_timeout=3", rc=1)
    assert "postgresql://bob@127.0.0.1:9/kb" in unreachable.stderr and SECRET not in unreachable.stderr
    itself = ktui("migrate", "--to", str(ktui.home), rc=1)
    assert "source data directory itself" in itself.stderr
    # nothing was written to the target by the refusals
    assert ktui.json("--store", url, "base", "list")["bases"] == []


def test_a_killed_migrate_leaves_only_whole_bases_and_resumes_with_merge(tmp_path, server, store):  # noqa: F811
    import signal

    url, schema = store
    ktui = _ktui(tmp_path, server.url, schema)
    _fill(ktui)
    big = ktui.work / "big.txt"
    big.write_text(" ".join(f"Basalt columns {j} cool from lava flows." for j in range(1500)), encoding="utf-8")
    ktui("add", "Papers", str(big), "--wait")
    before = _snapshot(ktui)
    proc = subprocess.Popen([sys.executable, "-m", "ktui.tui.cli", "migrate", "--to", url, "--batch", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ktui.env(), cwd=ktui.work)
    try:
        assert proc.stderr is not None
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if "copying Papers" in line:
                proc.send_signal(signal.SIGKILL)  # mid-copy of the second base's chunks
                break
        assert proc.wait(timeout=60) == -signal.SIGKILL, lines
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # only whole bases are visible: Notes (finished before), never a part of Papers
    visible = {b["name"]: b for b in ktui.json("--store", url, "base", "list")["bases"]}
    assert set(visible) == {"Notes"}
    assert _snapshot(ktui) == before  # the source is untouched
    assert "already holds 1 base(s)" in ktui("migrate", "--to", url, rc=1).stderr
    resumed = ktui.json("migrate", "--to", url, "--merge")
    assert resumed["ok"]
    assert {b["name"]: b["status"] for b in resumed["bases"]} == {"Notes": "kept", "Papers": "moved"}
    assert resumed["cleaned"] in ([], [before["bases"]["Papers"]["base"]["id"]])  # its leftover store, if any
    _same(before, _snapshot(ktui, "--store", url))


def _by_content(ktui: Ktui, *store: str) -> dict:
    """Search results by what they are (ids are new after an import): source, text, score."""
    out = {}
    for name, query in QUERIES.items():
        for mode in ("hybrid", "vector", "bm25"):
            found = ktui.json(*store, "search", name, query, "--top-k", "5", "--mode", mode)["results"]
            out[(name, mode)] = [(r["source"], r["text"], round(r["score"], 4)) for r in found]
    return out


def _tree(ktui: Ktui, *store: str) -> dict:
    out = {}
    for b in ktui.json(*store, "base", "list")["bases"]:
        items = ktui.json(*store, "items", b["id"], "--all")["items"]
        out[b["name"]] = sorted((i["type"], i["status"], i.get("name") or "", i.get("source") or "") for i in items)
    return out


def test_export_with_vectors_imports_across_backends_without_embedding(tmp_path, server, store):  # noqa: F811
    url, schema = store
    ktui = _ktui(tmp_path, server.url, schema)
    _fill(ktui)
    before, tree = _by_content(ktui), _tree(ktui)
    assert all(before.values())
    doc = tmp_path / "bases.json"
    ktui("base", "export", "Notes", "Papers", "--vectors", "-o", str(doc))
    embedded = server.texts_embedded
    imported = ktui.json("--store", url, "base", "import", str(doc))
    chunks = sum(b["vectors"] for b in imported["bases"])
    assert chunks > 30 and server.texts_embedded - embedded <= 3  # the model's probes (one, then one a base); no chunk
    assert [(b["name"], b["status"], b["vectors"] > 0) for b in imported["bases"]] == [
        ("Notes", "completed", True), ("Papers", "completed", True)]
    assert _tree(ktui, "--store", url) == tree
    assert _by_content(ktui, "--store", url) == before
    # and back: PostgreSQL -> a new SQLite data directory, through the same kind of document
    back = tmp_path / "back.json"
    ktui("--store", url, "base", "export", "--all", "--vectors", "-o", str(back))
    other = _ktui(tmp_path / "other", server.url, schema)
    embedded = server.texts_embedded
    again = other("base", "import", str(back))
    assert "restored with" in again.stdout and "nothing to index" in again.stdout
    assert server.texts_embedded - embedded <= 3
    assert _tree(other) == tree and _by_content(other) == before
    # a document without a usable index (another width here) falls back to indexing again
    data = __import__("json").loads(doc.read_text(encoding="utf-8"))
    data["bases"] = data["bases"][1:]
    data["bases"][0]["index"]["dimensions"] = 7
    odd = tmp_path / "odd.json"
    odd.write_text(__import__("json").dumps(data), encoding="utf-8")
    third = _ktui(tmp_path / "third", server.url, schema)
    fell_back = third.json("base", "import", str(odd), "--wait")
    assert fell_back["bases"][0]["vectors"] == 0 and "indexed again" in fell_back["bases"][0]["warnings"][0]
    assert third.json("search", "Papers", QUERIES["Papers"])["results"]
