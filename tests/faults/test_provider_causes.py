"""Provider errors name the real cause, and never show the credentials of a base_url.

Real HTTP servers on 127.0.0.1 (tests/support/httpserver.py and the embedding server)
playing the misbehaving third parties met in the field: an Ollama-API server without
/api/embed, a server that fails with HTTP 500, a proxy whose /api/show lists no
capabilities, a provider configured through OLLAMA_HOST, a reranker that is down
while the query cannot be embedded.
"""

from __future__ import annotations

import pytest

from ktui.core.config import ProviderConfig
from ktui.core.errors import ProviderError
from ktui.core.models import ItemInput, ItemStatus
from tests.support.embedding_server import embedding_server_fixture
from tests.support.httpserver import Response, routes, serve
from tests.support.services import fake_settings, open_service

pytestmark = pytest.mark.faults

DIMS = 16
server = embedding_server_fixture(DIMS)


def _with(settings, **providers: ProviderConfig):
    return settings.with_(providers={**settings.providers, **providers})


async def test_a_server_without_api_embed_is_not_told_to_pull_the_model(tmp_path, server):
    with serve(routes({})) as bare:  # 404 "not found" for every path, like a proxy without /api/embed
        settings = _with(fake_settings(tmp_path / "d", server.url),
                         proxy=ProviderConfig(name="proxy", kind="ollama", base_url=bare.url, max_retries=0))
        async with open_service(tmp_path / "d", server.url, providers=settings.providers) as ks:
            with pytest.raises(ProviderError) as caught:
                await ks.create_base("B", embedding_model_id="proxy::nomic-embed-text")
    message = str(caught.value)
    assert "has no endpoint" in message and "/api/embed" in message and "whatever the model" in message
    assert "pull" not in message


async def test_http_500_says_the_server_failed_with_its_body_and_credentials_are_redacted(tmp_path, server):
    secret_url = server.url.replace("http://", "http://alice:s3cret-pw@") + "/v1"
    providers = {"fake": ProviderConfig(name="fake", kind="openai", base_url=secret_url, max_retries=1)}
    data = tmp_path / "d"
    async with open_service(data, server.url, providers=providers) as ks:
        base = await ks.create_base("B")
        server.faults.fail(500, times=10_000, body='{"error": "CUDA out of memory on device 0"}')
        [note] = await ks.add_items(base.id, [ItemInput("note", {"content": "Walruses haul out on ice floes."})])
        assert await ks.wait_idle(timeout=30)
        item = await ks.get_item(note.id)
        with pytest.raises(ProviderError) as caught:
            await ks.detect_dimensions("fake::other")
    assert item.status == ItemStatus.FAILED
    for message in (item.error, str(caught.value)):
        assert "the server failed: CUDA out of memory on device 0" in message, message
        assert "lower" not in message and "batch_size" not in message
        assert "s3cret-pw" not in message and "alice" not in message and "***@" in message
    for path in data.rglob("*"):
        if path.is_file():
            assert b"s3cret-pw" not in path.read_bytes(), f"the password reached {path}"


async def test_a_provider_set_by_ollama_host_is_named_so(tmp_path, server, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:9")  # nothing listens on the discard port
    async with open_service(tmp_path / "d", server.url, auto_ollama=True) as ks:
        with pytest.raises(ProviderError) as caught:
            await ks.detect_dimensions("ollama::nomic-embed-text")
    message = str(caught.value)
    assert "set by OLLAMA_HOST=http://127.0.0.1:9" in message and "fix the OLLAMA_HOST environment variable" in message


async def test_models_of_a_server_without_capabilities_are_listed_as_capabilities_unknown(tmp_path, server):
    table = {
        "/api/tags": Response.json({"models": [{"name": "e5-small"}, {"name": "chatty"}]}),
        "/api/show": lambda req: Response.json(
            {"model_info": {"bert.embedding_length": 384}} if req.json()["model"] == "e5-small"
            else {"capabilities": ["completion"]}),
    }
    with serve(routes(table)) as proxy:
        providers = {"proxy": ProviderConfig(name="proxy", kind="ollama", base_url=proxy.url, max_retries=0)}
        async with open_service(tmp_path / "d", server.url, providers=providers) as ks:
            listing = await ks.list_embedding_models()
    models = {m.id: m for m in listing.models}
    assert models["proxy::e5-small"].note == "capabilities unknown" and models["proxy::e5-small"].dimensions == 384
    assert "proxy::chatty" not in models  # said it is a chat model


async def test_query_not_embedded_and_reranker_down_says_both(tmp_path, server):
    providers = {
        "fake": ProviderConfig(name="fake", kind="openai", base_url=server.url + "/v1", max_retries=0),
        "rr": ProviderConfig(name="rr", kind="rerank", base_url="http://127.0.0.1:9", max_retries=0, timeout=2),
    }
    async with open_service(tmp_path / "d", server.url, providers=providers) as ks:
        base = await ks.create_base("B", rerank_model_id="rr::bge-reranker")
        await ks.add_items(base.id, [ItemInput("note", {"content": "Puffins nest in burrows on cliffs."})])
        assert await ks.wait_idle(timeout=30)
        server.faults.fail(500, times=10_000, body="model unloaded")
        response = await ks.search(base.id, "puffins burrows")
    assert response.degraded and response.results
    assert "could not be embedded" in response.reason and "Rerank unavailable" in response.reason
    assert response.mode is not None and response.mode.value == "bm25"



async def test_files_under_the_data_directory_are_private(tmp_path, server):
    import stat

    data = tmp_path / "fresh" / "data"
    async with open_service(data, server.url) as ks:
        base = await ks.create_base("B")
        await ks.add_items(base.id, [ItemInput("note", {"content": "Private thoughts about otters."})])
        assert await ks.wait_idle(timeout=30)
        for folder in (data, data / "bases"):
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
        for name in ("knowledge.db", f"bases/{base.id}.sqlite"):
            assert stat.S_IMODE((data / name).stat().st_mode) == 0o600, name
        for wal in (data / "knowledge.db-wal", data / "bases" / f"{base.id}.sqlite-wal"):
            if wal.exists():
                assert stat.S_IMODE(wal.stat().st_mode) == 0o600, wal
