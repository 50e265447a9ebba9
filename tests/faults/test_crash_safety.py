"""Crash safety: SIGKILL a process that is indexing 500 files, again and again.

A child (tests/faults/support/crash_child.py, started with sys.executable) indexes
500 small Markdown files — 250 in one nested folder item, 250 as file items —
through the OpenAI-compatible embedding server running in its own process, then
keeps force-reindexing random shares of them. The parent kills it with SIGKILL:

* ``random``  at a random moment after the start (open, recovery, adding, indexing);
* ``vectors`` right after the child reports that an item finished embedding (its
  vector write is next, with 5 items in flight there is nearly always a write going);
* ``growth``  the moment a store file (SQLite WAL or the float32 matrix) changes on
  disk, i.e. inside a write transaction or matrix update;
* ``delete``  when the child starts deleting file items (to add them again), at the
  first store-file change: between the vector delete and the row delete.

Every next child opens the same data directory (recovery re-queues what was
`processing`), waits until idle and reports the item counts and
`check_invariants()`; the test asserts every report. At the end the parent reopens
in-process and proves nothing was lost: every file is an item, `completed`, has
its chunk, and its unique marker word is found by search.

KTUI_FAULT_KILLS raises the number of kills for a longer standalone run
(default 12, three per mode, to keep the default suite within minutes on 2 busy
cores; e.g. ``KTUI_FAULT_KILLS=200 pytest -m faults tests/faults/test_crash_safety.py``).
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ktui.core.models import ItemInput, ItemStatus
from tests.faults.support.corpus import marker, write_corpus
from tests.faults.support.crash_child import BASE_NAME, all_items
from tests.support.embedding_server import start_embedding_server
from tests.support.services import open_service

pytestmark = [pytest.mark.faults, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
KILLS = int(os.environ.get("KTUI_FAULT_KILLS", "12"))
FILES = 500
CHILD_TIMEOUT_S = 90.0
MODES = ("random", "vectors", "growth", "delete")


class Child:
    """One crash_child process and a thread that collects its stdout lines."""

    def __init__(self, data_dir: Path, url: str, corpus: Path, seed: int, delete: bool = False):
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.faults.support.crash_child", str(data_dir), url, str(corpus), str(seed),
             *(["delete"] if delete else [])],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr = ""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def next_line(self, deadline: float) -> str | None:
        """The next line, None at EOF; fails the test if the child hangs."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError("the crash child hung (no output before the deadline)")
        try:
            return self.lines.get(timeout=remaining)
        except queue.Empty:
            raise AssertionError("the crash child hung (no output before the deadline)") from None

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)

    def reap(self) -> int:
        rc = self.proc.wait(30)
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()
        return rc


