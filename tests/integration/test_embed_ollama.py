"""Ollama provider against a real HTTP server on 127.0.0.1 speaking /api/embed, /api/tags, /api/show."""

from __future__ import annotations

import asyncio
import socket

import numpy as np
import pytest

from ktui.core.config import ProviderConfig, Settings
from ktui.core.embeddings import EmbeddingService
from ktui.core.errors import (
    EmbeddingShapeError,
    ModelNotFoundError,
    ProviderError,
    ProviderUnavailableError,
)
from tests.support.embedding_server import SharedHandlerServer, deterministic_vectors
from tests.support.httpserver import Request, Response

DIMS = 16

shared = SharedHandlerServer.fixture()  # one 127.0.0.1 server per module, handler per test


class FakeOllama:
    """Speaks Ollama's API; `script` holds responses to give before behaving normally."""

    def __init__(self, models=("nomic-embed-text:latest", "llama3:8b")):
        self.models = list(models)
        self.script: list[Response] = []
        self.embed_bodies: list[dict] = []

    def __call__(self, req: Request) -> Response:
        path = req.path.split("?")[0]
        if path == "/api/embed":
            body = req.json()
            self.embed_bodies.append(body)
            if self.script:
                return self.script.pop(0)
            if body["model"] not in self.models:
                return Response.json({"error": f"model \"{body['model']}\" not found, try pulling it first"}, 404)
            vecs = deterministic_vectors(body["input"], DIMS).tolist()
            return Response.json({"model": body["model"], "embeddings": vecs})
        if path == "/api/tags":
            return Response.json({"models": [{"name": m, "model": m} for m in self.models]})
        if path == "/api/show":
            name = req.json()["model"]
            if name not in self.models:
                return Response.json({"error": "not found"}, 404)
            caps = ["embedding"] if "embed" in name else ["completion"]
            return Response.json({"capabilities": caps,
                                  "model_info": {"general.architecture": "x", "nomic-bert.embedding_length": DIMS}})
        return Response(404, "404 page not found")


def service(tmp_path, url: str, **kw) -> EmbeddingService:
    cfg = ProviderConfig(name="ollama", kind="ollama", base_url=url, **kw)
    settings = Settings(data_dir=tmp_path, auto_ollama=False, providers={"ollama": cfg})
    return EmbeddingService(settings, retry_base_delay=0.01)


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


async def test_embed_batches_with_truncate(tmp_path, shared):
    fake = FakeOllama()
    with shared.serve(fake) as srv:
        svc = service(tmp_path, srv.url, batch_size=2)
        texts = ["alpha beta", "beta gamma", "gamma delta", "delta"]
        seen: list[tuple[int, int]] = []
        out = await svc.embed("ollama::nomic-embed-text:latest", texts, on_progress=lambda d, t: seen.append((d, t)))
        await svc.aclose()
    assert out.shape == (4, DIMS) and out.dtype == np.float32
    # nomic-embed-text's profile prefixes documents; the server embeds what it is sent
    sent = ["search_document: " + t for t in texts]
    np.testing.assert_allclose(out, deterministic_vectors(sent, DIMS), atol=1e-6)
    assert [len(b["input"]) for b in fake.embed_bodies] == [2, 2]
    # the two batches are in flight together: they may reach the server in either order
    assert sorted(t for b in fake.embed_bodies for t in b["input"]) == sorted(sent)
    assert all(b["truncate"] is True for b in fake.embed_bodies)
    assert sorted(seen) == [(2, 4), (4, 4)]


async def test_list_models_keeps_embedding_models_with_width(tmp_path, shared):
    with shared.serve(FakeOllama()) as srv:
        svc = service(tmp_path, srv.url)
        listing = await svc.list_models()
        assert await svc.detect_dimensions("ollama::nomic-embed-text:latest") == DIMS
        await svc.aclose()
    ids = {m.id: m.dimensions for m in listing.models}
    assert ids["ollama::nomic-embed-text:latest"] == DIMS
    assert "ollama::llama3:8b" not in ids  # a chat model (capabilities) is not offered
    assert "builtin::wordllama" in ids and listing.errors == {}


async def test_model_not_found_says_ollama_pull(tmp_path, shared):
    with shared.serve(FakeOllama()) as srv:
        svc = service(tmp_path, srv.url)
        with pytest.raises(ModelNotFoundError, match=r"run `ollama pull mxbai-embed-large`"):
            await svc.embed("ollama::mxbai-embed-large", ["x"])
        await svc.aclose()


