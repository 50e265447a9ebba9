"""The process the crash-safety test SIGKILLs: open, recover, verify, start new work.

Run as ``python -m tests.faults.support.crash_child DATA_DIR SERVER_URL CORPUS SEED [delete]``.
It talks to the parent in single lines on stdout (flushed at once):

    OPEN                 the service is open (recovery has re-queued interrupted work)
    CHECK {json}         after wait_idle: counts of items by status + check_invariants()
    DELETING             a delete of 15 file items starts now (they are added again after)
    BUSY <kind>          new work was queued (first add, or a forced reindex)
    V                    an item finished embedding and is about to write its vectors
    DONE                 the new work finished; the process exits 0 right after

Why a separate process: only a real SIGKILL of a real process shows what a power
cut leaves on disk (half-written WAL frames, a stale matrix header, items left
`processing`); an in-process cancel always runs `finally:` blocks.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
from pathlib import Path

from ktui.core.models import ANY_GROUP, ItemChanged, ItemInput, ItemPhase
from ktui.core.service import KnowledgeService
from tests.support.services import fake_settings

BASE_NAME = "crash"
DIRECTORY_FILES = 250  # files under CORPUS/tree/ (one directory item); the rest are file items


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def all_items(ks: KnowledgeService, base_id: str, group_id: object = ANY_GROUP) -> list:
    """Every item (ANY_GROUP) or every root (None), page by page."""
    out, page = [], 1
    while True:
        got = await ks.list_items(base_id, group_id=group_id, page=page, limit=100)
        out.extend(got.items)
        if len(out) >= got.total or not got.items:
            return out
        page += 1


async def summary(ks: KnowledgeService, base_id: str) -> dict:
    items = await all_items(ks, base_id)
    counts: dict[str, int] = {}
    for item in items:
        counts[item.status.value] = counts.get(item.status.value, 0) + 1
    errors = sorted({i.error for i in items if i.error})[:5]
    leaves = [i for i in items if i.type.value == "file"]
    return {"counts": counts, "leaves": len(leaves), "errors": errors,
            "problems": await ks.check_invariants()}


async def watch_writes(ks: KnowledgeService) -> None:
    """Print V when an item's last embedding batch is done: its vector write comes next."""
    async for event in ks.subscribe():
        if isinstance(event, ItemChanged) and event.phase == ItemPhase.EMBEDDING and event.progress == 1.0:
            say("V")


async def main(data_dir: Path, url: str, corpus: Path, seed: int, delete_first: bool = False) -> None:
    rng = random.Random(seed)
    ks = await KnowledgeService.open(settings=fake_settings(data_dir, url, timeout=30.0))
    try:
        say("OPEN")
        watcher = asyncio.get_running_loop().create_task(watch_writes(ks))
        bases = (await ks.list_bases(limit=100)).items
        base = next((b for b in bases if b.name == BASE_NAME), None)
        if base is None:
            base = await ks.create_base(BASE_NAME, chunk_size=256, chunk_overlap=32)
        roots = await all_items(ks, base.id, None)
        wanted = [ItemInput("directory", {"path": str(corpus / "tree")})]
        wanted += [ItemInput("file", {"path": str(p)}) for p in sorted((corpus / "flat").glob("*.md"))]
        have = {r.source for r in roots}
        missing = [i for i in wanted if i.data["path"] not in have]
        if missing:
            # the first run (or one killed while adding): add what is not there yet, as a
            # user re-running the same `ktui add` would
            for start in range(0, len(missing), 100):
                await ks.add_items(base.id, missing[start:start + 100])
            say(f"BUSY add {len(missing)}")
        else:
            await ks.wait_idle(base.id)
            say("CHECK " + json.dumps(await summary(ks, base.id)))
            if delete_first:
                # delete a few file items and add them again: the delete path under kills
                # (DELETING comes right before the first store write of the delete)
                files = [r for r in roots if r.type.value == "file"]
                again = rng.sample(files, min(len(files), 15))
                say("DELETING")
                await ks.delete_items(base.id, [r.id for r in again])
                await ks.add_items(base.id, [ItemInput("file", {"path": r.source}) for r in again])
                roots = await all_items(ks, base.id, None)
            # a forced reindex of a random share of the roots: every chosen leaf deletes
            # and rewrites its vectors (the folder is rebuilt with new child rows)
            chosen = [r.id for r in roots if rng.random() < 0.6] or [roots[0].id]
            for start in range(0, len(chosen), 100):
                await ks.reindex_items(base.id, chosen[start:start + 100], force=True)
            say(f"BUSY reindex {len(chosen)}")
        await ks.wait_idle(base.id)
        watcher.cancel()
        say("DONE")
    finally:
        await ks.close()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]), sys.argv[5:] == ["delete"]))
