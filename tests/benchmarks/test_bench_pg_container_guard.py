"""What the container lease guard costs a folder's writes on PostgreSQL (issue 20).

Run: .venv/bin/python -m pytest tests/benchmarks/test_bench_pg_container_guard.py -m benchmark -s -p no:xdist
(KTUI_BENCH_GUARD_ROUNDS, default 3).

A folder's prepare writes its children in one transaction and, on a refresh, sets the
changed ones back to `processing` in one call; on a shared catalogue each such write now
first locks the container (and the rows it touches) and checks this process's lease of
it (``PgWorkClaims.holding_container``, core/runtime/preparing.py). Measured through
the data layer as the runtime makes the writes, at two folder sizes, unguarded (the
baseline: what the write cost before) and guarded, interleaved round by round in fresh
schemas (the machine's load drifts). Target: the guard adds a constant (two statements
per write), so guarded / unguarded stays near 1.0 and does not grow with the folder.
Timing is printed, never asserted.
"""

from __future__ import annotations

import os
import statistics
import time

import pytest

from ktui.core.data.base_writes import BaseWrites
from ktui.core.data.item_service import ChildSpec
from ktui.core.data.item_writes import ItemWrites
from ktui.core.data.validation import ValidItem
from ktui.core.models import DirectoryItemData, FileItemData, ItemStatus, ItemType
from ktui.core.store.postgres.catalogue import PgDatabase
from ktui.core.store.postgres.leases import LeaseOwner, Leases
from ktui.core.store.postgres.work_claims import PgWorkClaims
from tests.support.services import FAKE_MODEL

pytestmark = [pytest.mark.benchmark, pytest.mark.timeout(0)]

ROUNDS = int(os.environ.get("KTUI_BENCH_GUARD_ROUNDS", "3"))
SIZES = (1_000, 20_000)


async def run(url: str, schema: str, children: int, guarded: bool) -> tuple[float, float]:
    """Seconds for one folder's children insert and for setting them all `processing`."""
    db = await PgDatabase.open(url, schema=schema)
    claims = PgWorkClaims(url, schema, leases=Leases(LeaseOwner("bench")))
    try:
        base = await BaseWrites(db).create(name="bench", embedding_model_id=FAKE_MODEL, dimensions=8)
        items = ItemWrites(db)
        [root] = await items.create_roots(base.id, [ValidItem(ItemType.DIRECTORY, DirectoryItemData("/d", "/d"))])
        guard = None
        if guarded:
            assert await claims.claim([root.id], any_status=True) == [root.id]
            guard = claims.holding_container(root.id)
        specs = [ChildSpec(ItemType.FILE, FileItemData(path=f"/d/f{k}.md", source=f"/d/f{k}.md")) for k in range(children)]
        t0 = time.perf_counter()
        created = await items.create_children(base.id, root.id, specs, guard=guard)
        t1 = time.perf_counter()
        await items.set_status_many([c.id for c in created], ItemStatus.PROCESSING, guard=guard)
        t2 = time.perf_counter()
        assert len(created) == children
        return t1 - t0, t2 - t1
    finally:
        await claims.close()
        await db.close()


async def test_bench_container_guard_cost(postgres_server):
    results: dict[tuple[int, bool], list[tuple[float, float]]] = {}
    for _ in range(ROUNDS):
        for size in SIZES:
            for guarded in (False, True):
                with postgres_server.schema() as schema:
                    results.setdefault((size, guarded), []).append(await run(postgres_server.url, schema, size, guarded))
    print(f"\nContainer lease guard cost, {ROUNDS} interleaved rounds (median seconds; target: guarded / unguarded ~1.0 at every size)")
    for size in SIZES:
        for i, what in enumerate(("children created (one transaction)", "children set processing (one call)")):
            plain = statistics.median(r[i] for r in results[(size, False)])
            held = statistics.median(r[i] for r in results[(size, True)])
            print(f"  {size:>6,} {what:<38} unguarded {plain:.3f}  guarded {held:.3f}  ratio {held / plain:.2f}")
