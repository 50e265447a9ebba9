"""What the catalogue's NOTIFY triggers cost bulk writes on PostgreSQL (issue 20).

Run: .venv/bin/python -m pytest tests/benchmarks/test_bench_pg_notify_cost.py -m benchmark -s -p no:xdist
(KTUI_BENCH_NOTIFY_CHILDREN children, default 20,000; KTUI_BENCH_NOTIFY_ROUNDS, default 3).

The same writes on three versions of one fresh catalogue each, interleaved round by
round (the machine's load drifts): with the row triggers the catalogue ships (`row`,
notify.NOTIFY_MIGRATION), with the item triggers dropped (`none`: the baseline), and
with statement-level triggers with transition tables instead (`statement`, below). The
writes, through the data layer as the runtime makes them:

* a folder's children created in one transaction (`create_children`, one multi-row INSERT);
* every child's status written in one call (`set_status_many`: one UPDATE of all rows);
* 500 completions in group commits of 5 (`complete_many`, the indexing hot path's shape).

A listener LISTENs in every run and the number of notifications it hears is printed:
both trigger kinds must send the same number. Timing is printed, never asserted.
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
from ktui.core.store.postgres.notify import (
    _CHANNEL_SQL,
    NOTIFY_MIGRATION,
    ORIGIN_SETTING,
    Listener,
    new_origin,
    with_origin,
)

pytestmark = [pytest.mark.benchmark, pytest.mark.timeout(0)]

CHILDREN = int(os.environ.get("KTUI_BENCH_NOTIFY_CHILDREN", "20000"))
ROUNDS = int(os.environ.get("KTUI_BENCH_NOTIFY_ROUNDS", "3"))
GROUP, GROUPS = 5, 100

# The alternative measured: statement-level item triggers with transition tables. The same
# notifications (one per row, same payload, the statement's row order), but the function
# runs once per statement instead of once per row. Not shipped: see docs/postgres.md.
STATEMENT_TRIGGERS = f"""
CREATE OR REPLACE FUNCTION ktui_notify_items() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    channel text := {_CHANNEL_SQL};
    origin text := current_setting('{ORIGIN_SETTING}', true);
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM pg_notify(channel, json_build_object('o', origin, 'k', 'ia', 'b', n.base_id, 'i', n.id,
                                                     'g', n.group_id)::text) FROM ktui_new AS n;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM pg_notify(channel, json_build_object('o', origin, 'k', 'ir', 'b', o.base_id, 'i', o.id,
                                                     'g', o.group_id)::text) FROM ktui_old AS o;
    ELSE
        PERFORM pg_notify(channel, json_build_object('o', origin, 'k', 'ic', 'b', n.base_id, 'i', n.id,
                                                     'g', n.group_id)::text)
        FROM ktui_new AS n JOIN ktui_old AS o ON o.id = n.id
        WHERE o.status IS DISTINCT FROM n.status OR o.phase IS DISTINCT FROM n.phase
              OR o.error IS DISTINCT FROM n.error OR o.data IS DISTINCT FROM n.data;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER knowledge_item_notify_insert AFTER INSERT ON knowledge_item
    REFERENCING NEW TABLE AS ktui_new FOR EACH STATEMENT EXECUTE FUNCTION ktui_notify_items();
CREATE TRIGGER knowledge_item_notify_update AFTER UPDATE ON knowledge_item
    REFERENCING OLD TABLE AS ktui_old NEW TABLE AS ktui_new FOR EACH STATEMENT EXECUTE FUNCTION ktui_notify_items();
CREATE TRIGGER knowledge_item_notify_delete AFTER DELETE ON knowledge_item
    REFERENCING OLD TABLE AS ktui_old FOR EACH STATEMENT EXECUTE FUNCTION ktui_notify_items();
