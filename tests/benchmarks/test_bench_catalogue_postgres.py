"""The state writer's hot path on the PostgreSQL catalogue next to SQLite (issue 20).

Run: .venv/bin/python -m pytest tests/benchmarks/test_bench_catalogue_postgres.py -m benchmark -s

What indexing writes per file of a folder: `reading`, `embedding`, then completed with
the folder reconciled (`set_status` twice, `complete_many` once; each one
`run_in_transaction` of several statements). Measured on SQLite, on PostgreSQL over
its Unix socket, and through a TCP proxy on 127.0.0.1 that delays every packet by
`KTUI_BENCH_CAT_DELAY_MS` (default 0.25 ms each way: a LAN's round trip), each with
`run_in_transaction` pipelined and not (`PgDatabase.pipelined`). Timing is printed,
never asserted; the proxy's own thread hand-offs add a little to its figures.
"""

from __future__ import annotations

import os
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from queue import SimpleQueue

import pytest
from psycopg.conninfo import conninfo_to_dict

from ktui.core.data.base_writes import BaseWrites
from ktui.core.data.item_service import ChildSpec
from ktui.core.data.item_writes import ItemWrites
from ktui.core.data.validation import ValidItem
from ktui.core.db import Database
from ktui.core.models import DirectoryItemData, FileItemData, ItemPhase, ItemStatus, ItemType
from ktui.core.store.postgres.catalogue import PgDatabase

pytestmark = pytest.mark.benchmark

FILES = int(os.environ.get("KTUI_BENCH_CAT_FILES", "200"))
DELAY = float(os.environ.get("KTUI_BENCH_CAT_DELAY_MS", "0.25")) / 1000


class LatencyProxy:
    """127.0.0.1:port → the server's Unix socket, each packet held `delay` seconds."""

    def __init__(self, unix_path: str, delay: float):
        self.unix_path, self.delay = unix_path, delay
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            server = socket.socket(socket.AF_UNIX)
            server.connect(self.unix_path)
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        """Read packets as they come and hand each on `delay` after it arrived (a second
        thread sends): a propagation delay, so a burst costs one delay, not one apiece."""
        queue: SimpleQueue[tuple[float, bytes] | None] = SimpleQueue()

        def send() -> None:
            try:
                while (entry := queue.get()) is not None:
                    due, data = entry
                    if (wait := due - time.perf_counter()) > 0:
                        time.sleep(wait)
                    dst.sendall(data)
            except OSError:
                pass

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        try:
            while data := src.recv(1 << 16):
                queue.put((time.perf_counter() + self.delay, data))
        except OSError:
            pass
        finally:
            queue.put(None)
            sender.join()
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._closed = True
        self._listener.close()


@contextmanager
def proxied(url: str, delay: float) -> Iterator[tuple[str, LatencyProxy]]:
    params = conninfo_to_dict(url)
    path = f"{params['host']}/.s.PGSQL.{params.get('port') or 5432}"
    proxy = LatencyProxy(path, delay)
    try:
        yield (f"host=127.0.0.1 port={proxy.port} user={params.get('user') or 'postgres'} "
               f"dbname={params.get('dbname') or 'postgres'} sslmode=disable"), proxy
    finally:
        proxy.close()


async def index_a_folder(db) -> list[float]:
    """Per-call seconds of the writes indexing makes for FILES files of one folder."""
    base = await BaseWrites(db).create(name="B", embedding_model_id="builtin::wordllama", dimensions=8)
    items = ItemWrites(db)
    (root,) = await items.create_roots(base.id, [ValidItem(ItemType.DIRECTORY, DirectoryItemData("/d", "/d"))])
    kids = await items.create_children(
        base.id, root.id, [ChildSpec(ItemType.FILE, FileItemData(f"/d/{n}", f"/d/{n}")) for n in range(FILES)]
    )
    await items.set_status(root.id, ItemStatus.PROCESSING)
    times: list[float] = []
    for kid in kids:
        for call in (
            items.set_status(kid.id, ItemStatus.PROCESSING, ItemPhase.READING),
            items.set_status(kid.id, ItemStatus.PROCESSING, ItemPhase.EMBEDDING),
            items.complete_many([(kid.id, None)]),
        ):
            t = time.perf_counter()
            await call  # a coroutine runs only when awaited: timed from here
            times.append(time.perf_counter() - t)
    assert (await items.get(root.id)).status == ItemStatus.COMPLETED
    return times


def _line(name: str, times: list[float]) -> str:
    ms = sorted(t * 1000 for t in times)
    return f"{name:<62} {statistics.mean(ms):7.3f} {ms[len(ms) // 2]:7.3f} {ms[int(len(ms) * 0.95)]:7.3f}"


async def test_bench_state_writes_sqlite_and_postgres(postgres_server, tmp_path: Path) -> None:
    lines = [f"{'per call (ms), ' + str(FILES) + ' files x 3 writes':<62} {'mean':>7} {'p50':>7} {'p95':>7}"]
    db = await Database.open(tmp_path / "data")
    try:
        lines.append(_line("SQLite", await index_a_folder(db)))
    finally:
        await db.close()
    for where, delay in (("Unix socket", None), (f"TCP, +{DELAY * 1000:g} ms each way", DELAY)):
        for pipelined in (False, True):
            with postgres_server.schema() as schema:
                if delay is None:
                    pg = await PgDatabase.open(postgres_server.url, schema=schema)
                    ctx = None
                else:
                    ctx = proxied(postgres_server.url, delay)
                    url, _ = ctx.__enter__()
                    pg = await PgDatabase.open(url, schema=schema)
                pg.pipelined = pipelined
                try:
                    times = await index_a_folder(pg)
                finally:
                    await pg.close()
                    if ctx is not None:
                        ctx.__exit__(None, None, None)
            mode = "pipelined" if pipelined else "a round trip per statement"
            lines.append(_line(f"PostgreSQL, {where}, {mode}", times))
    print("\n" + "\n".join(lines))
