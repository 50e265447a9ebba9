"""An indexer process for the multi-process lease tests and the benchmark.

    python -m tests.support.pg_lease_worker URL SCHEMA NAME MODE LIMIT [EMBED_URL]

It loops: renew its leases (the heartbeat), sweep up to LIMIT claimable items, do the
"work" for them, complete them under the lease, until no item is `processing` (or `idle`: not released yet) any more.
Its clock is the test's (`test_clock`, tests/support/pg_leases.py), so expiry happens
only when the test moves it. MODE:

* ``work``: embed each item's text with one request to the embedding server at
  EMBED_URL (a real HTTP round trip, slowed by the server), then complete;
* ``store``: the same, and write the item's chunk into the base's PgBaseStore first,
  guarded by the lease (the benchmark's indexer);
* ``hang``: claim once, say so, and never finish (the test SIGKILLs it mid-item);
* ``stall``: claim once, say so, wait for a line on stdin (the test lets its leases
  expire and another worker take the items over meanwhile), then try to complete.

It prints ``ready`` once connected, then ``working <ids>``, ``done <ids>`` and ``lost <ids>`` lines; a completion
refused because the lease was lost is recorded in the ``lost`` table.
"""

from __future__ import annotations

import http.client
import json
import sys
import time
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import psycopg

from ktui.core.store.postgres.leases import LeaseOwner, Leases
from tests.support.pg_leases import TableClock, complete, complete_items, connect

TTL = 30.0
DIMS = 16


class Embedder:
    """One keep-alive HTTP connection to the embedding server."""

    def __init__(self, url: str):
        parts = urlsplit(url)
        self._con = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=60)

    def embed(self, texts: list[str]) -> np.ndarray:
        body = json.dumps({"model": "deterministic", "input": texts, "dimensions": DIMS})
        self._con.request("POST", "/v1/embeddings", body=body, headers={"Content-Type": "application/json"})
        response = self._con.getresponse()
        data = json.loads(response.read())
        assert response.status == 200, data
        return np.array([d["embedding"] for d in data["data"]], dtype=np.float32)


def main(argv: list[str]) -> int:
    url, schema, name, mode, limit = argv[0], argv[1], argv[2], argv[3], int(argv[4])
    con = connect(url, schema)
    leases = Leases(LeaseOwner(name), ttl=TTL, clock=TableClock(connect(url, schema)))
    embedder = Embedder(argv[5]) if len(argv) > 5 else None
    store: Any = None
    if mode == "store":
        from ktui.core.models import Chunk
        from ktui.core.store.postgres import PgStoreManager

        store = PgStoreManager(url, schema=schema, pool_size=1).get("bench", DIMS)

    def record(table: str, ids: list[str], c: psycopg.Connection[Any] = con) -> None:
        c.execute(f"INSERT INTO {table} (item_id, worker) SELECT unnest(%s::text[]), %s", (ids, name))

    def finish(c: psycopg.Connection[Any], held: list[str]) -> int:
        return complete_items(c, held, name)

    print("ready", flush=True)
    while True:
        leases.renew(con)
        ids = leases.sweep(con, limit)
        if not ids:
            # `idle` items are work not yet released to the queue (the benchmark's start line)
            (left,) = con.execute(
                "SELECT count(*) FROM knowledge_item WHERE status IN ('processing', 'idle')"
            ).fetchone() or (0,)
            if left == 0 or mode in ("hang", "stall"):
                break
            time.sleep(0.005)  # idle: another worker holds what is left
            continue
        record("work_log", ids)
        print("working", *ids, flush=True)
        if mode == "hang":
            time.sleep(3600)  # killed here, holding its leases
        if mode == "stall":
            sys.stdin.readline()  # stalled until the test says so: its leases expired meanwhile
        if embedder is not None:
            vectors = embedder.embed([f"text of {i}" for i in ids])
            if store is not None:  # not yet guarded by the lease (docs/postgres.md): the completion decides
                store.replace_items([(i, [Chunk(f"text of {i}", {})], vectors[k : k + 1]) for k, i in enumerate(ids)])
        done = complete(leases, con, ids, finish)
        if done.held:
            print("done", *done.held, flush=True)
        if done.lost:
            record("lost", done.lost)
            print("lost", *done.lost, flush=True)
        if mode == "stall":
            break
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