def store_files_state(bases_dir: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for pattern in ("*.sqlite-wal", "*.vectors.f32", "*.sqlite"):
        for p in bases_dir.glob(pattern):
            try:
                st = p.stat()
            except FileNotFoundError:
                continue
            out[p.name] = (st.st_size, st.st_mtime_ns)
    return out


def check_report(report: dict) -> None:
    """A child's post-recovery report: everything completed, nothing processing, invariants hold."""
    assert report["problems"] == [], report
    assert set(report["counts"]) == {"completed"}, report
    assert report["leaves"] == FILES, report


def run_round(child: Child, mode: str, rng: random.Random, bases_dir: Path, reports: list[dict]) -> str | None:
    """Drive one child until it is killed (returns the mode that killed it) or ends by itself (None)."""
    deadline = child.started + CHILD_TIMEOUT_S
    kill_at = child.started + rng.uniform(0.3, 2.5) if mode == "random" else None
    vectors_wanted = rng.randint(1, 60)
    growth_wanted = rng.randint(1, 4)
    busy = False
    seen_vectors = 0
    baseline: dict[str, tuple[int, int]] | None = None
    changes = 0
    deleting = False
    while True:
        if (mode == "growth" and busy) or (mode == "delete" and deleting):
            state = store_files_state(bases_dir)
            if baseline is not None and state != baseline:
                changes += 1
                if changes >= (1 if deleting else growth_wanted):
                    child.kill()
                    return mode
            baseline = state
            try:
                line = child.lines.get_nowait()
            except queue.Empty:
                time.sleep(0.0005)
                if time.monotonic() > deadline:
                    raise AssertionError("the crash child hung") from None
                continue
        elif kill_at is not None:
            try:
                line = child.lines.get(timeout=max(0.0, kill_at - time.monotonic()))
            except queue.Empty:
                child.kill()
                return mode
        else:
            line = child.next_line(deadline)
        if line is None:
            return None
        if line.startswith("CHECK "):
            report = json.loads(line[6:])
            check_report(report)
            reports.append(report)
        elif line.startswith("BUSY"):
            busy = True
        elif line == "DELETING":
            deleting = mode == "delete"
            baseline = store_files_state(bases_dir)
        elif line == "V":
            seen_vectors += 1
            if mode == "vectors" and busy and seen_vectors >= vectors_wanted:
                child.kill()
                return mode
        elif line == "DONE":
            continue


@pytest.mark.timeout(1200)  # each kill is a fresh child indexing 500 files: minutes on a loaded machine
async def test_sigkill_while_indexing_loses_nothing(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    expected = write_corpus(corpus, tree=FILES // 2, flat=FILES - FILES // 2)
    data_dir = tmp_path / "data"
    bases_dir = data_dir / "bases"
    rng = random.Random(int(os.environ.get("KTUI_FAULT_SEED", "20261201")))
    server = start_embedding_server(32, subprocess=True)
    kills = {m: 0 for m in MODES}
    reports: list[dict] = []
    rounds = 0
    try:
        while sum(kills.values()) < KILLS:
            assert rounds < KILLS * 3, f"too few kills landed: {kills} in {rounds} rounds"
            mode = MODES[rounds % len(MODES)]
            child = Child(data_dir, server.url, corpus, seed=rounds, delete=mode == "delete")
            rounds += 1
            try:
                killed = run_round(child, mode, rng, bases_dir, reports)
            except BaseException:
                child.proc.kill()
                raise
            rc = child.reap()
            if killed and rc == 0:  # it had just finished by itself: the SIGKILL found a zombie
                killed = None
            if killed:
                assert rc == -signal.SIGKILL, (rc, child.stderr[-2000:])
                kills[killed] += 1
            else:
                assert rc == 0, child.stderr[-3000:]
                assert "Traceback" not in child.stderr, child.stderr[-3000:]

        # the last kill is verified here: reopen in-process, recover, wait, check everything
        async with open_service(data_dir, server.url) as ks:
            base = next(b for b in (await ks.list_bases(limit=100)).items if b.name == BASE_NAME)
            assert await ks.wait_idle(base.id, timeout=120), "recovery did not finish"
            # a kill in a "delete" round lands between deleting 15 file items and adding them
            # again; a next child adds them back as a user re-running `ktui add` would. When
            # that kill was the last one, do the same here before counting.
            have = {i.source for i in await all_items(ks, base.id) if i.group_id is None}
            gone = [p for p in sorted(expected) if Path(p).parent.name == "flat" and p not in have]
            if gone:
                await ks.add_items(base.id, [ItemInput("file", {"path": p}) for p in gone])
                assert await ks.wait_idle(base.id, timeout=120), "re-adding did not finish"
            problems = await ks.check_invariants()
            assert problems == []
            items = await all_items(ks, base.id)
            stuck = [i for i in items if i.status != ItemStatus.COMPLETED]
            assert stuck == [], [(i.source, i.status, i.error) for i in stuck[:5]]
            leaves = {i.source: i for i in items if i.type.value == "file"}
            # nothing lost and nothing doubled: exactly the corpus, once
            assert sorted(leaves) == sorted(expected)
            assert len([i for i in items if i.type.value == "file"]) == FILES
            lost = []
            for source, item in leaves.items():
                chunks = await ks.list_item_chunks(base.id, item.id)
                hits = (await ks.search(base.id, marker(expected[source]), top_k=3, mode="bm25")).results
                if not chunks or not hits or hits[0].item_id != item.id:
                    lost.append(source)
            assert lost == [], f"{len(lost)} files lost their chunks: {lost[:5]}"
    finally:
        server.stop()

    total = sum(kills.values())
    print(f"\ncrash safety: {total} SIGKILLs survived ({kills}), {rounds} child runs, "
          f"{len(reports)} post-recovery checks + final check, {FILES} files, lost: 0")
    assert total >= KILLS
    assert all(kills[m] > 0 for m in MODES), kills


async def test_recovery_of_a_folder_caught_mid_prepare_with_nested_folders(tmp_path: Path) -> None:
    """The state a SIGKILL during a folder's prepare leaves (found by the kill loop above,
    KTUI_FAULT_KILLS=100): the root `preparing`, a nested folder row already created and
    `processing`. Recovery re-prepares the root, which drops the nested row; reaching
    that row afterwards must not make KnowledgeService.open() fail."""
    import sqlite3

    corpus = tmp_path / "corpus"
    write_corpus(corpus, tree=30, flat=0)
    server = start_embedding_server(32)
    try:
        async with open_service(tmp_path / "data", server.url) as ks:
            base = await ks.create_base("Nested", dimensions=32)
            await ks.add_items(base.id, [ItemInput("directory", {"path": str(corpus / "tree")})])
            assert await ks.wait_idle(timeout=30)
        con = sqlite3.connect(tmp_path / "data" / "knowledge.db")
        with con:
            con.execute("UPDATE knowledge_item SET status='processing', phase='preparing' WHERE group_id IS NULL")
            con.execute("UPDATE knowledge_item SET status='processing', phase=NULL "
                        "WHERE type='directory' AND group_id IS NOT NULL")
            con.execute("UPDATE knowledge_item SET status='processing', phase='embedding' "
                        "WHERE type='file' AND rowid % 2 = 0")
        con.close()
        async with open_service(tmp_path / "data", server.url) as ks:
            assert await ks.wait_idle(timeout=30)
            assert await ks.check_invariants() == []
            items = await all_items(ks, base.id)
            assert {i.status for i in items} == {ItemStatus.COMPLETED}
            assert len([i for i in items if i.type.value == "file"]) == 30
    finally:
        server.stop()
