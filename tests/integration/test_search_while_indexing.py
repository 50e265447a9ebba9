"""A search during a full reindex says the base is being indexed, instead of a bare
"No results" (QA): one base and several, on a real service and embedding server.

The queue is paused while the reindex is queued (no timing: the base is provably mid-
rebuild while paused), then resumed and awaited."""

from __future__ import annotations

from ktui.core.models import ItemInput
from tests.support.embedding_server import embedding_server_fixture
from tests.support.services import open_service

server = embedding_server_fixture(32)


async def test_a_search_during_a_full_reindex_says_the_base_is_being_rebuilt(tmp_path, server):
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Zoo")
        items = await ks.add_items(base.id, [ItemInput("note", {"content": "Otters hold hands while they sleep"}),
                                             ItemInput("note", {"content": "Zebras have black and white stripes"})])
        assert await ks.wait_idle(timeout=10)
        quiet = await ks.search(base.id, "otters", mode="bm25")
        assert quiet.results and quiet.reason is None and quiet.notices == ()

        ks._runtime.queue.pause("test: hold the rebuild")
        try:
            await ks.reindex_items(base.id, [i.id for i in items], force=True)
            during = await ks.search(base.id, "otters", mode="bm25")
            assert during.results == []  # the old vectors went first
            assert during.reason and "base 'Zoo' is being indexed (2 item(s) to go)" in during.reason
            assert not during.degraded  # not a keyword fallback
            assert [(n.base_name, n.degraded) for n in during.notices] == [("Zoo", False)]
            several = await ks.search_bases(None, "otters", mode="bm25")
            assert several.reason and "Zoo: base 'Zoo' is being indexed" in several.reason
            assert [n.base_id for n in several.notices] == [base.id]
        finally:
            ks._runtime.queue.resume()
        assert await ks.wait_idle(timeout=10)
        after = await ks.search(base.id, "otters", mode="bm25")
        assert after.results and after.reason is None and after.notices == ()


async def test_a_reader_beside_the_indexing_holder_says_so_too(tmp_path, server):
    """`ktui search` opens a reader: its own queue is empty, the holder (a TUI, `ktui add
    --wait`) indexes. The catalogue's `processing` rows tell it the base is being indexed."""
    from ktui.core.service import KnowledgeService
    from tests.support.services import fake_settings

    settings = fake_settings(tmp_path / "data", server.url)
    async with open_service(tmp_path / "data", server.url) as holder:
        base = await holder.create_base("Zoo")
        items = await holder.add_items(base.id, [ItemInput("note", {"content": "Otters hold hands while they sleep"})])
        assert await holder.wait_idle(timeout=10)
        holder._runtime.queue.pause("test: hold the rebuild")
        try:
            await holder.reindex_items(base.id, [i.id for i in items], force=True)
            async with await KnowledgeService.open(settings=settings, read_only=True) as reader:
                during = await reader.search(base.id, "otters", mode="bm25")
                assert during.results == []
                assert during.reason and "base 'Zoo' is being indexed (1 item(s) to go)" in during.reason
        finally:
            holder._runtime.queue.resume()
        assert await holder.wait_idle(timeout=10)
        async with await KnowledgeService.open(settings=settings, read_only=True) as reader:
            after = await reader.search(base.id, "otters", mode="bm25")
            assert after.results and after.reason is None
