"""The knowledge service end to end: the nine operations, their orderings, the queue.

Everything is real: files in tmp_path, the catalogue and the per-base stores, and an
OpenAI-compatible embedding server on 127.0.0.1 (deterministic vectors). Every test runs
on both backends (SQLite, and a shared PostgreSQL store: tests/support/facades.py) except
the few in SQLITE_ONLY, which say why.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from ktui.core.errors import (
    AggregateAcceptanceError,
    BaseUnavailableError,
    InvalidOperationError,
    NotFoundError,
    PartialDeletionError,
    StoreError,
    ValidationError,
)
from ktui.core.models import (
    ANY_GROUP,
    ItemChanged,
    ItemInput,
    ItemPhase,
    ItemsAdded,
    ItemsRemoved,
    ItemStatus,
    ItemType,
    KnowledgeBaseErrorCode,
    ScoreKind,
)
from ktui.core.runtime.service import SHUTDOWN_MESSAGE
from tests.support import services
from tests.support.embedding_server import embedding_server_fixture
from tests.support.facades import BACKENDS, backend_overrides
from tests.support.httpserver import Response, routes, serve
from tests.support.services import FAKE_MODEL, open_service, write_files

DIMS = 32
DOCS = {
    "guide/install.md": "# Install\n\nRun pip install ktui to install the terminal application.\n",
    "guide/search.md": "# Search\n\nHybrid search fuses keyword ranking with vector similarity.\n",
    "guide/deep/embeddings.md": "# Embeddings\n\nThe builtin model embeds text offline with WordLlama.\n",
    "notes.txt": "Bananas are yellow and rich in potassium.\n",
}


server = embedding_server_fixture(DIMS)


# What only the SQLite backend has (or, on PostgreSQL, only the leases will bring)
SQLITE_ONLY = {
    "test_a_data_directory_is_used_by_one_process_at_a_time": "on PostgreSQL every process is a writer",
    "test_partial_deletion_is_reported": "blocks the removal of a store file",
}


@pytest.fixture(autouse=True, params=BACKENDS)
def backend(request, monkeypatch):
    """Every test on both backends: `open_service` here opens the backend of the parameter."""
    if request.param == "postgres" and request.node.originalname in SQLITE_ONLY:
        pytest.skip(SQLITE_ONLY[request.node.originalname])
    overrides = backend_overrides(request.param, request)
    original = services.open_service

    def opened(data_dir, server_url, **kw):
        return original(data_dir, server_url, **overrides, **kw)

    monkeypatch.setattr(sys.modules[__name__], "open_service", opened)
    return request.param


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_files(tmp_path / "corpus", DOCS)


async def wait_for(predicate, timeout: float = 10.0, interval: float = 0.01):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = await predicate()
        if result:
            return result
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(interval)


async def all_items(ks, base_id):
    page = await ks.list_items(base_id, group_id=ANY_GROUP, limit=100)
    return page.items


async def test_add_index_and_search_every_leaf_and_container(tmp_path, server, corpus):
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Docs")
        assert base.dimensions == DIMS  # detected from the model
        sub = ks.subscribe()
        added = await ks.add_items(
            base.id,
            [
                ItemInput("directory", {"path": str(corpus / "guide")}),
                ItemInput("file", {"path": str(corpus / "notes.txt")}),
                ItemInput("note", {"content": "Kiwis are green and fuzzy fruit."}),
            ],
        )
        # accepted, not indexed yet: add_items returns once the rows exist
        assert all(i.status == ItemStatus.PROCESSING for i in added)
        assert await ks.wait_idle(timeout=20)
        items = await all_items(ks, base.id)
        assert {i.status for i in items} == {ItemStatus.COMPLETED}
        # nested folders become directory rows under the root
        kinds = sorted(i.type.value for i in items)
        assert kinds.count("directory") == 2 and kinds.count("file") == 4 and kinds.count("note") == 1
        assert await ks.check_invariants() == []

        events = sub.drain()
        leaf_phases = [e.phase for e in events if isinstance(e, ItemChanged) and e.item_id == added[1].id]
        assert leaf_phases[-1] is None  # completed
        assert any(isinstance(e, ItemsAdded) and e.group_id == added[0].id for e in events)

        for mode in ("default", "bm25", "hybrid"):
            response = await ks.search(base.id, "potassium bananas", mode=mode)
            assert not response.degraded
            assert response.results, mode
            assert "Bananas" in response.results[0].page_content
            assert response.results[0].rank == 1
        vector = await ks.search(base.id, "potassium bananas", mode="default")
        assert vector.results[0].score_kind == ScoreKind.COSINE
        assert vector.results[0].metadata["source"] == str(corpus / "notes.txt")

        # a container lists the union of its leaves' chunks
        chunks = await ks.list_item_chunks(base.id, added[0].id)
        assert {c.metadata["source"] for c in chunks} == {str(corpus / "guide" / p) for p in
                                                          ("install.md", "search.md", "deep/embeddings.md")}


async def test_status_sequence_of_a_leaf(tmp_path, server, corpus):
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Docs")
        sub = ks.subscribe()
        server.faults.delay(0.2)
        (item,) = await ks.add_items(base.id, [ItemInput("file", {"path": str(corpus / "notes.txt")})])
        seen = []
        async for event in sub:
            if isinstance(event, ItemChanged) and event.item_id == item.id:
                seen.append((event.status, event.phase))
                if event.status.is_terminal:
                    break
        server.faults.clear()
        assert seen[0] == (ItemStatus.PROCESSING, None)  # queued
        assert (ItemStatus.PROCESSING, ItemPhase.READING) in seen
        assert (ItemStatus.PROCESSING, ItemPhase.EMBEDDING) in seen
        assert seen[-1] == (ItemStatus.COMPLETED, None)


async def test_failures_are_recorded_on_the_item_and_container(tmp_path, server, corpus):
    (corpus / "guide" / "broken.md").write_bytes(b"\x00\x01\x02binary\x00" * 50)
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Docs")
        (root,) = await ks.add_items(base.id, [ItemInput("directory", {"path": str(corpus / "guide")})])
        assert await ks.wait_idle(timeout=20)
        items = {i.source: i for i in await all_items(ks, base.id)}
        broken = items[str(corpus / "guide" / "broken.md")]
        assert broken.status == ItemStatus.FAILED and broken.error
        assert (await ks.get_item(root.id)).status == ItemStatus.FAILED
        assert (await ks.get_item(root.id)).error == "One or more child items failed"
        assert await ks.list_item_chunks(base.id, broken.id) == []
        # an empty folder fails the root with a clear message
        (corpus / "empty").mkdir()
        (empty,) = await ks.add_items(base.id, [ItemInput("directory", {"path": str(corpus / "empty")})])
        assert await ks.wait_idle(timeout=20)
        assert (await ks.get_item(empty.id)).error == "Directory contains no indexable files"
        assert await ks.check_invariants() == []


async def test_delete_during_embedding_removes_everything(tmp_path, server, corpus):
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Docs")
        (keep,) = await ks.add_items(base.id, [ItemInput("note", {"content": "keep this apple note"})])
        assert await ks.wait_idle(timeout=10)
        server.faults.delay(0.5)
        sub = ks.subscribe()
        (item,) = await ks.add_items(base.id, [ItemInput("directory", {"path": str(corpus / "guide")})])

        async def embedding_started():
            return any(isinstance(e, ItemChanged) and e.phase == ItemPhase.EMBEDDING for e in sub.drain())

        await wait_for(embedding_started)
        await ks.delete_items(base.id, [item.id])
        server.faults.clear()
        assert await ks.wait_idle(timeout=10)
        remaining = await all_items(ks, base.id)
        assert [i.id for i in remaining] == [keep.id]
        assert await ks.check_invariants() == []
        hits = await ks.search(base.id, "hybrid search vector similarity", mode="bm25")
        assert all(r.item_id == keep.id for r in hits.results)
        with pytest.raises(NotFoundError):
            await ks.get_item(item.id)


async def test_interrupt_while_preparing_a_sitemap(tmp_path, server):
    page = "<html><body><p>Sitemaps list pages about gardening tomatoes.</p></body></html>"
    with serve(routes({})) as web:
        sitemap = (
            '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"<url><loc>{web.url}/a</loc></url><url><loc>{web.url}/b</loc></url></urlset>"
        )
        web.handler = routes({
            "/sitemap.xml": Response(200, sitemap, {"Content-Type": "application/xml"}, delay=0.6),
            "/a": Response(200, page, {"Content-Type": "text/html"}),
            "/b": Response(200, page.replace("tomatoes", "peppers"), {"Content-Type": "text/html"}),
        })
        async with open_service(tmp_path / "data", server.url) as ks:
            base = await ks.create_base("Web")
            (root,) = await ks.add_items(base.id, [ItemInput("sitemap", {"url": web.url + "/sitemap.xml"})])
            await wait_for(lambda: _phase_is(ks, root.id, ItemPhase.PREPARING))
            await ks.reindex_items(base.id, [root.id])  # interrupts the running prepare, starts afresh
            assert await ks.wait_idle(timeout=20)
            items = await all_items(ks, base.id)
            assert len(items) == 3  # the root and exactly one copy of each page
            assert {i.status for i in items} == {ItemStatus.COMPLETED}
            assert await ks.check_invariants() == []
            # delete while preparing leaves nothing behind (in a second base: one base
            # holds a sitemap once)
            second = await ks.create_base("Web again")
            (again,) = await ks.add_items(second.id, [ItemInput("sitemap", {"url": web.url + "/sitemap.xml"})])
            await wait_for(lambda: _phase_is(ks, again.id, ItemPhase.PREPARING))
            await ks.delete_items(second.id, [again.id])
            assert await ks.wait_idle(timeout=10)
            assert len(await all_items(ks, base.id)) == 3 and await all_items(ks, second.id) == []
            assert await ks.check_invariants() == []


async def _phase_is(ks, item_id, phase):
    return (await ks.get_item(item_id)).phase == phase


async def test_reindex_of_a_nested_selection_collapses_to_the_root(tmp_path, server, corpus):
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Docs")
        (root,) = await ks.add_items(base.id, [ItemInput("directory", {"path": str(corpus / "guide")})])
        assert await ks.wait_idle(timeout=20)
        before = await ks.list_item_chunks(base.id, root.id)
        children = await all_items(ks, base.id)
        nested = [i.id for i in children if i.group_id is not None]
        (corpus / "guide" / "new.md").write_text("# New\n\nA brand new page about otters.\n")
        sub = ks.subscribe()
        calls = server.texts_embedded
        await ks.reindex_items(base.id, [root.id, *nested])  # a folder refreshes incrementally
        assert await ks.wait_idle(timeout=20)
        assert not [e for e in sub.drain() if isinstance(e, ItemsRemoved)]
        after = await ks.list_item_chunks(base.id, root.id)
        assert len(after) == len(before) + 1  # one copy of each, plus the new file
        assert server.texts_embedded == calls + 1  # only the new file was embedded
        await ks.reindex_items(base.id, [root.id, *nested], force=True)  # a full rebuild
        assert await ks.wait_idle(timeout=20)
        removed = [e for e in sub.drain() if isinstance(e, ItemsRemoved)]
        assert removed and set(nested) <= set(removed[0].item_ids)
        after = await ks.list_item_chunks(base.id, root.id)
        assert len(after) == len(before) + 1
        assert (await ks.get_item(root.id)).status == ItemStatus.COMPLETED
        assert await ks.check_invariants() == []
        # reindexing a single nested leaf requeues only that leaf
        leaf = next(i for i in await all_items(ks, base.id) if i.type == ItemType.FILE)
        fresh = await ks.reindex_items(base.id, [leaf.id])
        assert [i.id for i in fresh] == [leaf.id]
        assert await ks.wait_idle(timeout=10)
        assert len(await ks.list_item_chunks(base.id, root.id)) == len(after)


async def test_write_lock_serialises_one_base_but_not_two(tmp_path, server):
    async with open_service(tmp_path / "data", server.url) as ks:
        a = await ks.create_base("A")
        b = await ks.create_base("B")
        lock = ks._runtime.lock(a.id)  # hold base A's write lock as a running writer would
        await lock.acquire()
        try:
            (item_a,) = await ks.add_items(a.id, [ItemInput("note", {"content": "alpha note"})])
            (item_b,) = await ks.add_items(b.id, [ItemInput("note", {"content": "beta note"})])
            assert await ks.wait_idle(b.id, timeout=10)  # B never waits on A's lock
            assert (await ks.get_item(item_b.id)).status == ItemStatus.COMPLETED
            assert not await ks.wait_idle(a.id, timeout=0.3)  # A's write waits for the lock
            assert (await ks.get_item(item_a.id)).phase == ItemPhase.EMBEDDING
        finally:
            lock.release()
        assert await ks.wait_idle(a.id, timeout=10)
        assert (await ks.get_item(item_a.id)).status == ItemStatus.COMPLETED


async def test_restore_completed_and_failed_bases(tmp_path, server, corpus):
    async with open_service(tmp_path / "data", server.url) as ks:
        source = await ks.create_base("Docs", chunk_size=300, chunk_overlap=30, threshold=0.1, document_count=5)
        await ks.add_items(
            source.id,
            [ItemInput("directory", {"path": str(corpus / "guide")}), ItemInput("note", {"content": "pears"})],
        )
        assert await ks.wait_idle(timeout=20)
        with pytest.raises(InvalidOperationError):
            await ks.restore_base(source.id, FAKE_MODEL, DIMS)  # a no-op clone
        with pytest.raises(ValidationError, match=f"answers {DIMS}-dimensional vectors, not 16") as info:
            await ks.restore_base(source.id, FAKE_MODEL, 16)  # a width the model does not have
        assert info.value.errors.keys() == {"dimensions"}
        restored = await ks.restore_base(source.id, "fake::other", DIMS, name="Docs (other model)")
        assert (restored.chunk_size, restored.chunk_overlap, restored.threshold, restored.document_count) == (
            300, 30, 0.1, 5)
        assert restored.embedding_model_id == "fake::other" and restored.dimensions == DIMS
        roots = (await ks.list_items(restored.id)).items
        assert sorted(i.type.value for i in roots) == ["directory", "note"]  # roots only
        assert await ks.wait_idle(timeout=20)
        assert len(await all_items(ks, restored.id)) == len(await all_items(ks, source.id))
        assert {i.status for i in await all_items(ks, restored.id)} == {ItemStatus.COMPLETED}
        # the source is untouched
        assert (await ks.get_base(source.id)).dimensions == DIMS

        # a failed base (its model is missing here) refuses work and restores
        failed = await ks._state.create_failed_base(name="Legacy", dimensions=DIMS)
        from ktui.core.data.item_validation import validate_item_input

        await ks._state.create_roots(
            failed.id, [validate_item_input(ItemInput("note", {"content": "legacy grapes"}))],
            status=ItemStatus.IDLE,
        )
        assert failed.error == KnowledgeBaseErrorCode.MISSING_EMBEDDING_MODEL
        for call in (
            ks.add_items(failed.id, [ItemInput("note", {"content": "x"})]),
            ks.search(failed.id, "grapes"),
            ks.reindex_items(failed.id, [(await ks.list_items(failed.id)).items[0].id]),
        ):
            with pytest.raises(BaseUnavailableError, match="restore"):
                await call
        recovered = await ks.restore_base(failed.id, FAKE_MODEL, DIMS)
        assert recovered.is_usable
        assert await ks.wait_idle(timeout=10)
        hits = await ks.search(recovered.id, "grapes")
        assert hits.results and "grapes" in hits.results[0].page_content
        assert (await ks.get_base(failed.id)).status.value == "failed"  # kept until the user deletes it


async def test_restore_aggregates_acceptance_failures_and_drops_the_new_base(tmp_path, server, corpus, backend):
    async with open_service(tmp_path / "data", server.url) as ks:
        source = await ks.create_base("Docs")
        await ks.add_items(source.id, [ItemInput("file", {"path": str(corpus / "notes.txt")}),
                                       ItemInput("directory", {"path": str(corpus / "guide")})])
        assert await ks.wait_idle(timeout=20)
        (corpus / "notes.txt").unlink()
        before = (await ks.list_bases()).total
        with pytest.raises(AggregateAcceptanceError) as info:
            await ks.restore_base(source.id, "fake::other", DIMS)
        assert "notes.txt" in str(info.value)
        assert (await ks.list_bases()).total == before  # the new base was deleted again
        if backend == "sqlite":
            assert (tmp_path / "data" / "bases").exists()


async def test_delete_base_interrupts_work_and_removes_files(tmp_path, server, corpus):
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Docs")
        other = await ks.create_base("Other")
        await ks.add_items(other.id, [ItemInput("note", {"content": "other base stays"})])
        server.faults.delay(0.3)
        await ks.add_items(base.id, [ItemInput("directory", {"path": str(corpus)})])
        await wait_for(lambda: _any_embedding(ks, base.id))  # work is running when the base goes
        await ks.delete_base(base.id)
        server.faults.clear()
        assert not list((tmp_path / "data" / "bases").glob(f"{base.id}.*"))
        with pytest.raises(NotFoundError):
            await ks.get_base(base.id)
        assert await ks.wait_idle(timeout=10)
        assert (await ks.search(other.id, "other base")).results
        assert await ks.check_invariants() == []


async def test_partial_deletion_is_reported(tmp_path, server):
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Docs")
        blocker = tmp_path / "data" / "bases" / f"{base.id}.blocker"
        blocker.mkdir()
        (blocker / "file").write_text("cannot unlink a non-empty directory")
        with pytest.raises(PartialDeletionError) as info:
            await ks.delete_base(base.id)
        assert str(blocker) in str(info.value)
        with pytest.raises(NotFoundError):  # the rows are gone all the same
            await ks.get_base(base.id)


async def test_shutdown_marks_work_failed_and_reopen_requeues_it(tmp_path, server, corpus):
    data = tmp_path / "data"
    async with open_service(data, server.url) as ks:
        base = await ks.create_base("Docs")
        server.faults.delay(0.3)
        (root,) = await ks.add_items(base.id, [ItemInput("directory", {"path": str(corpus)})])
        await wait_for(lambda: _any_embedding(ks, base.id))
    # closed mid-indexing
    server.faults.clear()
    async with open_service(data, server.url) as ks:
        # the reopened service re-queued it at once; before that, the rows said why
        assert await ks.wait_idle(timeout=20)
        items = await all_items(ks, base.id)
        assert {i.status for i in items} == {ItemStatus.COMPLETED}
        assert await ks.check_invariants() == []


async def _any_embedding(ks, base_id):
    return any(i.phase == ItemPhase.EMBEDDING for i in await all_items(ks, base_id))


async def test_shutdown_message_is_written(tmp_path, server, corpus, backend):
    """SQLite: a shutdown fails what it interrupted, for the next open to re-queue. A shared
    PostgreSQL store: it gives the items' leases back and leaves them `processing`, so
    another process picks them up at once (core/runtime/claims.py)."""
    data = tmp_path / "data"
    ks_cm = open_service(data, server.url, concurrency=1)
    async with ks_cm as ks:
        base = await ks.create_base("Docs")
        server.faults.delay(0.4)
        await ks.add_items(base.id, [ItemInput("file", {"path": str(corpus / "notes.txt")}),
                                     ItemInput("note", {"content": "second item waits in the queue"})])
        await wait_for(lambda: _any_embedding(ks, base.id))
        await ks._runtime.close()  # shut the runtime down, keep the catalogue open to look
        items = await all_items(ks, base.id)
        if backend == "postgres":
            assert [(i.status, i.error) for i in items] == [(ItemStatus.PROCESSING, None)] * 2
            assert await ks._db.fetchone("SELECT count(*) FROM item_lease") == (0,)
        else:
            assert [i.status for i in items] == [ItemStatus.FAILED, ItemStatus.FAILED]
            assert {i.error for i in items} == {SHUTDOWN_MESSAGE}
    server.faults.clear()


def write_catalogue(backend: str, request, data: Path, statement: str, params: tuple) -> int:
    """Run one statement on the catalogue below the facade (what a crash leaves behind);
    returns how many rows it changed."""
    if backend == "sqlite":
        import sqlite3

        con = sqlite3.connect(data / "knowledge.db")
        changed = con.execute(statement.replace("%s", "?"), params).rowcount
        con.commit()
        con.close()
        return changed
    import psycopg

    url, schema = request.getfixturevalue("postgres_server").url, request.getfixturevalue("pg_schema")
    with psycopg.connect(url, autocommit=True, options=f"-c search_path={schema}") as con:
        return con.execute(statement, params).rowcount


async def test_crash_left_processing_is_requeued_on_open(tmp_path, server, corpus, backend, request):
    """On PostgreSQL the item holds no lease (its process died), so the sweep claims it."""
    data = tmp_path / "data"
    async with open_service(data, server.url) as ks:
        base = await ks.create_base("Docs")
        (item,) = await ks.add_items(base.id, [ItemInput("note", {"content": "crash survivor"})])
        assert await ks.wait_idle(timeout=10)
    # simulate the rows a crash leaves: processing mid-phase, never finished
    assert write_catalogue(backend, request, data,
                           "UPDATE knowledge_item SET status='processing', phase='embedding' WHERE id=%s", (item.id,)) == 1
    async with open_service(data, server.url) as ks:
        assert await ks.wait_idle(timeout=10)
        assert (await ks.get_item(item.id)).status == ItemStatus.COMPLETED
        assert len(await ks.list_item_chunks(base.id, item.id)) == 1  # replaced, not duplicated
        assert await ks.check_invariants() == []


async def test_search_degrades_to_keywords_when_the_query_cannot_be_embedded(tmp_path, server):
    async with open_service(tmp_path / "data", server.url, max_retries=0) as ks:
        base = await ks.create_base("Docs")
        await ks.add_items(base.id, [ItemInput("note", {"content": "Quokkas live on Rottnest island."})])
        assert await ks.wait_idle(timeout=10)
        server.faults.fail(500, times=5)
        response = await ks.search(base.id, "quokkas island")
        assert response.degraded and response.reason
        assert response.results and response.results[0].score_kind == ScoreKind.BM25
        server.faults.clear()


async def test_chunk_operations_check_ownership(tmp_path, server, corpus):
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Docs", chunk_size=32, chunk_overlap=4)
        long_note = " ".join(f"sentence number {i} talks about rivers." for i in range(40))
        (note, other) = await ks.add_items(
            base.id, [ItemInput("note", {"content": long_note}), ItemInput("note", {"content": "lakes"})]
        )
        assert await ks.wait_idle(timeout=10)
        chunks = await ks.list_item_chunks(base.id, note.id)
        assert len(chunks) > 3 and [c.chunk_index for c in chunks] == list(range(len(chunks)))
        with pytest.raises(ValidationError, match="chunk_id"):
            await ks.delete_item_chunk(base.id, other.id, chunks[0].id)
        with pytest.raises(NotFoundError):
            await ks.delete_item_chunk(base.id, note.id, "no-such-chunk")
        await ks.delete_item_chunk(base.id, note.id, chunks[0].id)
        assert [c.id for c in await ks.list_item_chunks(base.id, note.id)] == [c.id for c in chunks[1:]]
        assert await ks.check_invariants() == []


async def test_items_of_another_base_are_refused(tmp_path, server):
    async with open_service(tmp_path / "data", server.url) as ks:
        a = await ks.create_base("A")
        b = await ks.create_base("B")
        (item,) = await ks.add_items(a.id, [ItemInput("note", {"content": "mine"})])
        for call in (ks.delete_items(b.id, [item.id]), ks.reindex_items(b.id, [item.id]),
                     ks.list_item_chunks(b.id, item.id)):
            with pytest.raises(ValidationError, match="another knowledge base"):
                await call
        assert await ks.wait_idle(timeout=10)


def block_the_next_chunk_table(request) -> None:
    import psycopg

    url, schema = request.getfixturevalue("postgres_server").url, request.getfixturevalue("pg_schema")
    with psycopg.connect(url, autocommit=True, options=f"-c search_path={schema}") as con:
        row = con.execute("SELECT last_value, is_called FROM ktui_chunk_table_seq").fetchone()
        assert row is not None
        con.execute(f"CREATE TABLE chunk_{row[0] + 1 if row[1] else row[0]} (squatter int)")


async def test_create_base_rolls_back_when_the_store_cannot_be_created(tmp_path, server, backend, request):
    """SQLite: a file where bases/ should be. PostgreSQL: a table already holds the name
    the next base's chunk table gets (the names' sequence exists once a base does)."""
    data = tmp_path / "data"
    async with open_service(data, server.url) as ks:
        kept = 0
        if backend == "postgres":
            await ks.create_base("Kept")
            kept = 1
            block_the_next_chunk_table(request)
        else:
            if (data / "bases").exists():
                (data / "bases").rmdir()
            (data / "bases").write_text("a file where the stores directory should be")
        with pytest.raises(StoreError):
            await ks.create_base("Doomed")
        assert (await ks.list_bases()).total == kept


async def test_similar_items_ranks_related_items_first(tmp_path, server):
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Fruit")
        apple, pie, car = await ks.add_items(base.id, [
            ItemInput("note", {"content": "Apples grow on apple trees in orchards."}),
            ItemInput("note", {"content": "Apple pie is baked with apples from the orchards."}),
            ItemInput("note", {"content": "Diesel engines power heavy trucks on highways."}),
        ])
        assert await ks.wait_idle(timeout=10)
        result = await ks.similar_items(base.id, apple.id)
        assert not result.degraded
        assert [m.candidate.id for m in result.matches][:2] == [pie.id, car.id]
        assert apple.id not in {m.candidate.id for m in result.matches}
        calls = server.request_count
        again = await ks.similar_items(base.id, car.id)  # every text is cached: no embedding call
        assert server.request_count == calls
        assert {m.candidate.id for m in again.matches} == {apple.id, pie.id}  # every other leaf, ranked


async def test_a_data_directory_is_used_by_one_process_at_a_time(tmp_path, server):
    data = tmp_path / "data"
    async with open_service(data, server.url):
        with pytest.raises(InvalidOperationError, match="in use"):
            async with open_service(data, server.url):
                pass
    async with open_service(data, server.url) as ks:  # released on close
        assert (await ks.list_bases()).total == 0


async def test_leaves_that_finish_together_share_one_group_commit(tmp_path, server):
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Group")
        store = await ks._runtime.store(base)
        commits: list[int] = []
        real = store.replace_items

        def counting(entries, **joined):  # a spy: the real write runs, we only count transactions
            commits.append(len(entries))  # (on PostgreSQL it joins the completion's: con=)
            return real(entries, **joined)

        store.replace_items = counting
        lock = ks._runtime.lock(base.id)
        await lock.acquire()  # as if a long write were running
        items = await ks.add_items(base.id, [ItemInput("note", {"content": f"note {i} on commits"}) for i in range(5)])

        async def all_waiting():
            writer = ks._runtime.indexer.chunk_writes.get(base.id)
            return writer is not None and writer.waiting == 5

        await wait_for(all_waiting)
        deleting = asyncio.ensure_future(ks.delete_items(base.id, [items[0].id]))  # interrupts one of them

        async def interrupted():  # a condition, not a pause: the delete has reached the queue
            task = ks._runtime.queue._running.get(items[0].id)
            return task is not None and task.token.interrupted

        await wait_for(interrupted)
        lock.release()
        await deleting
        assert await ks.wait_idle(timeout=10)
        assert commits == [4]  # one transaction for the four survivors; the interrupted one never written
        survivors = [await ks.get_item(i.id) for i in items[1:]]
        assert {i.status for i in survivors} == {ItemStatus.COMPLETED}
        assert store.item_ids() == {i.id for i in items[1:]}
        assert await ks.check_invariants() == []


async def _silent_server():
    """A server on 127.0.0.1 that accepts connections and never answers."""
    held = []

    async def accept(reader, writer):
        held.append(writer)  # keep the socket open, say nothing

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/page", held


async def test_a_fetch_that_never_answers_does_not_hold_a_delete_or_a_shutdown(tmp_path, server):
    silent, url, held = await _silent_server()
    data = tmp_path / "data"
    try:
        async with open_service(data, server.url) as ks:  # fetch timeout: the default 30 s
            base = await ks.create_base("Slow web")
            (gone,) = await ks.add_items(base.id, [ItemInput("url", {"url": url})])
            await wait_for(lambda: _phase_is(ks, gone.id, ItemPhase.READING))
            loop = asyncio.get_running_loop()
            start = loop.time()
            await ks.delete_items(base.id, [gone.id])  # interrupts the fetch itself
            assert loop.time() - start < 5
            (kept,) = await ks.add_items(base.id, [ItemInput("url", {"url": url})])
            await wait_for(lambda: _phase_is(ks, kept.id, ItemPhase.READING))
            start = loop.time()
        assert loop.time() - start < 5  # closing did not wait out the fetch either
        async with open_service(data, server.url) as ks:
            item = await ks.get_item(kept.id)
            # the shutdown said why, and the reopened service took the item up again
            assert item.status == ItemStatus.PROCESSING or item.error == SHUTDOWN_MESSAGE
            await ks.delete_items(base.id, [kept.id])
    finally:
        for writer in held:
            writer.close()
        silent.close()


async def test_create_base_refuses_a_width_the_model_does_not_answer(tmp_path, server):
    from ktui.core.config import ProviderConfig
    from tests.support.services import fake_settings

    providers = dict(fake_settings(tmp_path, server.url).providers)
    providers["dead"] = ProviderConfig(name="dead", kind="openai", base_url="http://127.0.0.1:9/v1", max_retries=0)
    async with open_service(tmp_path / "data", server.url, providers=providers) as ks:
        with pytest.raises(ValidationError, match=f"answers {DIMS}-dimensional vectors, not {DIMS + 1}"):
            await ks.create_base("Too wide", dimensions=DIMS + 1)
        assert (await ks.list_bases()).total == 0  # nothing was created
        assert (await ks.create_base("Right", dimensions=DIMS)).dimensions == DIMS
        # a server that cannot be reached now cannot be asked: the given width is taken
        assert (await ks.create_base("Offline", "dead::model", dimensions=768)).dimensions == 768


async def test_a_rerank_model_must_name_a_configured_rerank_provider(tmp_path, server):
    async with open_service(tmp_path / "data", server.url) as ks:
        for model, why in (("nope::reranker", "unknown provider 'nope'"),
                           ("fake::deterministic", "is a openai provider, not a rerank provider")):
            with pytest.raises(ValidationError, match=why) as info:
                await ks.create_base("Reranked", rerank_model_id=model)
            assert info.value.errors.keys() == {"rerank_model_id"}
        base = await ks.create_base("Plain")
        with pytest.raises(ValidationError, match="not a rerank provider"):
            await ks.update_base(base.id, {"rerank_model_id": "builtin::wordllama"})
        assert (await ks.get_base(base.id)).rerank_model_id is None
        assert (await ks.update_base(base.id, {"rerank_model_id": None})).rerank_model_id is None


async def test_the_same_source_is_not_added_twice_to_one_base(tmp_path, server, corpus):
    page = "https://example.org/page"
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Once")
        other = await ks.create_base("Elsewhere")
        notes = corpus / "notes.txt"
        await ks.add_items(base.id, [ItemInput("file", {"path": str(notes)})])
        with pytest.raises(ValidationError, match="already in this base") as info:
            await ks.add_items(base.id, [ItemInput("note", {"content": "fine"}),
                                         ItemInput("file", {"path": str(corpus / "guide" / ".." / "notes.txt")})])
        assert info.value.errors.keys() == {"items[1].data.path"}
        with pytest.raises(ValidationError, match=r"given twice \(also items\[0\]\)"):
            await ks.add_items(base.id, [ItemInput("url", {"url": page}), ItemInput("url", {"url": page})])
        assert len((await ks.list_items(base.id)).items) == 1  # nothing of a refused call was added
        # another base, and notes, may repeat
        await ks.add_items(other.id, [ItemInput("file", {"path": str(notes)})])
        await ks.add_items(base.id, [ItemInput("note", {"content": "same"}), ItemInput("note", {"content": "same"})])
        assert len((await ks.list_items(base.id)).items) == 3
        await ks.wait_idle(timeout=20)


async def test_a_path_inside_a_folder_of_the_base_is_not_read_twice(tmp_path, server, corpus):
    """Found trying the CLI on a real folder: a file of an added folder, added again, came
    back twice in every search. A path inside a folder of the base, a folder holding a
    path of the base, and both in one call are refused, each naming the other."""
    guide = corpus / "guide"
    (corpus / "guide-extra").mkdir()
    (corpus / "guide-extra" / "x.md").write_text("# Extra\n\nbeside the guide, not inside it\n")
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Folders")
        await ks.add_items(base.id, [ItemInput("directory", {"path": str(guide)})])
        inner = next(p for p in guide.rglob("*") if p.is_file())
        with pytest.raises(ValidationError, match="inside the folder") as info:
            await ks.add_items(base.id, [ItemInput("file", {"path": str(inner)})])
        assert str(guide) in info.value.errors["items[0].data.path"]
        with pytest.raises(ValidationError, match="a folder holding"):
            await ks.add_items(base.id, [ItemInput("directory", {"path": str(corpus)})])
        # a sibling whose name starts like the folder's is not inside it
        await ks.add_items(base.id, [ItemInput("directory", {"path": str(corpus / "guide-extra")})])
        other = await ks.create_base("One call")
        with pytest.raises(ValidationError, match=r"inside the folder items\[0\]") as info:
            await ks.add_items(other.id, [ItemInput("directory", {"path": str(corpus)}),
                                          ItemInput("file", {"path": str(corpus / "notes.txt")})])
        assert info.value.errors.keys() == {"items[1].data.path"}
        assert (await ks.list_items(other.id)).items == []  # nothing of a refused call was added
        await ks.add_items(other.id, [ItemInput("file", {"path": str(corpus / "notes.txt")})])
        with pytest.raises(ValidationError, match="a folder holding"):
            await ks.add_items(other.id, [ItemInput("directory", {"path": str(corpus)})])
        assert await ks.wait_idle(timeout=30)
