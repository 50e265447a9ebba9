"""Embedding requests fill across files, whatever `concurrency` is (issue 17): files read
ahead are embedded in groups, and a caller asking for texts already being fetched joins
that fetch instead of sending them again. Real server on 127.0.0.1, real files."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from ktui.core.config import ProviderConfig, Settings
from ktui.core.embeddings import EmbeddingService
from ktui.core.models import ANY_GROUP, ItemInput
from tests.support.embedding_server import deterministic_vectors, embedding_server_fixture
from tests.support.services import open_service as _open_service
from tests.support.services import write_files

DIMS = 16

server = embedding_server_fixture(DIMS)


@pytest.fixture(autouse=True)
def one_file_at_a_time(monkeypatch):
    """Read-ahead serves the files that run one at a time; plain-text files are batched
    (core/runtime/batches.py, tested in test_batches.py), so batching is off here."""
    monkeypatch.setattr("ktui.core.runtime.service.BATCH_FILES", 1)


def open_service(data_dir, server_url, **overrides):
    """Read-ahead runs only with `ingest.pipelining` (off by default since issue 14's
    measurements): these tests are about it, so they switch it on."""
    from dataclasses import replace

    from ktui.core.config import IngestSettings

    overrides["ingest"] = replace(overrides.get("ingest", IngestSettings()), pipelining=True)
    return _open_service(data_dir, server_url, **overrides)


async def fetch_started(svc: EmbeddingService) -> None:
    """Until the first caller's request is registered as in flight (no clock involved)."""
    while not svc.fetching:
        await asyncio.sleep(0)


async def test_a_caller_joins_a_fetch_of_the_same_texts_instead_of_sending_them_again(tmp_path, server):
    svc = EmbeddingService(Settings(data_dir=tmp_path, auto_ollama=False,
                                    providers={"local": ProviderConfig(name="local", kind="openai",
                                                                       base_url=server.url)}))
    server.faults.delay(0.3)  # keeps the first request in flight while the second caller asks
    texts = ["otters float", "badgers dig"]
    ahead = asyncio.ensure_future(svc.embed_ahead("local::m", texts))
    await fetch_started(svc)
    rows = await svc.embed("local::m", texts)
    await ahead
    assert server.request_count == 1 and server.texts_embedded == 2
    np.testing.assert_allclose(rows, deterministic_vectors(texts, DIMS), rtol=1e-5)
    await svc.aclose()


async def test_a_failed_fetch_is_sent_again_by_the_caller_that_joined_it(tmp_path, server):
    svc = EmbeddingService(Settings(data_dir=tmp_path, auto_ollama=False,
                                    providers={"local": ProviderConfig(name="local", kind="openai",
                                                                       base_url=server.url, max_retries=0)}),
                           retry_base_delay=0.001)
    server.faults.delay(0.3)
    server.faults.fail(500)  # the embed-ahead's request fails
    ahead = asyncio.ensure_future(svc.embed_ahead("local::m", ["capybaras swim"]))
    await fetch_started(svc)
    rows = await svc.embed("local::m", ["capybaras swim"])
    await ahead  # never raises: the indexing task reports failures
    assert rows.shape == (1, DIMS) and server.request_count >= 2
    await svc.aclose()


async def test_requests_fill_across_files_with_a_single_worker(tmp_path, server):
    folder = write_files(tmp_path / "notes", {f"n{i:03d}.md": f"Note {i} about otters and rivers.\n"
                                              for i in range(120)})
    async with open_service(tmp_path / "data", server.url, concurrency=1) as ks:
        base = await ks.create_base("Notes")
        before = server.request_count
        await ks.add_items(base.id, [ItemInput("directory", {"path": str(folder)})])
        assert await ks.wait_idle(timeout=120)
        items = (await ks.list_items(base.id, group_id=ANY_GROUP, limit=100)).total
        assert items == 121 and not await ks.check_invariants()
        requests = server.request_count - before
        # one file at a time would be 120 requests of one text each
        assert requests <= 120 // 4, requests
        # (one probe at create) every text sent once, but for the rare one whose own request
        # finished while a group was looking it up in the cache
        assert 120 <= server.texts_embedded - 1 <= 124
