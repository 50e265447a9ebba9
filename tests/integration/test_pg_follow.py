"""`--wait` on a shared store follows its items to the end, whoever indexes them.

Two "machines" on one PostgreSQL schema (real pgserver, a real embedding server): A adds
a note and waits for it the way `ktui add --wait` does (`follow`); B takes the note over
(a reindex in B seizes it) and its completion is held by a gate. A's own queue is idle at
once, yet A's wait must go on until B's completion arrives as an event; before the fix it
ended there and called the note unfinished (exit 1 while the other process was still at it).
"""

from __future__ import annotations

import asyncio
import io

import pytest

pytest.importorskip("psycopg")

from ktui.core.models import ItemInput, ItemStatus  # noqa: E402
from ktui.tui.cli_progress import PLAIN_SECONDS, Progress, follow  # noqa: E402
from tests.support.embedding_server import embedding_server_fixture  # noqa: E402
from tests.support.pg_runtimes import shared_service, until  # noqa: E402
from tests.support.services import FAKE_MODEL  # noqa: E402

server = embedding_server_fixture(64)


class TickingClock:
    """Each reading is one summary interval later: every pass of `follow` draws a line,
    so the test can count the passes it made (no wall-clock time involved)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += PLAIN_SECONDS
        return self.now


async def test_a_wait_goes_on_while_another_process_finishes_a_followed_item(postgres_server, pg_schema, tmp_path,
                                                                             server):  # noqa: F811
    url = postgres_server.url
    async with shared_service(url, pg_schema, tmp_path / "a", server.url) as a, \
            shared_service(url, pg_schema, tmp_path / "b", server.url, recover=False) as b:
        base = await a.create_base("Shared", FAKE_MODEL, None)
        [note] = await a.add_items(base.id, [ItemInput("note", {"content": "otters hold hands"})])
        assert await a.wait_idle(timeout=120)

        in_b, go = asyncio.Event(), asyncio.Event()
        commit = b._runtime.indexer._commit_chunks

        async def held(base_, batch):
            in_b.set()
            await go.wait()
            return await commit(base_, batch)

        b._runtime.indexer._commit_chunks = held
        sub = a.subscribe()
        [again] = await b.reindex_items(base.id, [note.id])  # B seizes the note and indexes it itself
        await in_b.wait()
        progress = Progress(io.StringIO(), tty=False, clock=TickingClock())
        following = asyncio.ensure_future(follow(a, sub, [again], progress))
        try:
            await until(lambda: progress.draws >= 5 or following.done(), "A's follow making a few passes")
            assert not following.done(), "the wait ended while B still held the note"
        finally:
            go.set()
        outcome = await asyncio.wait_for(following, 120)
        sub.close()
        assert outcome.ok and (outcome.total, outcome.completed) == (1, 1)
        assert (await a.get_item(note.id)).status == ItemStatus.COMPLETED
