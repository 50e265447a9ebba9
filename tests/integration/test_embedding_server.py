"""The shared test embedding server itself: vectors, both protocols, every fault knob, subprocess mode."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.embedding_server import (
    deterministic_vector,
    deterministic_vectors,
    embedding_server_fixture,
    start_embedding_server,
)

server = embedding_server_fixture(dims=16, models=("m1", "m2"), strict_models=True)


def test_vectors_are_deterministic_unit_and_word_based():
    a = deterministic_vector("The Cat sat", 64)
    assert a.shape == (64,) and a.dtype == np.float32
    assert np.linalg.norm(a) == pytest.approx(1.0, abs=1e-6)
    np.testing.assert_array_equal(a, deterministic_vector("The Cat sat", 64))
    related = deterministic_vector("a cat sat down", 64)
    unrelated = deterministic_vector("quantum lattice chromodynamics", 64)
    assert a @ related > 0.5 > a @ unrelated
    assert deterministic_vector("", 8).shape == (8,)  # no tokens: still a unit vector
    assert not np.array_equal(deterministic_vector("cat", 64), deterministic_vector("CAT!", 64))  # per-text part


@given(st.lists(st.text(max_size=80), max_size=6), st.integers(1, 40))
def test_batch_equals_single(texts, dims):
    batch = deterministic_vectors(texts, dims)
    assert batch.shape == (len(texts), dims) and np.isfinite(batch).all()
    for t, row in zip(texts, batch, strict=True):
        np.testing.assert_allclose(row, deterministic_vector(t, dims), atol=1e-6)


def test_openai_and_ollama_protocols(server):
    with httpx.Client(base_url=server.url) as c:
        r = c.post("/v1/embeddings", json={"model": "m1", "input": ["a b", "c"]}).json()
        assert [d["index"] for d in r["data"]] == [0, 1] and r["model"] == "m1"
        np.testing.assert_allclose(r["data"][0]["embedding"], deterministic_vector("a b", 16), atol=1e-6)
        assert len(c.post("/v1/embeddings", json={"model": "m1", "input": "x", "dimensions": 5}).json()["data"][0]["embedding"]) == 5
        assert [m["id"] for m in c.get("/v1/models").json()["data"]] == ["m1", "m2"]
        assert c.post("/v1/embeddings", json={"model": "zz", "input": ["x"]}).status_code == 404
        r = c.post("/api/embed", json={"model": "m2", "input": ["a b"], "truncate": True}).json()
        assert len(r["embeddings"][0]) == 16
        assert "pulling" in c.post("/api/embed", json={"model": "zz", "input": "x"}).json()["error"]
        assert [m["name"] for m in c.get("/api/tags").json()["models"]] == ["m1", "m2"]
        assert c.post("/api/show", json={"model": "m1"}).json()["model_info"]["test.embedding_length"] == 16
        assert c.post("/v1/embeddings", content=b"{not json").status_code == 400
    assert server.request_count == 6 and server.texts_embedded == 4


def test_faults_in_order(server):
    server.faults.fail(429, times=2)
    server.faults.wrong_width(width=3)
    server.faults.empty_vectors()
    server.faults.wrong_shape()
    assert server.faults.pending == 5
    body = {"model": "m1", "input": ["a", "b"]}
    with httpx.Client(base_url=server.url) as c:
        assert c.get("/v1/models").status_code == 429  # `fail` applies to any request
        assert c.post("/v1/embeddings", json=body).status_code == 429
        assert c.get("/v1/models").status_code == 200  # embed-only faults wait for an embed request
        assert len(c.post("/v1/embeddings", json=body).json()["data"][0]["embedding"]) == 3
        assert c.post("/v1/embeddings", json=body).json()["data"][0]["embedding"] == []
        assert len(c.post("/v1/embeddings", json=body).json()["data"]) == 1
        server.faults.drop_connection()
        with pytest.raises(httpx.TransportError):
            c.post("/v1/embeddings", json=body)
        assert c.post("/v1/embeddings", json=body).status_code == 200
    server.faults.delay(0.2)
    with httpx.Client(base_url=server.url, timeout=0.05) as c, pytest.raises(httpx.ReadTimeout):
        c.post("/v1/embeddings", json=body)
    server.faults.clear()
    assert server.faults.pending == 0


def test_subprocess_mode_has_the_same_knobs():
    handle = start_embedding_server(8, subprocess=True)
    try:
        handle.faults.fail(503)
        with httpx.Client(base_url=handle.openai_url) as c:
            assert c.post("/embeddings", json={"model": "any", "input": ["x"]}).status_code == 503
            r = c.post("/embeddings", json={"model": "any", "input": ["x"]}).json()
        np.testing.assert_allclose(r["data"][0]["embedding"], deterministic_vector("x", 8), atol=1e-6)
        assert handle.request_count == 2 and handle.texts_embedded == 1 and handle.faults.pending == 0
    finally:
        handle.stop()