async def test_unreachable_names_the_url(tmp_path):
    url = f"http://127.0.0.1:{closed_port()}"
    cfg = ProviderConfig(name="ollama", kind="ollama", base_url=url)
    # a retry would wait an hour first: the error arriving at all shows refused
    # connections are not retried (the 120 s bound only ends a failing run)
    svc = EmbeddingService(Settings(data_dir=tmp_path, auto_ollama=False, providers={"ollama": cfg}),
                           retry_base_delay=3600)
    with pytest.raises(ProviderUnavailableError, match=url.replace(".", r"\.")):
        await asyncio.wait_for(svc.embed("ollama::nomic-embed-text", ["x"]), 120)
    listing = await svc.list_models()  # never fails as a whole
    assert "ollama" in listing.errors and url in listing.errors["ollama"]
    assert any(m.provider == "builtin" for m in listing.models)
    await svc.aclose()


async def test_wrong_width_is_reported(tmp_path, shared):
    with shared.serve(FakeOllama()) as srv:
        svc = service(tmp_path, srv.url)
        with pytest.raises(EmbeddingShapeError, match=f"expected 32, got {DIMS}"):
            await svc.embed("ollama::nomic-embed-text:latest", ["x"], dimensions=32)
        await svc.aclose()


@pytest.mark.parametrize(
    "response,match",
    [
        (Response.json({"model": "m", "embeddings": [[]]}), "empty vector"),
        (Response.json({"model": "m", "embeddings": [[0.1, 0.2], [0.3]]}), "1 inputs|wrong shape"),
        (Response.json({"model": "m"}), "wrong shape"),
        (Response.json({"model": "m", "embeddings": "nope"}), "wrong shape"),
        (Response.json({"model": "m", "embeddings": [["a", "b"]]}), "not lists of numbers|wrong shape"),
        (Response(200, "<html>proxy</html>"), "not JSON"),
    ],
)
async def test_bad_answers_raise_shape_errors(tmp_path, response, match, shared):
    fake = FakeOllama()
    fake.script = [response]
    with shared.serve(fake) as srv:
        svc = service(tmp_path, srv.url)
        with pytest.raises(EmbeddingShapeError, match=match):
            await svc.embed("ollama::nomic-embed-text:latest", ["x"])
        await svc.aclose()


async def test_429_then_success_and_500_retries(tmp_path, shared):
    fake = FakeOllama()
    fake.script = [Response.json({"error": "busy"}, 429), Response.json({"error": "oops"}, 500)]
    with shared.serve(fake) as srv:
        svc = service(tmp_path, srv.url, max_retries=3)
        out = await svc.embed("ollama::nomic-embed-text:latest", ["x"])
        await svc.aclose()
    assert out.shape == (1, DIMS) and len(fake.embed_bodies) == 3


async def test_500_exhausts_retries(tmp_path, shared):
    fake = FakeOllama()
    fake.script = [Response.json({"error": "model crashed"}, 500)] * 3
    with shared.serve(fake) as srv:
        svc = service(tmp_path, srv.url, max_retries=2)
        with pytest.raises(ProviderError, match=r"the server failed: model crashed \(HTTP 500, 3 attempt\(s\)\)"):
            await svc.embed("ollama::nomic-embed-text:latest", ["x"])
        await svc.aclose()
    assert len(fake.embed_bodies) == 3


async def test_timeout_retries_then_says_raise_timeout(tmp_path, shared):
    fake = FakeOllama()
    fake.script = [Response.json({}, delay=1.0)] * 2
    with shared.serve(fake) as srv:
        svc = service(tmp_path, srv.url, timeout=0.2, max_retries=1)
        with pytest.raises(ProviderUnavailableError, match=r"timed out after 0.2s.*providers\.ollama\.timeout"):
            await svc.embed("ollama::nomic-embed-text:latest", ["x"])
        await svc.aclose()
    assert len(fake.embed_bodies) == 2


async def test_timeout_then_success(tmp_path, shared):
    fake = FakeOllama()
    fake.script = [Response.json({}, delay=1.0)]
    with shared.serve(fake) as srv:
        svc = service(tmp_path, srv.url, timeout=0.3, max_retries=2)
        out = await svc.embed("ollama::nomic-embed-text:latest", ["hello"])
        await svc.aclose()
    assert out.shape == (1, DIMS)


def test_ollama_host_env_is_used(monkeypatch, tmp_path):
    monkeypatch.setenv("OLLAMA_HOST", "10.1.2.3:5555")
    svc = EmbeddingService(Settings(data_dir=tmp_path))
    cfg, model = svc.parse_model_id("ollama::bge-m3")
    assert cfg.base_url == "http://10.1.2.3:5555" and model == "bge-m3"
