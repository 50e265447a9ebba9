"""Exports with vectors (`export_bases(vectors=True)`) through the facade, on both backends.

The `index` restores a base for the same model and width without embedding; a document
whose index is damaged is refused for that base alone and leaves nothing behind (all or
nothing); importing one document twice (`again`) makes two independent copies; a base
being indexed is not exported with vectors.
"""

from __future__ import annotations

import base64
import copy

import pytest

from ktui.core.errors import InvalidOperationError
from ktui.core.models import ItemInput, ItemStatus
from tests.support.embedding_server import embedding_server_fixture
from tests.support.facades import BACKENDS, backend_overrides
from tests.support.services import open_service, write_files

DIMS = 24
server = embedding_server_fixture(DIMS)


@pytest.fixture(params=BACKENDS)
def backend(request):
    return backend_overrides(request.param, request)


async def _exported(ks, tmp_path):
    docs = write_files(tmp_path / "docs", {"a.md": "# Alpha\nzebras graze on savanna grass " * 20,
                                           "sub/b.txt": "otters juggle pebbles in the river " * 20})
    base = await ks.create_base("Field", chunk_size=24, chunk_overlap=4)
    await ks.add_items(base.id, [ItemInput("directory", {"path": str(docs)}), ItemInput("note", {"content": "penguins"})])
    assert await ks.wait_idle(timeout=60)
    return base, await ks.export_bases([base.id], vectors=True)


async def test_a_damaged_index_refuses_its_base_only_and_leaves_nothing(server, tmp_path, backend):  # noqa: F811
    async with open_service(tmp_path / "d", server.url, **backend) as ks:
        base, doc = await _exported(ks, tmp_path)
        (entry,) = doc["bases"]
        index = entry["index"]
        assert index["dimensions"] == DIMS and len(index["items"]) == 5 and len(index["chunks"]) > 5
        damages = ("short vector", "unknown item", "orphan child", "folder without source", "file size as text",
                   "watch as a number")
        for damage in damages:
            bad = copy.deepcopy(doc)
            chunks, items = bad["bases"][0]["index"]["chunks"], bad["bases"][0]["index"]["items"]
            if damage == "short vector":
                chunks[-1]["vector"] = base64.b64encode(b"\0" * 8).decode()
            elif damage == "unknown item":
                chunks[0]["item_id"] = "nobody"
            elif damage == "orphan child":
                next(i for i in items if i["group_id"] is not None)["group_id"] = "nobody"
            elif damage == "folder without source":  # every later listing of the base would raise
                del next(i for i in items if i["type"] == "directory")["data"]["source"]
            elif damage == "file size as text":
                next(i for i in items if i["type"] == "file")["data"]["size"] = "big"
            else:
                next(i for i in items if i["type"] == "directory")["data"]["watch"] = 1
            before = {b.id for b in (await ks.list_bases(limit=100)).items}
            report = await ks.import_bases(bad, again=True)
            (b,) = report.bases
            assert b.status == "error" and "index" in b.reason, damage
            if damage in ("folder without source", "file size as text", "watch as a number"):
                expected = {"folder without source": "needs 'source'", "file size as text": "'size' must be a whole",
                            "watch as a number": "'watch' must be true or false"}[damage]
                assert ".data" in b.reason and expected in b.reason, b.reason
            assert {b.id for b in (await ks.list_bases(limit=100)).items} == before, damage
        assert await ks.check_invariants() == []


async def test_one_document_imported_twice_makes_two_independent_copies(server, tmp_path, backend):  # noqa: F811
    async with open_service(tmp_path / "t", server.url, **backend) as ks:
        base, doc = await _exported(ks, tmp_path)
        first = (await ks.import_bases(doc, again=True)).bases[0]
        second = (await ks.import_bases(doc, again=True)).bases[0]
        assert first.vectors == second.vectors == len(doc["bases"][0]["index"]["chunks"])
        assert first.base_id != second.base_id
        hits = [(await ks.search(b, "otters juggle", top_k=3)).results for b in (base.id, first.base_id, second.base_id)]
        assert [r.page_content for r in hits[0]] == [r.page_content for r in hits[1]] == [r.page_content for r in hits[2]]
        assert [round(r.score, 5) for r in hits[0]] == [round(r.score, 5) for r in hits[1]]
        items = await ks.list_items(first.base_id, group_id=None, limit=100)
        assert {i.status for i in items.items} == {ItemStatus.COMPLETED}
        await ks.delete_base(first.base_id)  # the copies share nothing: the other still answers
        assert (await ks.search(second.base_id, "otters juggle", top_k=3)).results
        assert await ks.check_invariants() == []


async def test_a_base_being_indexed_is_not_exported_with_vectors(server, tmp_path):  # noqa: F811
    from ktui.core.data.item_validation import validate_item_input

    async with open_service(tmp_path / "b", server.url) as ks:
        base = await ks.create_base("Busy")
        # an item `processing` that no task works on (as a crash leaves it): no timing involved
        await ks._state.create_roots(base.id, [validate_item_input(ItemInput("note", {"content": "slow"}), "n")])
        with pytest.raises(InvalidOperationError, match="being indexed"):
            await ks.export_bases([base.id], vectors=True)
        assert (await ks.export_bases([base.id]))["bases"][0]["items"]  # without vectors it works
