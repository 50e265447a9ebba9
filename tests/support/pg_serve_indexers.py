"""Real `ktui serve` processes indexing one base on a shared PostgreSQL store: the
multi-process test (tests/integration/test_pg_serve_processes.py) and the runtime-level
benchmark (tests/benchmarks/test_bench_postgres_serve_indexers.py).

Each process is a "machine" of its own (its data directory and settings file, one
`[store]` schema, the lease TTL the caller asks for), started with `ktui serve --port 0`.
Items are added through one process's HTTP API, so that process queues them and the
others join in through their sweeps. `completion_log` installs a trigger that records
every transition of an item to `completed` (the catalogue's own rows, written by
whichever process completed it), so a test can check that each happened exactly once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg import sql

from tests.support.frontends import ServeProcess, Workspace

COMPLETION_LOG = """
CREATE TABLE IF NOT EXISTS test_completion_log (item_id TEXT NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS test_status_log (item_id TEXT NOT NULL, old TEXT, new TEXT, phase TEXT, pid INT,
    at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp());
CREATE OR REPLACE FUNCTION test_log_completion() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO test_status_log (item_id, old, new, phase, pid)
        VALUES (NEW.id, OLD.status, NEW.status, NEW.phase, pg_backend_pid());
    IF NEW.status = 'completed' AND OLD.status IS DISTINCT FROM 'completed' THEN
        INSERT INTO test_completion_log (item_id) VALUES (NEW.id);
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS test_log_completion ON knowledge_item;
CREATE TRIGGER test_log_completion AFTER UPDATE OF status, phase ON knowledge_item
    FOR EACH ROW EXECUTE FUNCTION test_log_completion();
"""


def connect(url: str, schema: str) -> psycopg.Connection[Any]:
    con = psycopg.connect(url, autocommit=True)
    con.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    return con


def machine(work: Path, server_url: str, url: str, schema: str, *, lease_ttl: float,
            concurrency: int = 5) -> Workspace:
    """A data directory and settings file on the shared store."""
    ws = Workspace(work, server_url)
    text = ws.config.read_text(encoding="utf-8")
    ws.config.write_text(f"concurrency = {concurrency}\n" + text
                         + f'[store]\nurl = "{url}"\nschema = "{schema}"\nlease_ttl = {lease_ttl}\n',
                         encoding="utf-8")
    return ws


def start(ws: Workspace) -> ServeProcess:
    return ServeProcess(ws)


def completion_log(con: psycopg.Connection[Any]) -> None:
    """Record every item's transitions to `completed` (the catalogue must exist)."""
    con.execute(COMPLETION_LOG)


def completions(con: psycopg.Connection[Any]) -> dict[str, int]:
    return {r[0]: int(r[1]) for r in con.execute("SELECT item_id, count(*) FROM test_completion_log GROUP BY 1")}


def history(con: psycopg.Connection[Any], item_ids: list[str]) -> list[tuple[Any, ...]]:
    """Every status/phase change of these items, in order (for a failure's message)."""
    return list(con.execute("SELECT item_id, old, new, phase, pid, at FROM test_status_log "
                            "WHERE item_id = ANY(%s) ORDER BY at", (item_ids,)).fetchall())


def create_base(serve: ServeProcess, name: str) -> dict[str, Any]:
    response = httpx.post(f"{serve.url}/knowledge-bases", json={"name": name}, timeout=120)
    assert response.status_code == 201, response.text
    return dict(response.json())


def add_notes(serve: ServeProcess, base_id: str, texts: list[str]) -> list[str]:
    """Add notes through this process (it queues them), 100 a request (the API's limit);
    their ids."""
    ids: list[str] = []
    with httpx.Client(timeout=120) as client:
        for start in range(0, len(texts), 100):
            items = [{"type": "note", "data": {"content": t}} for t in texts[start:start + 100]]
            response = client.post(f"{serve.url}/knowledge-bases/{base_id}/items", json={"items": items})
            assert response.status_code == 202, response.text
            ids += [i["id"] for i in response.json()["items"]]
    return ids


def leased_by(con: psycopg.Connection[Any], pid: int) -> list[str]:
    """The items whose leases the process `pid` holds (owner `<host>:<pid>:<random>`)."""
    return sorted(r[0] for r in con.execute("SELECT item_id FROM item_lease WHERE split_part(owner, ':', 2) = %s",
                                            (str(pid),)))


def status_counts(con: psycopg.Connection[Any], base_id: str) -> dict[str, int]:
    return {r[0]: int(r[1]) for r in con.execute(
        "SELECT status, count(*) FROM knowledge_item WHERE base_id = %s GROUP BY 1", (base_id,))}


def chunks_per_item(url: str, schema: str, base_id: str, dims: int) -> dict[str, int]:
    """Chunks of each item in the base's chunk table."""
    from collections import Counter

    from ktui.core.store.postgres import PgStoreManager

    stores = PgStoreManager(url, schema=schema)
    try:
        store = stores.get(base_id, dims)
        return dict(Counter(c.item_id for c in store.list_chunks(sorted(store.item_ids()))))
    finally:
        stores.close_all()
