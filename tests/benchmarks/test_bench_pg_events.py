"""Events across processes on PostgreSQL (issue 20): what the NOTIFY triggers cost the
state writer's hot path, and how long a write takes to reach another process's listener.

Run: .venv/bin/python -m pytest tests/benchmarks/test_bench_pg_events.py -m benchmark -s

* Hot path: the writes indexing makes per file of a folder (`reading`, `embedding`,
  completed + the folder reconciled), `KTUI_BENCH_EV_FILES` files (default 300), on the
  real catalogue with its notify triggers and on the same schema with them dropped,
  three runs of each, interleaved; a listener is LISTENing in every run.
* Latency: a status write committed, until the Listener (its own connection and thread,
  as in another process) has handed the notification on; same process, so one clock.

Timing is printed, never asserted.
"""

from __future__ import annotations

import os
import statistics
import time

import psycopg
import pytest
from psycopg import sql

from ktui.core.data.base_writes import BaseWrites
from ktui.core.data.item_service import ChildSpec
from ktui.core.data.item_writes import ItemWrites
from ktui.core.data.validation import ValidItem
from ktui.core.models import DirectoryItemData, FileItemData, ItemPhase, ItemStatus, ItemType
from ktui.core.store.postgres.catalogue import PgDatabase
from ktui.core.store.postgres.notify import Listener, new_origin, with_origin

pytestmark = pytest.mark.benchmark

FILES = int(os.environ.get("KTUI_BENCH_EV_FILES", "300"))


async def folder(db, name: str = "B"):
    base = await BaseWrites(db).create(name=name, embedding_model_id="builtin::wordllama", dimensions=8)
    items = ItemWrites(db)
    (root,) = await items.create_roots(base.id, [ValidItem(ItemType.DIRECTORY, DirectoryItemData("/d", "/d"))])
    kids = await items.create_children(
        base.id, root.id, [ChildSpec(ItemType.FILE, FileItemData(f"/d/{n}", f"/d/{n}")) for n in range(FILES)])
    await items.set_status(root.id, ItemStatus.PROCESSING)
    return items, kids


async def hot_path(db) -> list[float]:
    items, kids = await folder(db)
    times: list[float] = []
    for kid in kids:
        t = time.perf_counter()
        await items.set_status(kid.id, ItemStatus.PROCESSING, ItemPhase.READING)
        await items.set_status(kid.id, ItemStatus.PROCESSING, ItemPhase.EMBEDDING)
        await items.complete_many([(kid.id, None)])
        times.append(time.perf_counter() - t)
    return times


def ms(times: list[float]) -> str:
    v = sorted(t * 1000 for t in times)
    return f"mean {statistics.mean(v):6.2f}  p50 {v[len(v) // 2]:6.2f}  p95 {v[int(len(v) * 0.95)]:6.2f} ms"


@pytest.mark.parametrize("gather", [0.002, 0.05])
async def test_bench_notify_triggers_and_event_latency(postgres_server, monkeypatch, gather):
    from ktui.core.store.postgres import notify

    monkeypatch.setattr(notify, "BATCH_WAIT", gather)  # how long the listener gathers after a first notification
    lines = [f"listener gathers {gather * 1000:g} ms after a first notification"]
    for triggers in (True, False, True, False, True, False):  # interleaved: the machine's load drifts
        with postgres_server.schema() as schema:
            heard: list[float] = []
            listener = Listener(postgres_server.url, schema, origin=None,
                                deliver=lambda batch, heard=heard: heard.extend([time.perf_counter()] * len(batch)),
                                on_resync=lambda: None)
            listener.start()
            db = await PgDatabase.open(with_origin(postgres_server.url, new_origin()), schema=schema)
            try:
                if not triggers:
                    with psycopg.connect(postgres_server.url, autocommit=True) as con:
                        for table, trigger in (("knowledge_item", "knowledge_item_notify"),
                                               ("knowledge_item", "knowledge_item_notify_update"),
                                               ("knowledge_base", "knowledge_base_notify")):
                            con.execute(sql.SQL("DROP TRIGGER {} ON {}.{}").format(
                                sql.Identifier(trigger), sql.Identifier(schema), sql.Identifier(table)))
                times = await hot_path(db)
                lines.append(f"3 writes per file, {FILES} files, notify triggers {'on ' if triggers else 'off'}: {ms(times)}")
                if triggers and not any("handed it on" in line for line in lines):
                    items, kids = await folder(db, "Latency")
                    latencies = []
                    for kid in kids[:100]:
                        before = len(heard)
                        await items.set_status(kid.id, ItemStatus.PROCESSING, ItemPhase.READING)
                        committed = time.perf_counter()
                        deadline = committed + 10
                        while len(heard) == before and time.perf_counter() < deadline:
                            time.sleep(0.0002)
                        latencies.append(heard[-1] - committed)
                    lines.append(f"write committed -> another connection's listener handed it on: {ms(latencies)}")
            finally:
                await db.close()
                listener.close()
    print("\n" + "\n".join(lines))
