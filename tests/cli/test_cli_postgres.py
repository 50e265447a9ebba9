"""`ktui --store URL`: real `ktui` processes on a shared PostgreSQL store.

Two "machines" (two data directories of their own, two settings files) point at one
PostgreSQL schema: one indexes a real folder through the embedding server with
`ktui add DIR --wait`, the other lists and searches it. The URL carries a password
that must never appear in any output; a bad URL is refused naming the option.
"""

from __future__ import annotations

import pytest

from tests.cli.test_cli import Ktui, server  # noqa: F401 - the module's embedding server fixture

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SECRET = "hunter2-secret"


@pytest.fixture
def store(postgres_server, pg_schema):
    # pgserver trusts its socket: the password is ignored by the server, but it is in the URL
    url = postgres_server.url.replace("postgresql://postgres:@", f"postgresql://postgres:{SECRET}@")
    assert SECRET in url
    return url, pg_schema


def machine(tmp_path, name, server_url, schema):  # noqa: F811
    ktui = Ktui(tmp_path / name, server_url)
    ktui.config.write_text(ktui.config.read_text(encoding="utf-8") + f'[store]\nschema = "{schema}"\n', encoding="utf-8")
    return ktui


def test_one_machine_indexes_a_folder_and_another_searches_it(tmp_path, server, store):  # noqa: F811
    url, schema = store
    one, two = machine(tmp_path, "one", server.url, schema), machine(tmp_path, "two", server.url, schema)
    docs = one.work / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "otters.md").write_text("# Otters\n\nSea otters hold hands while they sleep.\n", encoding="utf-8")
    (docs / "guide" / "badgers.md").write_text("# Badgers\n\nBadgers dig long tunnels called setts.\n", encoding="utf-8")
    outputs = [one("--store", url, "base", "create", "Team")]
    outputs.append(one("--store", url, "add", "Team", str(docs), "--wait"))
    listed = two.json("--store", url, "base", "list")
    assert [b["name"] for b in listed["bases"]] == ["Team"]
    found = two.json("--store", url, "search", "Team", "sea otters sleeping")
    assert found["results"] and found["results"][0]["metadata"]["source"].endswith("otters.md")
    # the environment variable works like the option, and the other machine can write too
    outputs.append(two("add", "Team", "--note", "Otters use stones as tools.", "--wait", env=two.env(KTUI_STORE=url)))
    items = one.json("--store", url, "items", "Team", "--all")
    assert len(items["items"]) == 5  # the folder, its sub-folder, two files, the note (before the debug one)
    assert not (one.home / "knowledge.db").exists() and not (two.home / "knowledge.db").exists()
    outputs.append(one("--store", url, "doctor", "--json"))
    outputs.append(one("--debug", "--store", url, "add", "Team", "--note", "Debug logs too.", "--wait"))  # every log line
    # without --wait the items wait on the shared store for whoever indexes it: this machine's
    # `ktui wait` (a sweeper) picks the other one's note up
    queued = two("--store", url, "add", "Team", "--note", "Queued for whoever indexes it.")
    assert "queued on the shared store; any TUI, `ktui serve` or `ktui watch` open on it" in queued.stderr
    assert "done: 1 completed, 0 failed" in one("--store", url, "wait").stderr
    outputs.append(queued)
    for proc in outputs:
        assert SECRET not in proc.stdout + proc.stderr


def test_a_bad_store_url_is_refused_naming_the_option_and_never_the_password(tmp_path, server):  # noqa: F811
    ktui = Ktui(tmp_path, server.url)
    proc = ktui("--store", f"mysql://bob:{SECRET}@db/kb", "base", "list", rc=1)
    assert "--store" in proc.stderr and "postgresql://" in proc.stderr and SECRET not in proc.stderr
    proc = ktui("base", "list", rc=1, env=ktui.env(KTUI_STORE=f"postgresql://bob:{SECRET}@db:notaport/kb"))
    assert "KTUI_STORE" in proc.stderr and SECRET not in proc.stderr
    proc = ktui("--store", f"postgresql://bob:{SECRET}@127.0.0.1:9/kb", "watch", rc=1)  # nobody listens there
    assert "bob@127.0.0.1:9/kb" in proc.stderr
    assert SECRET not in proc.stderr


def test_ktui_serve_streams_another_processs_indexing(tmp_path, server, store):  # noqa: F811
    import asyncio
    import json

    import httpx

    from ktui.core.config import StoreSettings
    from ktui.core.models import ItemInput
    from ktui.core.service import KnowledgeService
    from tests.support.frontends import ServeProcess, Workspace
    from tests.support.services import FAKE_MODEL, fake_settings

    url, schema = store
    ws = Workspace(tmp_path / "serving", server.url)
    ws.config.write_text(ws.config.read_text(encoding="utf-8") + f'[store]\nurl = "{url}"\nschema = "{schema}"\n',
                         encoding="utf-8")
    proc = ServeProcess(ws)
    try:
        with httpx.Client(base_url=proc.url, timeout=60) as client, client.stream("GET", "/events") as stream:
            lines = stream.iter_lines()
            assert next(lines).startswith(":")

            async def elsewhere() -> tuple[str, str]:
                settings = fake_settings(tmp_path / "other", server.url).with_(store=StoreSettings(url=url, schema=schema))
                async with await KnowledgeService.open(settings=settings) as ks:
                    base = await ks.create_base("Served", FAKE_MODEL, None)
                    (note,) = await ks.add_items(base.id, [ItemInput("note", {"content": "Seen from the server."})])
                    await ks.wait_idle(timeout=60)
                    return base.id, note.id

            base_id, note_id = asyncio.run(elsewhere())
            seen, event = [], None
            for line in lines:
                if line.startswith("event:"):
                    event = line.split(":", 1)[1].strip()
                elif line.startswith("data:") and event:
                    data = json.loads(line.split(":", 1)[1])
                    seen.append((event, data))
                    if event == "ItemChanged" and data["item_id"] == note_id and data["status"] == "completed":
                        break
            assert ("BaseChanged", {"base_id": base_id}) in seen
            assert any(k == "ItemsAdded" and note_id in d["item_ids"] for k, d in seen)
            assert [b["name"] for b in client.get("/knowledge-bases").json()["items"]] == ["Served"]
    finally:
        proc.stop()
    assert SECRET not in "".join(proc.lines) + (proc.proc.stderr.read() if proc.proc.stderr else "")


