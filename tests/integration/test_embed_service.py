"""EmbeddingService: content-keyed cache (memory + SQLite), batching, progress, widths, ids."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from ktui.core.config import EmbeddingSettings, ProviderConfig, Settings
from ktui.core.embeddings import EmbeddingService
from ktui.core.embeddings.cache import DiskCache, cache_key
from ktui.core.embeddings.fetching import sendable
from ktui.core.engine import clear_session_cache, rank_docs_by_embedding, service_embedder
from ktui.core.errors import EmbeddingShapeError, ValidationError
from tests.support.embedding_server import (
    deterministic_vectors,
    embedding_server_fixture,
)

DIMS = 32


server = embedding_server_fixture(DIMS)


def make_settings(tmp_path, url: str, **emb) -> Settings:
    cfg = ProviderConfig(name="local", kind="openai", base_url=url, batch_size=emb.pop("provider_batch", None))
    return Settings(data_dir=tmp_path, auto_ollama=False, providers={"local": cfg},
                    embeddings=EmbeddingSettings(**emb))


async def test_cache_hit_makes_no_provider_call_and_survives_restart(tmp_path, server):
    texts = ["alpha beta", "beta gamma", "alpha beta"]  # a duplicate inside one call is embedded once
    svc = EmbeddingService(make_settings(tmp_path, server.url))
    first = await svc.embed("local::m", texts)
    assert server.texts_embedded == 2 and server.request_count == 1
    again = await svc.embed("local::m", texts)
    assert server.request_count == 1
    np.testing.assert_array_equal(first, again)
    np.testing.assert_allclose(first, deterministic_vectors(texts, DIMS), atol=1e-6)
    await svc.aclose()
    # a new service (new process, same data dir): served from the SQLite file
    svc = EmbeddingService(make_settings(tmp_path, server.url))
    assert svc.cache.memory.get(cache_key("local::m", "alpha beta")) is None
    np.testing.assert_array_equal(await svc.embed("local::m", texts), first)
    assert server.request_count == 1
    # changed text misses by itself; another model id never shares the entry
    await svc.embed("local::m", ["alpha beta", "alpha beta!"])
    assert server.texts_embedded == 3
    await svc.embed("local::other", ["alpha beta"])
    assert server.texts_embedded == 4
    await svc.aclose()
    assert (tmp_path / "embedding-cache.sqlite").exists()


async def test_batches_and_progress(tmp_path, server):
    svc = EmbeddingService(make_settings(tmp_path, server.url, batch_size=3))
    await svc.embed("local::m", ["t0", "t1"])  # two cached up front
    progress: list[tuple[int, int]] = []
    out = await svc.embed("local::m", [f"t{i}" for i in range(10)], on_progress=lambda d, t: progress.append((d, t)))
    assert out.shape == (10, DIMS)
    assert server.request_count == 1 + 3  # 8 misses in batches of 3
    assert [t for _, t in progress] == [10, 10, 10]
    assert [d for d, _ in progress] == sorted(d for d, _ in progress) and progress[-1] == (10, 10)
    assert progress[0][0] >= 2 + 2
    all_cached: list[tuple[int, int]] = []
    await svc.embed("local::m", ["t3"], on_progress=lambda d, t: all_cached.append((d, t)))
    assert all_cached == [(1, 1)]
    await svc.aclose()


async def test_provider_batch_size_overrides_setting(tmp_path, server):
    svc = EmbeddingService(make_settings(tmp_path, server.url, batch_size=100, provider_batch=2))
    await svc.embed("local::m", ["a", "b", "c", "d", "e"])
    assert server.request_count == 3
    await svc.aclose()


async def test_dimensions_checked_and_empty_input(tmp_path, server):
    svc = EmbeddingService(make_settings(tmp_path, server.url))
    with pytest.raises(EmbeddingShapeError, match=f"expected 64, got {DIMS}"):
        await svc.embed("local::m", ["x"], dimensions=64)
    # the first call cached the 32-wide vector; asking for 64 again must still refuse, not serve it
    with pytest.raises(EmbeddingShapeError, match=f"expected 64, got {DIMS}"):
        await svc.embed("local::m", ["x"], dimensions=64)
    assert (await svc.embed("local::m", [], dimensions=8)).shape == (0, 8)
    with pytest.raises(ValidationError, match="item 1 is NoneType"):
        await svc.embed("local::m", ["ok", None])  # type: ignore[list-item]
    q = await svc.embed_query("local::m", "hello", dimensions=DIMS)
    assert q.shape == (DIMS,)
    await svc.aclose()


async def test_failed_batch_keeps_earlier_batches_cached(tmp_path, server):
    settings = make_settings(tmp_path, server.url, batch_size=2)
    one_at_a_time = ProviderConfig(name="local", kind="openai", base_url=server.url, concurrency=1, max_retries=0)
    svc = EmbeddingService(settings.with_(providers={"local": one_at_a_time}), retry_base_delay=0.0)
    server.faults.ok(1)
    server.faults.fail(500)
    with pytest.raises(Exception, match="HTTP 500"):
        await svc.embed("local::m", ["a", "b", "c", "d"])
    assert server.texts_embedded == 2
    before = server.request_count
    await svc.embed("local::m", ["a", "b"])  # the batch that arrived was cached
    assert server.request_count == before
    await svc.aclose()


def test_parse_model_id(tmp_path):
    svc = EmbeddingService(Settings(data_dir=tmp_path))
    cfg, model = svc.parse_model_id("builtin::wordllama")
    assert cfg.kind == "builtin" and model == "wordllama"
    cfg, model = svc.parse_model_id("ollama::hf.co/org/model:Q4::x")
    assert cfg.kind == "ollama" and model == "hf.co/org/model:Q4::x"
    for bad in ["wordllama", "::m", "builtin::", "", "nobody::m"]:
        with pytest.raises(ValidationError) as err:
            svc.parse_model_id(bad)
        assert "embedding_model_id" in err.value.errors
        assert not svc.has_model_provider(bad)
    assert svc.has_model_provider("ollama::anything")
    no_ollama = EmbeddingService(Settings(data_dir=tmp_path, auto_ollama=False))
    assert not no_ollama.has_model_provider("ollama::anything")


async def test_disk_cache_is_bounded_oldest_first(tmp_path):
    disk = DiskCache(tmp_path / "c.sqlite", max_entries=5)
    vec = np.arange(4, dtype=np.float32)
    for i in range(8):
        await disk.put_many([(cache_key("m", f"t{i}"), vec + i)])
    assert await disk.count() == 5
    got = await disk.get_many([cache_key("m", f"t{i}") for i in range(8)])
    assert sorted(int(v[0]) for v in got.values()) == [3, 4, 5, 6, 7]
    await disk.put_many([(cache_key("m", f"t{i}"), vec) for i in range(100, 120)])  # a batch larger than the bound
    assert await disk.count() == 5
    await disk.close()


async def test_unusable_cache_file_disables_disk_cache_but_embedding_works(tmp_path, server):
    (tmp_path / "embedding-cache.sqlite").write_bytes(b"this is not a database" * 100)
    svc = EmbeddingService(make_settings(tmp_path, server.url))
    out = await svc.embed("local::m", ["still works"])
    assert out.shape == (1, DIMS) and svc.cache.disk is not None and svc.cache.disk.disabled
    await svc.aclose()


async def test_persistent_cache_can_be_switched_off(tmp_path, server):
    svc = EmbeddingService(make_settings(tmp_path, server.url, persistent_cache_entries=0, memory_cache_entries=1))
    await svc.embed("local::m", ["a", "b"])
    await svc.embed("local::m", ["a"])  # evicted from the 1-entry LRU: embedded again
    assert server.texts_embedded == 3 and not (tmp_path / "embedding-cache.sqlite").exists()
    await svc.aclose()


async def test_cache_rows_are_float32_blobs(tmp_path, server):
    svc = EmbeddingService(make_settings(tmp_path, server.url))
    await svc.embed("local::m", ["blob check"])
    await svc.aclose()
    with sqlite3.connect(tmp_path / "embedding-cache.sqlite") as conn:
        key, dims, blob = conn.execute("SELECT key, dims, vector FROM embedding_cache").fetchone()
    assert key == cache_key("local::m", "blob check") and dims == DIMS and len(blob) == 4 * DIMS


async def test_engine_adapter_uses_service(tmp_path, server):
    clear_session_cache()
    svc = EmbeddingService(make_settings(tmp_path, server.url))
    docs = ["sourdough bread recipe", "embedding models and vectors", "garden tools"]
    res = await rank_docs_by_embedding("vectors from embedding models", docs, content=str,
                                       embedder=service_embedder(svc, "local::m"))
    assert not res.degraded and res.matches[0].candidate == docs[1]
    server.faults.fail(401, times=1)  # a provider failure degrades the engine, never raises
    clear_session_cache()
    res = await rank_docs_by_embedding("bread", docs + ["new doc"], content=str,
                                       embedder=service_embedder(svc, "local::m"))
    assert res.degraded and res.matches[0].candidate == docs[0]
    await svc.aclose()


async def test_lone_surrogates_and_nul_do_not_crash_providers(tmp_path, server):
    svc = EmbeddingService(make_settings(tmp_path, server.url))
    texts = ["bad \ud800 byte", "nul \x00 char", "emoji 🚀"]
    out = await svc.embed("local::m", texts)
    clean = sendable(texts[0])
    assert clean.encode("utf-8") and clean.startswith("bad \ufffd") and clean.endswith(" byte")
    np.testing.assert_allclose(out[0], deterministic_vectors([clean], DIMS)[0], atol=1e-6)
    assert out.shape == (3, DIMS)
    assert (await svc.embed("builtin::wordllama", texts)).shape == (3, 256)
    await svc.aclose()
