"""Rerank providers against real servers on 127.0.0.1: /v1/rerank (Jina/Cohere/OpenAI-compatible) and TEI /rerank."""

from __future__ import annotations

import pytest

from ktui.core.config import ProviderConfig, Settings
from ktui.core.embeddings import EmbeddingService
from ktui.core.embeddings.rerank import tei_rerank_url
from ktui.core.errors import (
    EmbeddingShapeError,
    ModelNotFoundError,
    ProviderError,
    ValidationError,
)
from tests.support.embedding_server import SharedHandlerServer
from tests.support.httpserver import Request, Response

DOCS = ["bread and butter", "embedding models map text to vectors", "vectors in space", "cats"]

shared = SharedHandlerServer.fixture()  # one 127.0.0.1 server per module, handler per test


def overlap(query: str, doc: str) -> float:
    q = set(query.lower().split())
    return len(q & set(doc.lower().split())) / max(1, len(q))


class RerankServer:
    def __init__(self):
        self.requests: list[Request] = []
        self.script: list[Response] = []

    def __call__(self, req: Request) -> Response:
        self.requests.append(req)
        if self.script:
            return self.script.pop(0)
        path = req.path.split("?")[0]
        body = req.json()
        if path == "/v1/rerank":
            if body["model"] != "jina-reranker":
                return Response.json({"detail": f"model {body['model']} not found"}, 404)
            scored = sorted(((overlap(body["query"], d), i) for i, d in enumerate(body["documents"])), reverse=True)
            scored = scored[: body.get("top_n") or len(scored)]
            return Response.json({"results": [{"index": i, "relevance_score": s} for s, i in scored]})
        if path == "/rerank":
            scored = [(overlap(body["query"], d), i) for i, d in enumerate(body["texts"])]
            return Response.json([{"index": i, "score": s} for s, i in scored])  # TEI: not necessarily sorted
        return Response(404, "not found")


def service(tmp_path, kind: str, url: str, **kw) -> EmbeddingService:
    cfg = ProviderConfig(name="rr", kind=kind, base_url=url, **kw)
    return EmbeddingService(Settings(data_dir=tmp_path, auto_ollama=False, providers={"rr": cfg}), retry_base_delay=0.01)


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
async def test_v1_rerank_url_forms_and_order(tmp_path, suffix, shared):
    fake = RerankServer()
    with shared.serve(fake) as srv:
        svc = service(tmp_path, "rerank", srv.url + suffix)
        result = await svc.rerank("rr::jina-reranker", "embedding vectors", DOCS, top_n=2)
        await svc.aclose()
    assert fake.requests[0].path == "/v1/rerank"
    body = fake.requests[0].json()
    assert body == {"model": "jina-reranker", "query": "embedding vectors", "documents": DOCS, "top_n": 2}
    assert [i for i, _ in result] == [1, 2]
    assert result[0][1] == pytest.approx(1.0)


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
async def test_tei_rerank_url_forms_and_sorting(tmp_path, suffix, shared):
    fake = RerankServer()
    with shared.serve(fake) as srv:
        svc = service(tmp_path, "tei-rerank", srv.url + suffix)
        result = await svc.rerank("rr::bge-reranker", "embedding vectors", DOCS)
        top1 = await svc.rerank("rr::bge-reranker", "cats", DOCS, top_n=1)
        await svc.aclose()
    assert fake.requests[0].path == "/rerank" and fake.requests[0].json()["texts"] == DOCS
    assert [i for i, _ in result][:2] == [1, 2] and len(result) == 4
    assert top1 == [(3, 1.0)]


def test_tei_url_helper():
    assert tei_rerank_url("http://h/v1/") == "http://h/rerank"
    assert tei_rerank_url("http://h/rerank") == "http://h/rerank"


async def test_rerank_failures(tmp_path, shared):
    fake = RerankServer()
    with shared.serve(fake) as srv:
        svc = service(tmp_path, "rerank", srv.url, max_retries=3, timeout=0.2)
        with pytest.raises(ModelNotFoundError, match="model nope not found"):
            await svc.rerank("rr::nope", "q", DOCS)
        fake.script = [Response.json({"results": [{"index": 9, "relevance_score": 1.0}]})]
        with pytest.raises(EmbeddingShapeError, match="invalid document index 9"):
            await svc.rerank("rr::jina-reranker", "q", DOCS)
        fake.script = [Response.json({"results": [{"index": 0, "relevance_score": "high"}]})]
        with pytest.raises(EmbeddingShapeError, match="non-numeric"):
            await svc.rerank("rr::jina-reranker", "q", DOCS)
        fake.script = [Response.json({"oops": 1})]
        with pytest.raises(EmbeddingShapeError, match="wrong shape"):
            await svc.rerank("rr::jina-reranker", "q", DOCS)
        fake.script = [Response.json({}, delay=0.6), Response.json({}, 429), Response.json({}, 502)]
        assert (await svc.rerank("rr::jina-reranker", "cats", DOCS, top_n=1))[0][0] == 3
        assert await svc.rerank("rr::jina-reranker", "q", []) == []
        with pytest.raises(ValidationError, match="top_n"):
            await svc.rerank("rr::jina-reranker", "q", DOCS, top_n=0)
        await svc.aclose()


async def test_rerank_model_id_must_name_a_rerank_provider(tmp_path):
    svc = service(tmp_path, "rerank", "http://127.0.0.1:9")
    with pytest.raises(ValidationError, match="not a rerank provider"):
        await svc.rerank("builtin::wordllama", "q", DOCS)
    with pytest.raises(ValidationError, match="rerank_model_id"):
        await svc.rerank("nobody::m", "q", DOCS)
    with pytest.raises(ValidationError, match="cannot embed"):
        await svc.embed("rr::jina-reranker", ["x"])
    with pytest.raises(ProviderError):
        await svc.rerank("rr::m", "q", DOCS)  # unreachable
    await svc.aclose()