"""


def item_triggers(con: psycopg.Connection, schema: str) -> list[str]:
    return [r[0] for r in con.execute(
        "SELECT tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = 'knowledge_item' AND tgname LIKE 'knowledge_item_notify%%'", (schema,))]


def switch(url: str, schema: str, variant: str) -> None:
    """Make the fresh catalogue's item triggers those of `variant` (row, statement or none).
    Every variant drops and creates them, the shipped one too, so that each run pays for the
    same DDL after the catalogue was opened (a run without it was 2-3x faster at the inserts)."""
    with psycopg.connect(url, autocommit=True) as con, con.transaction():
        con.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
        for name in item_triggers(con, schema):
            con.execute(sql.SQL("DROP TRIGGER {} ON knowledge_item").format(sql.Identifier(name)))
        if variant == "row":  # the item triggers of NOTIFY_MIGRATION, as shipped
            con.execute(NOTIFY_MIGRATION[NOTIFY_MIGRATION.index("CREATE TRIGGER knowledge_item_notify "):
                                         NOTIFY_MIGRATION.index("CREATE TRIGGER knowledge_base_notify")].encode())
        elif variant == "statement":
            con.execute(STATEMENT_TRIGGERS.encode())


async def run(url: str, schema: str, variant: str) -> tuple[float, float, float, int]:
    heard: list[int] = []
    listener = Listener(url, schema, origin=None, deliver=lambda batch: heard.append(len(batch)), on_resync=lambda: None)
    listener.start()
    db = await PgDatabase.open(with_origin(url, new_origin()), schema=schema)
    try:
        switch(url, schema, variant)
        base = await BaseWrites(db).create(name="B", embedding_model_id="builtin::wordllama", dimensions=8)
        items = ItemWrites(db)
        (root,) = await items.create_roots(base.id, [ValidItem(ItemType.DIRECTORY, DirectoryItemData("/d", "/d"))])
        specs = [ChildSpec(ItemType.FILE, FileItemData(f"/d/{n}.md", f"/d/{n}.md")) for n in range(CHILDREN)]
        t = time.perf_counter()
        kids = await items.create_children(base.id, root.id, specs)
        insert = time.perf_counter() - t
        t = time.perf_counter()
        await items.set_status_many([k.id for k in kids], ItemStatus.PROCESSING, ItemPhase.READING)
        update = time.perf_counter() - t
        t = time.perf_counter()
        for g in range(GROUPS):
            await items.complete_many([(k.id, None) for k in kids[g * GROUP:(g + 1) * GROUP]])
        groups = time.perf_counter() - t
        expected = 2 + 1 + CHILDREN * 2 + GROUPS * GROUP  # bc, the root's ia, children ia + ic, completions
        deadline = time.monotonic() + 60
        while variant != "none" and sum(heard) < expected and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        return insert, update, groups, sum(heard)
    finally:
        await db.close()
        listener.close()


async def test_bench_notify_trigger_cost(postgres_server):
    variants = ("row", "none", "statement")
    results: dict[str, list[tuple[float, float, float, int]]] = {v: [] for v in variants}
    for r in range(ROUNDS):
        for variant in variants[r % 3:] + variants[: r % 3]:  # each variant first, second and third in turn
            with postgres_server.schema() as schema:
                results[variant].append(await run(postgres_server.url, schema, variant))
    print(f"\nNOTIFY trigger cost, {CHILDREN:,} children, {ROUNDS} interleaved rounds (median, all runs in brackets)")

    def fmt(values: list[float]) -> str:
        return f"{statistics.median(values):7.2f} s [{', '.join(f'{v:.2f}' for v in values)}]"

    for what, i in (("create_children, one statement", 0), ("set_status_many, one UPDATE", 1),
                    (f"complete_many x {GROUPS}, {GROUP} each", 2)):
        print(f"  {what}:")
        base = statistics.median(r[i] for r in results["none"])
        for variant in variants:
            med = statistics.median(r[i] for r in results[variant])
            print(f"    {variant + (' (shipped)' if variant == 'row' else ''):<18} {fmt([r[i] for r in results[variant]])}"
                  f"   {med / base:4.2f}x no triggers")
    for variant in variants:
        print(f"  notifications heard, {variant}: {sorted({r[3] for r in results[variant]})}")
