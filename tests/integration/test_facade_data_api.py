"""The read/patch Data API and groups on the public facade (`core.service.KnowledgeService`):
list_bases, get_base, update_base, list_items, get_item, and the group calls, against a
real service (catalogue, stores, runtime) and a deterministic embedding server on 127.0.0.1.
The `ks` tests run on both backends (SQLite, and a shared PostgreSQL store:
tests/support/facades.py); the hypothesis fuzz tests (`sync_ks`) on SQLite."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ktui.core.errors import NotFoundError, ValidationError
from ktui.core.models import (
    ANY_GROUP,
    ROOT,
    BaseChanged,
    ItemInput,
    ItemStatus,
    ItemType,
    SearchMode,
)
from tests.support.embedding_server import embedding_server_fixture
from tests.support.facades import BACKENDS, backend_overrides
from tests.support.services import FAKE_MODEL, open_service, write_files

DIMS = 16


server = embedding_server_fixture(DIMS)


@pytest.fixture(params=BACKENDS)
async def ks(request, tmp_path, server):
    async with open_service(tmp_path / "data", server.url, **backend_overrides(request.param, request)) as service:
        yield service


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_files(
        tmp_path / "corpus",
        {
            "a.md": "# Alpha\n\nKites fly in the wind.\n",
            "sub/b.md": "# Beta\n\nBananas are yellow.\n",
            "sub/deeper/c.txt": "Gamma rays are energetic.\n",
        },
    )


def only_field(exc: pytest.ExceptionInfo[ValidationError]) -> str:
    (name,) = exc.value.errors
    return name


# --- bases -------------------------------------------------------------------------------------


async def test_list_bases_pages_newest_first(ks):
    made = [await ks.create_base(f"B{i}", FAKE_MODEL, DIMS) for i in range(23)]
    first = await ks.list_bases()
    assert (first.total, first.page, first.limit, first.pages) == (23, 1, 20, 2)
    assert [b.id for b in first.items] == [b.id for b in reversed(made)][:20]
    second = await ks.list_bases(page=2)
    assert [b.id for b in second.items] == [b.id for b in reversed(made)][20:]
    assert len((await ks.list_bases(limit=100)).items) == 23
    for page, limit in ((0, 20), (1, 0), (1, 101), ("1", 20)):
        with pytest.raises(ValidationError):
            await ks.list_bases(page=page, limit=limit)


async def test_get_base(ks):
    base = await ks.create_base("Docs", FAKE_MODEL, DIMS)
    assert await ks.get_base(base.id) == base
    with pytest.raises(NotFoundError):
        await ks.get_base("no-such-base")
    for bad in (None, "", 42, " id"):
        with pytest.raises(ValidationError) as exc:
            await ks.get_base(bad)
        assert only_field(exc) == "base_id"


async def test_update_base_rules_through_the_facade(ks):
    base = await ks.create_base("Docs", FAKE_MODEL, DIMS)
    assert (base.search_mode, base.hybrid_alpha, base.emoji) == (SearchMode.HYBRID, 0.5, "📁")
    events = ks.subscribe()

    updated = await ks.update_base(base.id, {"search_mode": "bm25", "emoji": "🇫🇷", "threshold": 0.2})
    assert (updated.search_mode, updated.hybrid_alpha, updated.emoji, updated.threshold) == (
        SearchMode.BM25, None, "🇫🇷", 0.2)
    batch = await asyncio.wait_for(events.next_batch(), 5)
    assert BaseChanged(base.id) in batch

    back = await ks.update_base(base.id, {"search_mode": "hybrid", "threshold": None, "emoji": "👩‍👩‍👧"})
    assert (back.hybrid_alpha, back.threshold, back.emoji) == (0.5, None, "👩‍👩‍👧")

    for patch, field in [
        ({"embedding_model_id": "fake::other"}, "embedding_model_id"),
        ({"dimensions": DIMS * 2}, "dimensions"),
        ({"chunk_overlap": back.chunk_size}, "chunk_overlap"),
        ({"threshold": 1.5}, "threshold"),
        ({"document_count": 0}, "document_count"),
        ({"emoji": ""}, "emoji"),
        ({"emoji": " 🚀"}, "emoji"),
        ({"emoji": "🚀🚀"}, "emoji"),
        ({"search_mode": "bm25", "hybrid_alpha": 0.3}, "hybrid_alpha"),
    ]:
        with pytest.raises(ValidationError) as exc:
            await ks.update_base(base.id, patch)
        assert only_field(exc) == field
    assert await ks.get_base(base.id) == back
    with pytest.raises(NotFoundError):
        await ks.update_base("no-such-base", {"name": "x"})


async def test_update_base_has_no_vector_side_effects(ks, corpus):
    base = await ks.create_base("Docs", FAKE_MODEL, DIMS)
    (item,) = await ks.add_items(base.id, [ItemInput("file", {"path": str(corpus / "a.md")})])
    assert await ks.wait_idle(base.id, timeout=20)
    chunks = await ks.list_item_chunks(base.id, item.id)
    assert chunks
    await ks.update_base(base.id, {"chunk_size": 64, "chunk_overlap": 8, "search_mode": "default"})
    assert await ks.list_item_chunks(base.id, item.id) == chunks  # nothing re-chunked or dropped
    assert (await ks.get_item(item.id)).status is ItemStatus.COMPLETED
    assert (await ks.search(base.id, "kites wind")).results


# --- items ------------------------------------------------------------------------------------


async def test_added_items_start_queued_and_reconcile_through_nested_folders(ks, corpus):
    base = await ks.create_base("Docs", FAKE_MODEL, DIMS)
    added = await ks.add_items(
        base.id,
        [ItemInput("directory", {"path": str(corpus)}), ItemInput("note", {"content": "A note about kites."}),
         ItemInput("note", {"content": "Linked", "source_url": "https://example.org/page"})],
    )
    assert all(i.status is ItemStatus.PROCESSING and i.phase is None and i.is_root for i in added)
    assert [i.source for i in added] == [str(corpus), "note", "https://example.org/page"]
    assert await ks.wait_idle(base.id, timeout=30)

    everything = (await ks.list_items(base.id, group_id=ANY_GROUP, limit=100)).items
    assert all(i.status is ItemStatus.COMPLETED for i in everything), [(i.source, i.status, i.error) for i in everything]
    by_source = {i.source: i for i in everything}
    sub, deeper = by_source[str(corpus / "sub")], by_source[str(corpus / "sub" / "deeper")]
    assert deeper.group_id == sub.id and sub.group_id == added[0].id
    assert by_source[str(corpus / "sub" / "deeper" / "c.txt")].group_id == deeper.id


async def test_list_items_filters_roots_group_type_and_pages(ks, corpus):
    base = await ks.create_base("Docs", FAKE_MODEL, DIMS)
    folder, *notes = await ks.add_items(
        base.id, [ItemInput("directory", {"path": str(corpus)})] + [ItemInput("note", {"content": f"n{i}"}) for i in range(25)]
    )
    assert await ks.wait_idle(base.id, timeout=30)

    roots = await ks.list_items(base.id)
    assert (roots.total, len(roots.items), roots.limit) == (26, 20, 20)
    assert roots == await ks.list_items(base.id, group_id=ROOT)
    assert all(i.group_id is None for i in roots.items)
    assert [i.id for i in roots.items] == [i.id for i in reversed([folder, *notes])][:20]  # newest first
    tail = await ks.list_items(base.id, page=2)
    assert [i.id for i in tail.items] == [i.id for i in reversed([folder, *notes])][20:]

    children = await ks.list_items(base.id, group_id=folder.id)
    assert {i.source for i in children.items} == {str(corpus / "a.md"), str(corpus / "sub")}
    assert (await ks.list_items(base.id, type="note")).total == 25
    assert (await ks.list_items(base.id, type="file")).total == 0  # files are not roots here
    assert (await ks.list_items(base.id, type="file", group_id=ANY_GROUP)).total == 3
    assert (await ks.list_items(base.id, type=ItemType.DIRECTORY, group_id=ANY_GROUP)).total == 3
    assert (await ks.list_items(base.id, group_id=ANY_GROUP, limit=100)).total == 26 + 5

    with pytest.raises(ValidationError):
        await ks.list_items(base.id, limit=101)
    with pytest.raises(ValidationError):
        await ks.list_items(base.id, type="pdf")
    with pytest.raises(NotFoundError):
        await ks.list_items("no-such-base")


async def test_get_item(ks):
    base = await ks.create_base("Docs", FAKE_MODEL, DIMS)
    (note,) = await ks.add_items(base.id, [ItemInput("note", {"content": "hello"})])
    assert (await ks.get_item(note.id)).id == note.id
    with pytest.raises(NotFoundError):
        await ks.get_item("no-such-item")
    with pytest.raises(ValidationError):
        await ks.get_item(["x"])


async def test_refused_inputs_create_nothing(ks, tmp_path):
    base = await ks.create_base("Docs", FAKE_MODEL, DIMS)
    for inputs, field in [
        ([ItemInput("file", {"path": str(tmp_path / "missing.md")})], "items[0].data.path"),
        ([ItemInput("note", {"content": "ok"}), ItemInput("url", {"url": "ftp://x"})], "items[1].data.url"),
        ([ItemInput("note", {"content": "x"})] * 101, "items"),
        ([ItemInput("folder", {"path": "."})], "items[0].type"),
    ]:
        with pytest.raises(ValidationError) as exc:
            await ks.add_items(base.id, inputs)
        assert only_field(exc) == field
    assert (await ks.list_items(base.id, group_id=ANY_GROUP)).total == 0


async def test_delete_items_refuses_foreign_and_unknown_ids(ks):
    mine = await ks.create_base("Mine", FAKE_MODEL, DIMS)
    theirs = await ks.create_base("Theirs", FAKE_MODEL, DIMS)
    (a,) = await ks.add_items(mine.id, [ItemInput("note", {"content": "a"})])
    (b,) = await ks.add_items(theirs.id, [ItemInput("note", {"content": "b"})])
    assert await ks.wait_idle(timeout=20)
    with pytest.raises(ValidationError):
        await ks.delete_items(mine.id, [a.id, b.id])
    with pytest.raises(NotFoundError):
        await ks.delete_items(mine.id, ["no-such-item"])
    assert (await ks.get_item(a.id)).status is ItemStatus.COMPLETED


# --- groups -------------------------------------------------------------------------------------


async def test_groups_through_the_facade(ks):
    work = await ks.create_group("Work")
    base = await ks.create_base("Docs", FAKE_MODEL, DIMS, group_id=work.id)
    loose = await ks.create_base("Loose", FAKE_MODEL, DIMS)
    assert base.group_id == work.id and loose.group_id is None
    moved = await ks.update_base(loose.id, {"group_id": work.id})
    assert moved.group_id == work.id
    assert (await ks.rename_group(work.id, "Job")).name == "Job"
    assert [g.name for g in await ks.list_groups()] == ["Job"]
    await ks.delete_group(work.id)
    assert await ks.list_groups() == []
    assert {b.group_id for b in (await ks.list_bases()).items} == {None}  # ungrouped, not deleted
    with pytest.raises(NotFoundError):
        await ks.delete_group(work.id)
    with pytest.raises(ValidationError):
        await ks.create_group("   ")
    with pytest.raises(ValidationError) as exc:
        await ks.update_base(base.id, {"group_id": "no-such-group"})
    assert only_field(exc) == "group_id"


# --- hostile input at the facade ------------------------------------------------------------------

junk = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20), st.binary(max_size=5),
    st.text(alphabet=st.characters(categories=["Cs"]), min_size=1, max_size=2),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    st.just(ANY_GROUP), st.uuids().map(str),
)


@pytest.fixture
def runner():
    with asyncio.Runner() as r:
        yield r


@pytest.fixture
def sync_ks(runner, tmp_path, server):
    context = open_service(tmp_path / "fuzz", server.url)
    service = runner.run(context.__aenter__())
    yield service
    runner.run(context.__aexit__(None, None, None))


def test_facade_data_api_only_raises_validation_or_not_found(runner, sync_ks):
    ks = sync_ks
    base = runner.run(ks.create_base("Docs", FAKE_MODEL, DIMS))

    @settings(max_examples=300)
    @given(a=junk, b=junk, c=junk, which=st.integers(0, 6))
    def run(a, b, c, which):
        calls = [
            lambda: ks.list_bases(a, b),
            lambda: ks.get_base(a),
            lambda: ks.update_base(a, {"name": "x"}),
            lambda: ks.update_base(base.id, {"threshold": a, "document_count": b} if isinstance(c, int) else a),
            lambda: ks.list_items(base.id, type=a, group_id=b, page=c, limit=20),
            lambda: ks.get_item(a),
            lambda: ks.list_items(a),
        ]

        async def go():
            try:
                await calls[which]()
            except (ValidationError, NotFoundError):
                pass
            current = await ks.get_base(base.id)
            assert current.embedding_model_id == FAKE_MODEL and current.dimensions == DIMS

        runner.run(go())

    run()


payload_values = st.one_of(
    junk,
    st.sampled_from(["@FILE", "@DIR", "/no/such/path", "ftp://x", "http://", "https://example.invalid/x",
                     "a\x00b", "x" * 5000, "http://exa mple.com"]),
)
facade_inputs = st.lists(
    st.builds(
        lambda kind, key, value, as_dict: {"type": kind, "data": {key: value}} if as_dict else ItemInput(kind, {key: value}),
        st.one_of(st.sampled_from(["file", "url", "note", "directory", "sitemap"]), junk),
        st.sampled_from(["path", "url", "content", "source_url", "watch", "bogus"]),
        payload_values,
        st.booleans(),
    ),
    max_size=3,
) | junk


def test_facade_add_items_refuses_hostile_payloads_without_writing(runner, sync_ks, tmp_path):
    ks = sync_ks
    base = runner.run(ks.create_base("Docs", FAKE_MODEL, DIMS))
    folder = tmp_path / "real"
    folder.mkdir()
    (folder / "f.md").write_text("# f\n\nfile body\n")

    def resolve(value):
        if isinstance(value, str):
            return value.replace("@FILE", str(folder / "f.md")).replace("@DIR", str(folder))
        return value

    @settings(max_examples=250)
    @given(raw=facade_inputs, target=st.sampled_from(["base", "base", "unknown", "junk"]))
    def run(raw, target):
        if isinstance(raw, list):
            raw = [
                ItemInput(e.type, {k: resolve(v) for k, v in e.data.items()}) if isinstance(e, ItemInput)
                else {"type": e["type"], "data": {k: resolve(v) for k, v in e["data"].items()}}
                if isinstance(e, dict) and isinstance(e.get("data"), dict) else e
                for e in raw
            ]
        base_id = {"base": base.id, "unknown": "no-such-base", "junk": 42}[target]

        async def go():
            before = (await ks.list_items(base.id, group_id=ANY_GROUP, limit=100)).total
            try:
                added = await ks.add_items(base_id, raw)
            except (ValidationError, NotFoundError):
                assert (await ks.list_items(base.id, group_id=ANY_GROUP, limit=100)).total == before
                return
            assert added and all(i.base_id == base.id and i.status is ItemStatus.PROCESSING for i in added)
            await ks.delete_items(base.id, [i.id for i in added])
            assert await ks.wait_idle(base.id, timeout=20)

        runner.run(go())

    run()


async def test_create_base_with_a_group_name_reuses_or_creates_the_group_with_the_base(ks):
    work = await ks.create_group("Work")
    same = await ks.create_base("Docs", FAKE_MODEL, DIMS, group_name="work")  # names match regardless of case
    assert same.group_id == work.id
    fresh = await ks.create_base("Notes", FAKE_MODEL, DIMS, group_name="Home")
    home = await ks.resolve_group("home")
    assert fresh.group_id == home.id and home.name == "Home"
    assert [g.name for g in await ks.list_groups()] == ["Home", "Work"]


async def test_a_refused_base_leaves_no_group_behind(ks):
    with pytest.raises(ValidationError, match="chunk_overlap"):
        await ks.create_base("Bad", FAKE_MODEL, DIMS, group_name="Orphan", chunk_size=100, chunk_overlap=100)
    with pytest.raises(ValidationError, match="group_name"):
        await ks.create_base("Bad", FAKE_MODEL, DIMS, group_name="  ")
    work = await ks.create_group("Work")
    with pytest.raises(ValidationError, match="group_name"):
        await ks.create_base("Both", FAKE_MODEL, DIMS, group_id=work.id, group_name="Work")
    assert [g.name for g in await ks.list_groups()] == ["Work"]
    assert (await ks.list_bases()).total == 0


async def test_update_base_moves_into_a_named_group_and_a_refused_patch_creates_none(ks):
    base = await ks.create_base("Docs", FAKE_MODEL, DIMS)
    moved = await ks.update_base(base.id, {"group_name": "Later"})
    assert moved.group_id == (await ks.resolve_group("Later")).id
    with pytest.raises(ValidationError, match="threshold"):
        await ks.update_base(base.id, {"group_name": "Never", "threshold": 7})
    assert [g.name for g in await ks.list_groups()] == ["Later"]
    with pytest.raises(NotFoundError):
        await ks.resolve_group("Never")
