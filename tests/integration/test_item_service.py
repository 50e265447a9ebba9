"""The item table (ItemWrites: reads and writes) on a real catalogue, SQLite and PostgreSQL alike: creation, listing (filters, roots,
paging, order), status rules, collapse_to_roots, deletes."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

import ktui.core.data.item_writes as item_writes_module
import ktui.core.ids as idsmod
from ktui.core.data.item_service import ChildSpec
from ktui.core.data.item_validation import validate_item_input
from ktui.core.data.validation import ValidItem
from ktui.core.errors import NotFoundError, ValidationError
from ktui.core.models import (
    ANY_GROUP,
    DirectoryItemData,
    FileItemData,
    ItemInput,
    ItemPhase,
    ItemStatus,
    ItemType,
    NoteItemData,
    SitemapItemData,
    UrlItemData,
)
from tests.support.catalogues import catalogue_fixture

db = catalogue_fixture()


@pytest.fixture
async def base(bases):
    return await bases.create(name="B", embedding_model_id="builtin::wordllama", dimensions=8)


def note(text: str = "n") -> ValidItem:
    return ValidItem(ItemType.NOTE, NoteItemData(content=text, source="note"))


def file_spec(name: str) -> ChildSpec:
    return ChildSpec(ItemType.FILE, FileItemData(path=f"/d/{name}", source=f"/d/{name}"))


def directory(path: str = "/d") -> ValidItem:
    return ValidItem(ItemType.DIRECTORY, DirectoryItemData(path=path, source=path))


def sitemap() -> ValidItem:
    return ValidItem(ItemType.SITEMAP, SitemapItemData(url="https://x.org/sitemap.xml", source="https://x.org/sitemap.xml"))


async def snapshot(db) -> list[tuple]:
    return [tuple(r) for r in await db.fetchall("SELECT * FROM knowledge_item ORDER BY id")]


# --- creation -----------------------------------------------------------------------


async def test_create_roots_start_queued(items, base):
    created = await items.create_roots(base.id, [note("a"), directory(), sitemap()])
    assert [i.type for i in created] == [ItemType.NOTE, ItemType.DIRECTORY, ItemType.SITEMAP]
    assert all(i.status is ItemStatus.PROCESSING and i.phase is None and i.error is None for i in created)
    assert all(i.base_id == base.id and i.group_id is None and i.is_root for i in created)
    assert [await items.get(i.id) for i in created] == created


async def test_imported_items_can_start_idle(items, base):
    created = await items.create_roots(base.id, [note()], status=ItemStatus.IDLE)
    assert created[0].status is ItemStatus.IDLE


async def test_create_roots_in_unknown_base_writes_nothing(items, db):
    with pytest.raises(NotFoundError, match="Knowledge base"):
        await items.create_roots("ghost", [note()])
    assert await snapshot(db) == []


async def test_payloads_round_trip_per_type(items, base, tmp_path):
    (tmp_path / "f.txt").write_text("x")
    inputs = [
        ItemInput("file", {"path": str(tmp_path / "f.txt")}),
        ItemInput("url", {"url": "https://example.com/a"}),
        ItemInput("note", {"content": "body 🚀\x00", "source_url": "https://example.com/src"}),
        ItemInput("note", {"content": "plain"}),
        ItemInput("directory", {"path": str(tmp_path), "watch": True}),
        ItemInput("sitemap", {"url": "https://example.com/sitemap.xml"}),
    ]
    created = await items.create_roots(base.id, [validate_item_input(i) for i in inputs])
    fetched = [await items.get(i.id) for i in created]
    assert [i.data for i in fetched] == [
        FileItemData(path=str(tmp_path / "f.txt"), source=str(tmp_path / "f.txt")),
        UrlItemData(url="https://example.com/a", source="https://example.com/a"),
        NoteItemData(content="body 🚀\x00", source="https://example.com/src", source_url="https://example.com/src"),
        NoteItemData(content="plain", source="note"),
        DirectoryItemData(path=str(tmp_path), source=str(tmp_path), watch=True),
        SitemapItemData(url="https://example.com/sitemap.xml", source="https://example.com/sitemap.xml"),
    ]
    assert fetched[3].source == "note" and fetched[0].display_name == "f.txt"


@pytest.mark.skipif(os.name != "posix", reason="non-UTF-8 file names are a POSIX thing")
async def test_a_non_utf8_file_name_is_stored_exactly(items, base, tmp_path):
    raw = os.fsencode(str(tmp_path)) + b"/r\xe9sum\xe9.txt"
    with open(raw, "wb") as fh:
        fh.write(b"x")
    valid = validate_item_input(ItemInput("file", {"path": os.fsdecode(raw)}))
    (created,) = await items.create_roots(base.id, [valid])
    assert os.fsencode((await items.get(created.id)).data.path) == raw


async def test_create_children_nested_parents_first(items, base):
    (root,) = await items.create_roots(base.id, [directory()])
    created = await items.create_children(
        base.id,
        root.id,
        [file_spec("a"), ChildSpec(ItemType.DIRECTORY, DirectoryItemData(path="/d/sub", source="/d/sub"),
                                   [file_spec("sub/b"), file_spec("sub/c")])],
    )
    by_source = {i.source: i for i in created}
    assert by_source["/d/a"].group_id == root.id
    assert by_source["/d/sub"].group_id == root.id
    assert by_source["/d/sub/b"].group_id == by_source["/d/sub"].id
    position = {i.id: n for n, i in enumerate(created)}
    assert position[by_source["/d/sub"].id] < position[by_source["/d/sub/b"].id]
    assert all(i.status is ItemStatus.PROCESSING and i.phase is None for i in created)


async def test_children_only_under_a_container_of_the_same_base(items, bases, base, db):
    other = await bases.create(name="Other", embedding_model_id="builtin::wordllama", dimensions=8)
    (leaf,) = await items.create_roots(base.id, [note()])
    (foreign_dir,) = await items.create_roots(other.id, [directory()])
    before = await snapshot(db)
    with pytest.raises(ValidationError, match="directory or sitemap"):
        await items.create_children(base.id, leaf.id, [file_spec("x")])
    with pytest.raises(ValidationError, match="another knowledge base"):
        await items.create_children(base.id, foreign_dir.id, [file_spec("x")])
    with pytest.raises(NotFoundError):
        await items.create_children(base.id, "ghost", [file_spec("x")])
    assert await snapshot(db) == before


# --- reads, filters, paging ------------------------------------------------------------


async def _mixed(items, base):
    roots = await items.create_roots(base.id, [note("1"), directory(), note("2"), sitemap()])
    kids = await items.create_children(base.id, roots[1].id, [file_spec("a"), file_spec("b")])
    pages = await items.create_children(
        base.id, roots[3].id, [ChildSpec(ItemType.URL, UrlItemData(url="https://x.org/p", source="https://x.org/p"))]
    )
    return roots, kids, pages


async def test_list_items_roots_only_by_default(items, base):
    roots, kids, pages = await _mixed(items, base)
    page = await items.list_page(base.id)
    assert {i.id for i in page.items} == {i.id for i in roots} and page.total == 4
    assert all(i.group_id is None for i in page.items)


async def test_list_items_by_group_and_any_group(items, base):
    roots, kids, pages = await _mixed(items, base)
    children = await items.list_page(base.id, group_id=roots[1].id)
    assert {i.id for i in children.items} == {i.id for i in kids}
    everything = await items.list_page(base.id, group_id=ANY_GROUP)
    assert everything.total == 7
    assert (await items.list_page(base.id, group_id="not-a-container")).total == 0


async def test_list_items_by_type(items, base):
    roots, kids, pages = await _mixed(items, base)
    assert {i.id for i in (await items.list_page(base.id, type="note")).items} == {roots[0].id, roots[2].id}
    assert (await items.list_page(base.id, type=ItemType.FILE)).total == 0  # files are children here
    assert (await items.list_page(base.id, type="file", group_id=ANY_GROUP)).total == 2
    assert (await items.list_page(base.id, type="url", group_id=roots[3].id)).items == pages
    with pytest.raises(ValidationError) as exc:
        await items.list_page(base.id, type="pdf")
    assert "type" in exc.value.errors


async def test_list_items_of_unknown_base(items):
    with pytest.raises(NotFoundError):
        await items.list_page("ghost")


async def test_list_items_pages_newest_first_with_ties(items, base, monkeypatch):
    monkeypatch.setattr(item_writes_module, "utc_now", lambda: "2026-01-01T00:00:00.000000Z")
    frozen = 1_900_000_000_000 * 1_000_000
    monkeypatch.setattr(idsmod, "time", SimpleNamespace(time_ns=lambda: frozen))
    monkeypatch.setattr(idsmod, "_last_ms", idsmod._last_ms)  # restored afterwards
    monkeypatch.setattr(idsmod, "_seq", idsmod._seq)
    created = []
    for batch in range(3):
        created += await items.create_roots(base.id, [note(f"{batch}-{i}") for i in range(50)])
    assert len({i.created_at for i in created}) == 1
    newest_first = [i.id for i in reversed(created)]
    first = await items.list_page(base.id)
    assert (first.total, first.limit, first.pages) == (150, 20, 8)
    assert [i.id for i in first.items] == newest_first[:20]
    listed = [i.id for p in (1, 2) for i in (await items.list_page(base.id, page=p, limit=100)).items]
    assert listed == newest_first
    with pytest.raises(ValidationError):
        await items.list_page(base.id, limit=101)


async def test_get_unknown_and_malformed_ids(items):
    with pytest.raises(NotFoundError, match="Knowledge item not found: ghost"):
        await items.get("ghost")
    for bad in ("", None, 5, " x", "x" * 500):
        with pytest.raises(ValidationError):
            await items.get(bad)


async def test_descendants_and_leaves(items, base):
    roots, kids, pages = await _mixed(items, base)
    assert {i.id for i in await items.descendants([roots[1].id, roots[3].id])} == {i.id for i in kids + pages}
    leaves = await items.leaves_under([roots[0].id, roots[1].id])
    assert {i.id for i in leaves} == {roots[0].id, *(k.id for k in kids)}
    assert await items.count_by_base() == {base.id: 7}


# --- collapse_to_roots ---------------------------------------------------------------------


async def test_collapse_keeps_the_top_most_selected_items(items, base):
    (top,) = await items.create_roots(base.id, [directory()])
    (mid,) = await items.create_children(base.id, top.id, [ChildSpec(ItemType.DIRECTORY, DirectoryItemData("/d/m", "/d/m"))])
    leaves = await items.create_children(base.id, mid.id, [file_spec("m/a"), file_spec("m/b")])
    (loose,) = await items.create_roots(base.id, [note()])

    assert [i.id for i in await items.collapse_to_roots(base.id, [leaves[0].id, top.id, mid.id])] == [top.id]
    assert [i.id for i in await items.collapse_to_roots(base.id, [leaves[1].id, mid.id])] == [mid.id]
    kept = await items.collapse_to_roots(base.id, [leaves[0].id, leaves[1].id, loose.id])
    assert [i.id for i in kept] == [leaves[0].id, leaves[1].id, loose.id]  # siblings, not ancestors
    assert [i.id for i in await items.collapse_to_roots(base.id, [loose.id, loose.id])] == [loose.id]


async def test_collapse_refuses_foreign_and_unknown_items(items, bases, base):
    other = await bases.create(name="Other", embedding_model_id="builtin::wordllama", dimensions=8)
    (mine,) = await items.create_roots(base.id, [note()])
    (theirs,) = await items.create_roots(other.id, [note()])
    with pytest.raises(ValidationError, match="another knowledge base") as exc:
        await items.collapse_to_roots(base.id, [mine.id, theirs.id])
    assert "item_ids" in exc.value.errors
    with pytest.raises(NotFoundError, match="ghost"):
        await items.collapse_to_roots(base.id, [mine.id, "ghost"])
    for bad in ([], "abc", None, [""], [7]):
        with pytest.raises(ValidationError):
            await items.collapse_to_roots(base.id, bad)


# --- status rules --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "phase", "error"),
    [
        (ItemStatus.IDLE, ItemPhase.READING, None),
        (ItemStatus.IDLE, None, "x"),
        (ItemStatus.COMPLETED, ItemPhase.EMBEDDING, None),
        (ItemStatus.COMPLETED, None, "x"),
        (ItemStatus.PROCESSING, None, "x"),
        (ItemStatus.FAILED, None, None),
        (ItemStatus.FAILED, None, "  "),
        (ItemStatus.FAILED, ItemPhase.READING, "x"),
        (ItemStatus.PROCESSING, ItemPhase.PREPARING, None),  # a note never prepares
    ],
)
async def test_illegal_state_combinations_are_refused(items, base, db, status, phase, error):
    (item,) = await items.create_roots(base.id, [note()])
    before = await snapshot(db)
    with pytest.raises(ValidationError) as exc:
        await items.set_status(item.id, status, phase, error)
    assert set(exc.value.errors) <= {"phase", "error"}
    assert await snapshot(db) == before


@pytest.mark.parametrize("phase", [ItemPhase.READING, ItemPhase.EMBEDDING])
async def test_containers_only_prepare(items, base, phase):
    (d,) = await items.create_roots(base.id, [directory()])
    with pytest.raises(ValidationError, match="file, url and note"):
        await items.set_status(d.id, ItemStatus.PROCESSING, phase)
    (changed,) = await items.set_status(d.id, ItemStatus.PROCESSING, ItemPhase.PREPARING)
    assert changed.phase is ItemPhase.PREPARING


async def test_set_status_on_unknown_item_writes_nothing(items, base, db):
    (item,) = await items.create_roots(base.id, [note()])
    before = await snapshot(db)
    with pytest.raises(NotFoundError, match="ghost"):
        await items.set_status_many([item.id, "ghost"], ItemStatus.COMPLETED)
    assert await snapshot(db) == before
    assert await items.set_status_many([], ItemStatus.COMPLETED) == []


async def test_set_status_returns_exactly_the_changed_items(items, base):
    (top,) = await items.create_roots(base.id, [directory()])
    await items.set_status(top.id, ItemStatus.PROCESSING, ItemPhase.PREPARING)
    (mid,) = await items.create_children(base.id, top.id, [ChildSpec(ItemType.DIRECTORY, DirectoryItemData("/d/m", "/d/m"))])
    a, b = await items.create_children(base.id, mid.id, [file_spec("m/a"), file_spec("m/b")])
    await items.set_status(top.id, ItemStatus.PROCESSING)  # preparation done: top follows its children

    # a phase change alters nobody else
    changed = await items.set_status(a.id, ItemStatus.PROCESSING, ItemPhase.READING)
    assert [(i.id, i.phase) for i in changed] == [(a.id, ItemPhase.READING)]
    # one leaf done, its sibling still queued: the ancestors stay processing (unchanged, not returned)
    changed = await items.set_status(a.id, ItemStatus.COMPLETED)
    assert [i.id for i in changed] == [a.id]
    # the last leaf completes: mid and top complete too, and exactly those three come back
    changed = await items.set_status(b.id, ItemStatus.COMPLETED)
    assert [i.id for i in changed] == [b.id, mid.id, top.id]
    assert all(i.status is ItemStatus.COMPLETED for i in changed)
    assert changed == [await items.get(i) for i in (b.id, mid.id, top.id)]


async def test_set_states_writes_several_phases_in_one_transaction(items, base, db):
    (top,) = await items.create_roots(base.id, [directory()])
    a, b, c = await items.create_children(base.id, top.id, [file_spec("a"), file_spec("b"), file_spec("c")])
    await items.set_status(top.id, ItemStatus.PROCESSING)
    changed = await items.set_states([
        (a.id, ItemStatus.PROCESSING, ItemPhase.READING),
        (b.id, ItemStatus.PROCESSING, ItemPhase.EMBEDDING),
        (c.id, ItemStatus.PROCESSING, ItemPhase.READING),
    ])
    assert {(i.id, i.phase) for i in changed} == {
        (a.id, ItemPhase.READING), (b.id, ItemPhase.EMBEDDING), (c.id, ItemPhase.READING)
    }
    assert [(await items.get(i)).phase for i in (a.id, b.id, c.id)] == [
        ItemPhase.READING, ItemPhase.EMBEDDING, ItemPhase.READING
    ]
    # a leaf finishing in the same group reconciles its parent once everything is terminal
    await items.set_states([(a.id, ItemStatus.COMPLETED, None), (b.id, ItemStatus.COMPLETED, None)])
    changed = await items.set_states([(c.id, ItemStatus.COMPLETED, None)])
    assert [i.id for i in changed] == [c.id, top.id] and changed[1].status is ItemStatus.COMPLETED
    # one unknown id: nothing of the group is written
    before = await snapshot(db)
    with pytest.raises(NotFoundError, match="ghost"):
        await items.set_states([(a.id, ItemStatus.PROCESSING, ItemPhase.READING),
                                ("ghost", ItemStatus.PROCESSING, ItemPhase.READING)])
    assert await snapshot(db) == before


async def test_set_status_can_write_the_payload_too(items, base):
    (f,) = await items.create_roots(base.id, [ValidItem(ItemType.FILE, FileItemData("/a", "/a"))])
    (changed,) = await items.set_status(f.id, ItemStatus.COMPLETED, data=FileItemData("/a", "/a", size=3, sha256="ab"))
    assert changed.data.size == 3 and (await items.get(f.id)).data.sha256 == "ab"
    with pytest.raises(ValidationError):
        await items.set_status(f.id, ItemStatus.COMPLETED, data=NoteItemData("x", "note"))
    updated = await items.update_data(f.id, FileItemData("/a", "/a", size=9))
    assert updated.data.size == 9 and updated.status is ItemStatus.COMPLETED


# --- deletes ------------------------------------------------------------------------------------


async def test_delete_cascades_through_nested_containers(items, base, db):
    (top,) = await items.create_roots(base.id, [directory()])
    created = await items.create_children(
        base.id, top.id,
        [file_spec("a"), ChildSpec(ItemType.DIRECTORY, DirectoryItemData("/d/m", "/d/m"),
                                   [ChildSpec(ItemType.DIRECTORY, DirectoryItemData("/d/m/n", "/d/m/n"), [file_spec("m/n/z")])])],
    )
    (keep,) = await items.create_roots(base.id, [note()])
    mid = next(i for i in created if i.source == "/d/m")
    await items.delete([mid.id])
    remaining = {i.source for i in await items.list_all(base.id)}
    assert remaining == {"/d", "/d/a", "note"}
    await items.delete([top.id])
    assert [i.id for i in await items.list_all(base.id)] == [keep.id]


async def test_deleting_a_base_deletes_its_items(items, bases, base):
    await _mixed(items, base)
    await bases.delete(base.id)
    assert await items.count_by_base() == {}


async def test_delete_ignores_unknown_ids_and_delete_children_keeps_the_container(items, base):
    roots, kids, pages = await _mixed(items, base)
    assert await items.delete(["ghost"]) == []
    assert await items.delete_children(roots[1].id) == 2
    assert await items.children(roots[1].id) == []
    assert (await items.get(roots[1].id)).id == roots[1].id


async def test_set_status_accepts_plain_strings_and_refuses_unknown_values(items, base, db):
    (f,) = await items.create_roots(base.id, [ValidItem(ItemType.FILE, FileItemData("/a", "/a"))])
    (changed,) = await items.set_status(f.id, "processing", "reading")
    assert (changed.status, changed.phase) == (ItemStatus.PROCESSING, ItemPhase.READING)
    before = await snapshot(db)
    for status, phase, error, field in [
        ("done", None, None, "status"),
        (ItemStatus.PROCESSING, "thinking", None, "phase"),
        (ItemStatus.FAILED, None, 42, "error"),
        (None, None, None, "status"),
    ]:
        with pytest.raises(ValidationError) as exc:
            await items.set_status(f.id, status, phase, error)
        assert set(exc.value.errors) == {field}
    assert await snapshot(db) == before


async def test_the_reads_each_engine_spells_its_own_way(items, bases, base):
    """Recovery's rowid pages, the JSON fields of `data` (a dialect hook) and the tree
    queries give the same answers on both backends."""
    watched = ValidItem(ItemType.DIRECTORY, DirectoryItemData(path="/w", source="/w", watch=True))
    (folder, plain, n1, n2) = await items.create_roots(base.id, [watched, directory("/p"), note("a"), note("b")])
    kids = await items.create_children(base.id, folder.id, [file_spec("x"), file_spec("y")])
    assert [d.id for d in await items.watched_directories()] == [folder.id]
    await items.update_data(n1.id, NoteItemData(content="a", source="note", window_overflow={"chunks": 2}))
    assert [i.id for i in await items.over_window(base.id)] == [n1.id]
    assert await items.statuses_below([folder.id]) == {k.id: ItemStatus.PROCESSING for k in kids}
    assert await items.has_children(folder.id) and not await items.has_children(plain.id)
    # unfinished items a page at a time, in creation (rowid) order; roots flagged
    page = await items.unfinished_page(ItemStatus.PROCESSING, 0, 3)
    assert [p[1] for p in page] == [folder.id, plain.id, n1.id] and [p[2] for p in page] == [True] * 3
    rest = await items.unfinished_page(ItemStatus.PROCESSING, page[-1][0], 10)
    assert [p[1] for p in rest] == [n2.id, *(k.id for k in kids)] and [p[2] for p in rest] == [True, False, False]
    await items.set_status(n1.id, ItemStatus.FAILED, error="interrupted by shutdown")
    await items.set_status(n2.id, ItemStatus.FAILED, error="no space left on device: /x")
    await items.set_status(kids[0].id, ItemStatus.FAILED, error="unreadable")
    failed = ItemStatus.FAILED
    assert [p[1] for p in await items.unfinished_page(failed, 0, 10, errors=["interrupted by shutdown"])] == [n1.id]
    assert [p[1] for p in await items.unfinished_page(failed, 0, 10, error_prefix="no space left")] == [n2.id]
    assert [p[1] for p in await items.unfinished_page(
        failed, 0, 10, errors=["unreadable"], error_prefix="no space left")] == [n2.id, kids[0].id]
    assert await items.unfinished_page(failed, 0, 10) == []  # neither errors nor a prefix: none
