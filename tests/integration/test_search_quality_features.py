"""Search through the facade: model profiles, relevance, filters, several bases, and a
first-k that does not depend on top_k. Real service, real SQLite, a real embedding
server on 127.0.0.1 (deterministic hashed bag-of-words vectors)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ktui.core.config import ModelOverride
from ktui.core.embeddings import EmbeddingService
from ktui.core.errors import ValidationError
from ktui.core.models import ItemInput, SearchMode
from tests.support.embedding_server import deterministic_vector, embedding_server_fixture
from tests.support.services import fake_settings, open_service, write_files

DIMS = 32
server = embedding_server_fixture(DIMS, scope="module")

DOCS = {
    "zoo/zebra.md": "Zebras have black and white stripes and live in herds on the savanna.",
    "zoo/giraffe.md": "Giraffes have long necks to reach acacia leaves on tall trees.",
    "zoo/otter.md": "Otters float on their backs and hold hands while they sleep.",
    "tea/oolong.txt": "乌龙茶是一种半发酵茶，主要产自福建和台湾。",
    "tea/puer.txt": "普洱茶产于云南省，是一种发酵茶。",
    "tea/hanami.txt": "春になると公園で花見をします。桜が満開です。",
}


async def _index(ks, name: str, root: Path, **config):
    base = await ks.create_base(name, **config)
    await ks.add_items(base.id, [ItemInput("directory", {"path": str(root)})])
    assert await ks.wait_idle(timeout=60)
    return base


async def test_prefixes_reach_the_server_and_the_cache_key_covers_them(tmp_path: Path, server) -> None:
    model = "fake::multilingual-e5-small"
    async with EmbeddingService(fake_settings(tmp_path, server.url)) as svc:
        assert svc.profile(model).query_prefix == "query: " and svc.profile(model).window_tokens == 512
        q = await svc.embed_query(model, "wie spät ist es")
        d = (await svc.embed(model, ["wie spät ist es"]))[0]
        assert np.allclose(q, deterministic_vector("query: wie spät ist es", DIMS), atol=1e-6)
        assert np.allclose(d, deterministic_vector("passage: wie spät ist es", DIMS), atol=1e-6)
    plain = fake_settings(tmp_path, server.url).with_(models={model: ModelOverride(query_prefix="")})
    async with EmbeddingService(plain) as svc:  # same cache file: the old prefixed vector is not served
        q = await svc.embed_query(model, "wie spät ist es")
        assert np.allclose(q, deterministic_vector("wie spät ist es", DIMS), atol=1e-6)
        assert svc.profile(model).overridden


async def test_a_new_base_fits_the_model_window_and_takes_its_mode(tmp_path: Path, server) -> None:
    async with open_service(tmp_path / "data", server.url) as ks:
        small = await ks.create_base("small", "fake::all-minilm")
        assert small.chunk_size <= 256 and small.chunk_overlap < small.chunk_size
        assert ks.model_profile("fake::all-minilm").window_tokens == 256
        unknown = await ks.create_base("unknown", "fake::deterministic")
        assert (unknown.chunk_size, unknown.chunk_overlap) == (1024, 200)
        assert unknown.search_mode == SearchMode.HYBRID and unknown.hybrid_alpha == 0.5
        explicit = await ks.create_base("explicit", "fake::all-minilm", chunk_size=800, search_mode="default")
        assert explicit.chunk_size == 800 and explicit.search_mode == SearchMode.DEFAULT


async def test_results_carry_relevance_and_base_and_filters_apply(tmp_path: Path, server) -> None:
    root = write_files(tmp_path / "docs", DOCS)
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await _index(ks, "docs", root)
        for mode in ("default", "bm25", "hybrid"):
            response = await ks.search(base.id, "zebra stripes", mode=mode)
            assert response.results, mode
            assert all(0.0 <= r.relevance <= 1.0 and r.base_id == base.id for r in response.results)
        assert (await ks.search(base.id, "stripes", mode="bm25")).results[0].relevance == 1.0
        for query, name in (("乌龙茶", "oolong.txt"), ("云南", "puer.txt"), ("花見", "hanami.txt"), ("満開", "hanami.txt")):
            top = (await ks.search(base.id, query, mode="bm25")).results[0]
            assert top.metadata["source"].endswith(name), query
        tea = str(root / "tea")
        only_tea = await ks.search(base.id, "stripes savanna", mode="hybrid", filters={"source_prefix": tea})
        assert only_tea.results and all(r.metadata["source"].startswith(tea) for r in only_tea.results)
        assert (await ks.search(base.id, "stripes", filters={"item_types": ["note"]})).results == []
        kept = await ks.search(base.id, "stripes", filters={"item_types": ["directory"]})
        assert kept.results and kept.results[0].metadata["source"].endswith("zebra.md")
        assert (await ks.search(base.id, "stripes", filters={"modified_after": "2999-01-01"})).results == []
        assert (await ks.search(base.id, "stripes", filters={"modified_after": "2000-01-01T00:00"})).results
        for bad, field in (({"item_types": ["pdf"]}, "item_types"), ({"modified_after": "yesterday"}, "modified_after"),
                           ({"colour": "red"}, "filters"), ({"source_prefix": " "}, "source_prefix")):
            with pytest.raises(ValidationError) as err:
                await ks.search(base.id, "stripes", filters=bad)
            assert field in err.value.errors


async def test_several_bases_are_searched_at_once_and_each_result_names_its_base(tmp_path: Path, server) -> None:
    zoo = write_files(tmp_path / "zoo", {k: v for k, v in DOCS.items() if k.startswith("zoo/")})
    tea = write_files(tmp_path / "tea", {k: v for k, v in DOCS.items() if k.startswith("tea/")})
    async with open_service(tmp_path / "data", server.url) as ks:
        a = await _index(ks, "zoo", zoo)
        b = await _index(ks, "tea", tea)
        both = await ks.search_bases(None, "乌龙茶 zebras", top_k=6)
        assert {r.base_id for r in both.results} == {a.id, b.id}
        assert [r.rank for r in both.results] == list(range(1, len(both.results) + 1))
        relevances = [r.relevance for r in both.results]
        assert relevances == sorted(relevances, reverse=True)
        # merged by relevance, each base's results keep the order a search of that base alone gives
        for base in (a, b):
            alone = [r.chunk_id for r in (await ks.search(base.id, "乌龙茶 zebras", top_k=6)).results]
            merged = [r.chunk_id for r in both.results if r.base_id == base.id]
            assert merged == alone[: len(merged)]
        one = await ks.search_bases([b.id], "乌龙茶", top_k=3)
        assert one.results and {r.base_id for r in one.results} == {b.id}
        with pytest.raises(ValidationError):
            await ks.search_bases([], "x")


@pytest.fixture(scope="module")
def indexed_corpus(tmp_path_factory):
    """One real base over a few dozen generated documents, shared by the property test."""
    import asyncio

    tmp = tmp_path_factory.mktemp("topk")
    words = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega river stone cloud".split()
    rng = np.random.default_rng(7)
    files = {f"d{i}.txt": " ".join(rng.choice(words, 12)) for i in range(40)}
    root = write_files(tmp / "docs", files)
    return tmp, root, words, asyncio


@settings(max_examples=15)
@given(query=st.lists(st.sampled_from("alpha beta gamma delta river stone cloud omega".split()), min_size=1,
                      max_size=4).map(" ".join),
       k=st.integers(1, 30), mode=st.sampled_from(["default", "bm25", "hybrid"]))
async def test_the_first_k_results_do_not_depend_on_top_k(indexed_corpus, server, query, k, mode) -> None:
    tmp, root, _words, _ = indexed_corpus
    async with open_service(tmp / "data", server.url) as ks:
        bases = (await ks.list_bases()).items
        base = bases[0] if bases else await _index(ks, "topk", root)
        few = await ks.search(base.id, query, top_k=k, mode=mode)
        many = await ks.search(base.id, query, top_k=50, mode=mode)
        assert [r.chunk_id for r in few.results] == [r.chunk_id for r in many.results][:k]
        assert [r.relevance for r in few.results] == [r.relevance for r in many.results][:k]
        shown = [r.relevance for r in many.results]
        assert shown == sorted(shown, reverse=True)  # the figure never rises down the ranking