def test_ktui_watch_follows_a_folder_on_a_shared_store_and_stops_cleanly_on_sigterm(tmp_path, server, store):  # noqa: F811
    import json
    import signal
    import subprocess
    import sys

    import psycopg

    from ktui.core.store.postgres.notify import new_origin
    from tests.cli.test_cli_watch import LINE_TIMEOUT, Lines

    url, schema = store
    one = machine(tmp_path, "one", server.url, schema)
    folder = one.work / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# Alpacas\nAlpacas hum.\n", encoding="utf-8")
    one("--store", url, "base", "create", "Notes")
    one("--store", url, "add", "Notes", str(folder), "--watch", "--wait")  # a one-shot command follows nothing

    def watch() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "ktui.tui.cli", "--store", url, "watch", "--json"],
                                cwd=one.work, env=one.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    first = watch()
    second = None
    try:
        lines = Lines(first)
        started = json.loads(lines.until(lambda s: '"watching"' in s))
        assert started["base"] == "Notes" and started["folder"] == str(folder)
        (folder / "c.md").write_text("# Capybaras\nCapybaras swim in rivers.\n", encoding="utf-8")
        added = json.loads(lines.until(lambda s: "c.md" in s))
        assert (added["event"], added["type"], added["source"]) == ("indexed", "file", str(folder / "c.md"))
        # a second watcher of this machine: the folder has its follower, and it says whose
        second = watch()
        second_lines = Lines(second)
        other = json.loads(second_lines.until(lambda s: '"followed"' in s))
        assert other["by"] == new_origin().split(":")[0] and other["folder"] == str(folder)
        # the first stops and gives the folder back: the second takes it over and says so
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=LINE_TIMEOUT) == 0
        taken = json.loads(second_lines.until(lambda s: '"watching"' in s))
        assert taken["folder"] == str(folder)
        (folder / "d.md").write_text("# Dingos\nDingos howl at night.\n", encoding="utf-8")
        assert json.loads(second_lines.until(lambda s: "d.md" in s))["event"] == "indexed"
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=LINE_TIMEOUT) == 0
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    for proc in (first, second):
        assert proc is not None and SECRET not in proc.stderr.read()
    assert not [s for s in lines.seen if "a.md" in s]  # a.md was not read again
    with psycopg.connect(store[0], autocommit=True) as con:  # a clean stop gave the folder back
        rows = con.execute(f'SELECT host, owner FROM "{schema}".watch_lease').fetchall()
    assert rows == [(new_origin().split(":")[0], None)]
    items = one.json("--store", url, "items", "Notes", "--all")["items"]
    assert sorted(i["name"] for i in items if i["type"] == "file") == ["a.md", "c.md", "d.md"]
    assert {i["status"] for i in items} == {"completed"}


def test_a_killed_base_import_is_discarded_by_another_process_once_its_lease_expired(tmp_path, server, store):  # noqa: F811
    import json
    import signal
    import subprocess
    import sys
    import time

    import psycopg

    from tests.integration.test_import_ledger import document

    url, schema = store
    one = machine(tmp_path, "one", server.url, schema)
    one.config.write_text(one.config.read_text(encoding="utf-8") + "lease_ttl = 3\n", encoding="utf-8")  # [store]
    path = tmp_path / "big.json"
    path.write_text(json.dumps(document("Big import", 20_000)), encoding="utf-8")
    one("--store", url, "base", "create", "Kept")

    def count(sql: str) -> int:
        with psycopg.connect(store[0], autocommit=True) as con:
            return int(con.execute(sql.replace("@s.", f'"{schema}".')).fetchone()[0])

    proc = subprocess.Popen([sys.executable, "-m", "ktui.tui.cli", "--store", url, "base", "import", str(path)],
                            cwd=one.work, env=one.env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120  # only bounds a failure
        while not count("SELECT count(*) FROM @s.knowledge_base WHERE name = 'Big import'"):
            assert proc.poll() is None, "the import ended before it could be caught mid-way"
            assert time.monotonic() < deadline, "the import never created its base"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert count("SELECT count(*) FROM @s.base_import WHERE state = 'importing'") == 1
    assert count("SELECT count(*) FROM @s.import_lease") == 1  # written with the base: the killed importer's
    # another process's open discards it once the lease expired (3 s): look again until it has
    deadline = time.monotonic() + 120
    while count("SELECT count(*) FROM @s.knowledge_base WHERE name = 'Big import'"):
        assert time.monotonic() < deadline, "the interrupted import was never discarded"
        one("--store", url, "wait")
    assert count("SELECT count(*) FROM @s.base_import") == 0 and count("SELECT count(*) FROM @s.import_lease") == 0
    assert count("SELECT count(*) FROM @s.knowledge_item") == 0
    assert [b["name"] for b in one.json("--store", url, "base", "list")["bases"]] == ["Kept"]
    assert count("SELECT count(*) FROM @s.ktui_chunk_store") == 1  # the discarded base's chunk table went too
