"""OpenAI-compatible provider against real servers on 127.0.0.1 (the shared embedding server
and hand-written handlers for the odd answers)."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from ktui.core.config import ProviderConfig, Settings
from ktui.core.embeddings import EmbeddingService
from ktui.core.embeddings.http import versioned_url
from ktui.core.errors import (
    EmbeddingShapeError,
    ModelNotFoundError,
    ProviderError,
    ProviderUnavailableError,
)
from tests.support.embedding_server import (
    SharedHandlerServer,
    deterministic_vectors,
    embedding_server_fixture,
    start_embedding_server,
)
from tests.support.httpserver import Request, Response

DIMS = 24

shared = SharedHandlerServer.fixture()  # one 127.0.0.1 server per module, handler per test


server = embedding_server_fixture(DIMS, models=("text-embed", "other"), strict_models=True)


def service(tmp_path, url: str, **kw) -> EmbeddingService:
    cfg = ProviderConfig(name="oai", kind="openai", base_url=url, **kw)
    settings = Settings(data_dir=tmp_path, auto_ollama=False, providers={"oai": cfg})
    return EmbeddingService(settings, retry_base_delay=0.01)


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
async def test_embed_any_base_url_form(tmp_path, server, suffix):
    svc = service(tmp_path, server.url + suffix)
    out = await svc.embed("oai::text-embed", ["hello world", "good bye"])
    await svc.aclose()
    np.testing.assert_allclose(out, deterministic_vectors(["hello world", "good bye"], DIMS), atol=1e-6)


def test_versioned_url_forms():
    for base in ("http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/v1/"):
        assert versioned_url(base, "embeddings") == "http://h:1/v1/embeddings"
    assert versioned_url("http://h:1/openai/v1", "rerank") == "http://h:1/openai/v1/rerank"
    assert versioned_url("http://h:1/v1/rerank", "rerank") == "http://h:1/v1/rerank"


async def test_api_key_and_dimensions_sent_only_when_set(tmp_path, monkeypatch, shared):
    seen: list[Request] = []

    def handler(req: Request) -> Response:
        seen.append(req)
        body = req.json()
        width = body.get("dimensions", 8)
        return Response.json({"data": [{"index": i, "embedding": [0.5] * width} for i, _ in enumerate(body["input"])]})

    monkeypatch.setenv("MY_KEY", "sk-test-123")
    with shared.serve(handler) as srv:
        plain = service(tmp_path, srv.url)
        await plain.embed("oai::m", ["a"])
        await plain.aclose()
        keyed = service(tmp_path / "2", srv.url, api_key_env="MY_KEY", dimensions=12)
        out = await keyed.embed("oai::m", ["a"], dimensions=12)
        await keyed.aclose()
    assert "dimensions" not in seen[0].json() and "authorization" not in seen[0].headers
    assert seen[1].json()["dimensions"] == 12 and seen[1].headers["authorization"] == "Bearer sk-test-123"
    assert out.shape == (1, 12)


async def test_out_of_order_indices_are_reordered(tmp_path, shared):
    def handler(req: Request) -> Response:
        texts = req.json()["input"]
        vecs = deterministic_vectors(texts, 8).tolist()
        data = [{"index": i, "embedding": vecs[i]} for i in reversed(range(len(texts)))]
        return Response.json({"data": data})

    with shared.serve(handler) as srv:
        svc = service(tmp_path, srv.url)
        out = await svc.embed("oai::m", ["one", "two", "three"])
        await svc.aclose()
    np.testing.assert_allclose(out, deterministic_vectors(["one", "two", "three"], 8), atol=1e-6)


async def test_list_models_from_server_or_config(tmp_path, server):
    svc = service(tmp_path, server.openai_url)
    listing = await svc.list_models()
    await svc.aclose()
    assert {m.id for m in listing.models if m.provider == "oai"} == {"oai::text-embed", "oai::other"}
    svc = service(tmp_path, "http://127.0.0.1:9", models=("fixed-model",))  # no request needed
    listing = await svc.list_models()
    await svc.aclose()
    assert [m.id for m in listing.models if m.provider == "oai"] == ["oai::fixed-model"] and not listing.errors


async def test_model_not_found(tmp_path, server):
    svc = service(tmp_path, server.url)
    with pytest.raises(ModelNotFoundError, match="does not know model 'nope'"):
        await svc.embed("oai::nope", ["x"])
    await svc.aclose()


async def test_unreachable(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    svc = service(tmp_path, f"http://127.0.0.1:{port}/v1")
    with pytest.raises(ProviderUnavailableError, match=f"127.0.0.1:{port}"):
        await svc.embed("oai::text-embed", ["x"])
    await svc.aclose()


async def test_faults_wrong_width_empty_shape(tmp_path, server):
    svc = service(tmp_path, server.url)
    server.faults.wrong_width(width=DIMS + 3)
    with pytest.raises(EmbeddingShapeError, match=f"expected {DIMS}, got {DIMS + 3}"):
        await svc.embed("oai::text-embed", ["a"], dimensions=DIMS)
    server.faults.empty_vectors()
    with pytest.raises(EmbeddingShapeError, match="empty vector"):
        await svc.embed("oai::text-embed", ["b"])
    server.faults.wrong_shape()
    with pytest.raises(EmbeddingShapeError, match="wrong shape"):
        await svc.embed("oai::text-embed", ["c", "d"])
    server.faults.wrong_shape()
    with pytest.raises(EmbeddingShapeError, match="wrong shape"):
        await svc.embed("oai::text-embed", ["e"])
    await svc.aclose()


async def test_faults_429_500_dropped_then_success(tmp_path, server):
    svc = service(tmp_path, server.url, max_retries=3)
    server.faults.fail(429)
    server.faults.fail(500)
    server.faults.drop_connection()
    before = server.request_count
    out = await svc.embed("oai::text-embed", ["retry me"])
    assert out.shape == (1, DIMS) and server.request_count - before == 4
    server.faults.fail(503, times=5)
    with pytest.raises(ProviderError, match="HTTP 503"):
        await svc.embed("oai::text-embed", ["give up"])
    server.faults.clear()
    await svc.aclose()


async def test_timeouts_retry_then_succeed_or_give_up(tmp_path, server):
    svc = service(tmp_path, server.url, timeout=0.2, max_retries=2)
    server.faults.slow(0.6)
    out = await svc.embed("oai::text-embed", ["slow once"])
    assert out.shape == (1, DIMS)
    server.faults.slow(0.6, times=3)
    with pytest.raises(ProviderUnavailableError, match=r"timed out after 0.2s.*after 3 attempt|after 3 attempt.*timed out"):
        await svc.embed("oai::text-embed", ["always slow"])
    await svc.aclose()


async def test_auth_failure_names_env_var(tmp_path, shared):
    with shared.serve(lambda req: Response.json({"error": {"message": "invalid api key"}}, 401)) as srv:
        svc = service(tmp_path, srv.url, api_key_env="OPENAI_API_KEY")
        with pytest.raises(ProviderError, match=r"HTTP 401: invalid api key.*\$OPENAI_API_KEY"):
            await svc.embed("oai::m", ["x"])
        await svc.aclose()


async def test_concurrency_limit_per_provider(tmp_path, server, shared):
    import threading

    active = {"now": 0, "max": 0}
    lock = threading.Lock()

    def handler(req: Request) -> Response:
        with lock:
            active["now"] += 1
            active["max"] = max(active["max"], active["now"])
        try:
            import time

            time.sleep(0.05)
            n = len(req.json()["input"])
            return Response.json({"data": [{"index": i, "embedding": [1.0, 0.0]} for i in range(n)]})
        finally:
            with lock:
                active["now"] -= 1

    with shared.serve(handler) as srv:
        svc = service(tmp_path, srv.url, concurrency=2, batch_size=1)
        out = await svc.embed("oai::m", [f"t{i}" for i in range(8)])
        await svc.aclose()
    assert out.shape == (8, 2) and active["max"] == 2


# --- encoding_format: base64 first, floats for servers that refuse it ---------------------


@pytest.mark.parametrize("mode", ["answer", "ignore", "refuse"])
async def test_base64_answered_ignored_or_refused_gives_the_same_vectors(tmp_path, mode):
    texts = ["hello world", "good bye", "base64 or floats"]
    with start_embedding_server(DIMS, base64=mode) as srv:
        svc = service(tmp_path, srv.url)
        first = await svc.embed("oai::m", texts[:2])
        second = await svc.embed("oai::m", texts[2:])
        await svc.aclose()
        seen = srv.encodings_seen
    np.testing.assert_allclose(np.vstack([first, second]), deterministic_vectors(texts, DIMS), atol=1e-6)
    assert first.dtype == np.float32
    if mode == "refuse":  # asked once, refused, floats from then on
        assert seen == ["base64", "float", "float"]
    else:
        assert seen == ["base64", "base64"]


async def test_a_400_that_floats_do_not_fix_is_reported_and_base64_is_kept(tmp_path, shared):
    seen: list[str] = []

    def handler(req: Request) -> Response:
        seen.append(req.json()["encoding_format"])
        if len(seen) <= 2:
            return Response.json({"error": "input too long"}, 400)
        return Response.json({"data": [{"index": 0, "embedding": [1.0, 0.0]}]})

    with shared.serve(handler) as srv:
        svc = service(tmp_path, srv.url)
        with pytest.raises(ProviderError, match="HTTP 400: input too long") as caught:
            await svc.embed("oai::m", ["x"])
        assert caught.value.status == 400
        await svc.embed("oai::m", ["y"])
        await svc.aclose()
    assert seen == ["base64", "float", "base64"]


async def test_unknown_model_is_not_retried_as_floats(tmp_path, server):
    svc = service(tmp_path, server.url)
    with pytest.raises(ModelNotFoundError):
        await svc.embed("oai::nope", ["x"])
    await svc.aclose()
    assert server.request_count == 1


@pytest.mark.parametrize(
    ("embedding", "message"),
    [
        ("not base64!", "not base64"),
        ("AAAA", "3 base64 bytes, not a whole number of float32 values"),
        ("", "empty vector"),
        ("AACAfw==", "NaN or infinity"),  # +inf as float32
    ],
)
async def test_bad_base64_vectors_are_shape_errors(tmp_path, shared, embedding, message):
    def handler(req: Request) -> Response:
        return Response.json({"data": [{"index": 0, "embedding": embedding}]})

    with shared.serve(handler) as srv:
        svc = service(tmp_path, srv.url)
        with pytest.raises(EmbeddingShapeError, match=message):
            await svc.embed("oai::m", ["x"])
        await svc.aclose()


async def test_mixed_base64_and_float_rows_are_a_shape_error(tmp_path, shared):
    def handler(req: Request) -> Response:
        return Response.json({"data": [{"index": 0, "embedding": "AACAPw=="}, {"index": 1, "embedding": [1.0]}]})

    with shared.serve(handler) as srv:
        svc = service(tmp_path, srv.url)
        with pytest.raises(EmbeddingShapeError, match="item 0 is not a list of numbers"):
            await svc.embed("oai::m", ["x", "y"])
        await svc.aclose()
