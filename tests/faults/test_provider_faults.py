"""Provider faults: the embedding server times out, answers 500 / 429, returns vectors of
the wrong width, or disappears in the middle of a batch and comes back.

For each fault: the affected items end `failed` with a message that names the fault,
nothing stays `processing`, invariants hold, searches answer from keywords
(`degraded=True`) instead of failing, and after recovery `reindex_items` completes
everything. Real HTTP on 127.0.0.1 throughout (tests/support/embedding_server.py). Every
case runs on both backends (SQLite, and a shared PostgreSQL store: tests/support/facades.py).
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

from ktui.core.config import EmbeddingSettings
from ktui.core.models import ANY_GROUP, ItemChanged, ItemInput, ItemPhase, ItemStatus
from tests.faults.support.servers import start_on_port
from tests.support.embedding_server import start_embedding_server
from tests.support.facades import BACKENDS, backend_overrides
from tests.support.services import open_service

pytestmark = pytest.mark.faults

DIMS = 32
_unique = itertools.count()


@pytest.fixture(autouse=True)
def _short_backoff(monkeypatch):
    monkeypatch.setenv("KTUI_RETRY_BASE_DELAY", "0.01")


def notes(tag: str, n: int, paragraphs: int = 1) -> list[ItemInput]:
    """Notes whose text was never embedded before (the embedding cache would hide a fault)."""
    out = []
    for i in range(n):
        body = "\n\n".join(
            f"Paragraph {p} of {tag} note {i} uniq{next(_unique)}z: kites need steady wind and a long string."
            for p in range(paragraphs)
        )
        out.append(ItemInput("note", {"content": f"# {tag} {i}\n\n{body}"}))
    return out


async def statuses(ks, base_id) -> list:
    return (await ks.list_items(base_id, group_id=ANY_GROUP, limit=100)).items


async def assert_settled(ks, base_id, *, failed_ids=(), message=()) -> None:
    """Idle, nothing processing, invariants hold; `failed_ids` failed with a message naming the fault."""
    assert await ks.wait_idle(base_id, timeout=30), "the queue did not drain"
    assert await ks.check_invariants() == []
    items = {i.id: i for i in await statuses(ks, base_id)}
    assert not [i for i in items.values() if i.status == ItemStatus.PROCESSING]
    for item_id in failed_ids:
        item = items[item_id]
        assert item.status == ItemStatus.FAILED, (item.status, item.error)
        assert any(m in item.error for m in message), item.error
        assert await ks.list_item_chunks(base_id, item_id) == []  # nothing half-written


async def assert_degraded_search(ks, base_id) -> None:
    for mode in ("default", "hybrid"):
        query = f"steady wind healthy {mode} q{next(_unique)}"  # never cached
        response = await asyncio.wait_for(ks.search(base_id, query, mode=mode), 30)
        assert response.degraded, mode
        assert response.results, "keyword results expected from the healthy notes"
        assert response.reason


async def assert_recovers(ks, base_id, failed_ids) -> None:
    await ks.reindex_items(base_id, list(failed_ids))
    assert await ks.wait_idle(base_id, timeout=30)
    assert await ks.check_invariants() == []
    items = await statuses(ks, base_id)
    assert {i.status for i in items} == {ItemStatus.COMPLETED}, [(i.status, i.error) for i in items]
    response = await ks.search(base_id, f"steady wind recovered q{next(_unique)}")
    assert not response.degraded and response.results


FAULTS = {
    # name: (inject(server), provider settings, words the item error must contain)
    "timeout": (lambda s: s.faults.delay(1.0), {"timeout": 0.3}, ("timed out",)),
    "http-500": (lambda s: s.faults.fail(500, times=10_000), {}, ("HTTP 500",)),
    "http-429": (lambda s: s.faults.fail(429, times=10_000), {}, ("HTTP 429",)),
    "wrong-width": (lambda s: s.faults.wrong_width(times=10_000), {}, ("wrong width",)),
    "dropped-connection": (lambda s: s.faults.drop_connection(times=10_000), {}, ("connection dropped",)),
    "empty-vectors": (lambda s: s.faults.empty_vectors(times=10_000), {}, ("empty vector",)),
    "wrong-count": (lambda s: s.faults.wrong_shape(times=10_000), {}, ("wrong shape",)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fault", list(FAULTS))
async def test_provider_fault_fails_items_degrades_search_and_reindex_recovers(
        tmp_path: Path, fault: str, backend: str, request) -> None:
    inject, overrides, words = FAULTS[fault]
    server = start_embedding_server(DIMS)
    try:
        async with open_service(tmp_path / "data", server.url, max_retries=1, **overrides,
                                **backend_overrides(backend, request)) as ks:
            base = await ks.create_base("Faults", dimensions=DIMS)
            healthy = await ks.add_items(base.id, notes("healthy", 3))
            await assert_settled(ks, base.id)
            inject(server)
            hit = await ks.add_items(base.id, notes(fault, 6))
            await assert_settled(ks, base.id, failed_ids=[i.id for i in hit], message=words)
            await assert_degraded_search(ks, base.id)
            # the healthy items were not touched by the fault
            for item in healthy:
                assert (await ks.get_item(item.id)).status == ItemStatus.COMPLETED
            server.faults.clear()
            await assert_recovers(ks, base.id, [i.id for i in hit])
    finally:
        server.stop()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_server_disappears_mid_batch_and_comes_back(tmp_path: Path, backend: str, request) -> None:
    server = start_embedding_server(DIMS)
    port = server.port
    settings = {"max_retries": 1, "timeout": 5.0, "embeddings": EmbeddingSettings(batch_size=2),
                **backend_overrides(backend, request)}
    try:
        async with open_service(tmp_path / "data", server.url, **settings) as ks:
            base = await ks.create_base("Vanishing", dimensions=DIMS, chunk_size=32, chunk_overlap=4)
            await ks.add_items(base.id, notes("healthy", 2))
            await assert_settled(ks, base.id)

            server.faults.delay(0.05)  # keep batches in flight
            sub = ks.subscribe()
            hit = await ks.add_items(base.id, notes("vanishing", 5, paragraphs=12))

            async def first_partial_progress() -> None:
                while True:
                    for event in await sub.next_batch(timeout=5):
                        if (isinstance(event, ItemChanged) and event.phase == ItemPhase.EMBEDDING
                                and event.progress is not None and 0 < event.progress < 1):
                            return

            await asyncio.wait_for(first_partial_progress(), 20)  # at least one batch written, more to go
            server.stop()
            assert await ks.wait_idle(base.id, timeout=30)
            # an item whose last batch landed before the stop may have completed; the rest failed
            failed = [i.id for i in hit if (await ks.get_item(i.id)).status != ItemStatus.COMPLETED]
            assert len(failed) >= 3, "the server should have vanished while most items were embedding"
            await assert_settled(ks, base.id, failed_ids=failed, message=("Cannot reach", "connection dropped"))
            await assert_degraded_search(ks, base.id)

            server = start_on_port(port, DIMS)  # the same address comes back
            await assert_recovers(ks, base.id, [i.id for i in hit])
    finally:
        server.stop()
