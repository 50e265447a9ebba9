"""Container reconciliation, bottom-up through nested containers, after child status
changes and after child deletes. The rule (design, Data model):

  own phase set → processing; any child not terminal (idle included) → processing;
  all terminal and any failed → failed "One or more child items failed";
  otherwise, or no children → completed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ktui.core.data.base_writes import BaseWrites
from ktui.core.data.item_service import ChildSpec
from ktui.core.data.item_writes import CHILD_FAILED_MESSAGE, ItemWrites, derive_container_state
from ktui.core.data.validation import ValidItem
from ktui.core.db import Database
from ktui.core.ids import new_id
from ktui.core.models import (
    CONTAINER_TYPES,
    DirectoryItemData,
    FileItemData,
    ItemPhase,
    ItemStatus,
    ItemType,
    KnowledgeItem,
    SitemapItemData,
)

S = ItemStatus


@pytest.fixture
async def base(db):
    return await BaseWrites(db).create(name="B", embedding_model_id="builtin::wordllama", dimensions=8)


def dir_spec(path: str, children=()) -> ChildSpec:
    return ChildSpec(ItemType.DIRECTORY, DirectoryItemData(path, path), list(children))


def leaf(path: str) -> ChildSpec:
    return ChildSpec(ItemType.FILE, FileItemData(path, path))


@dataclass
class Tree:
    top: KnowledgeItem
    mid: KnowledgeItem
    low: KnowledgeItem  # a sitemap three levels down
    top_leaf: KnowledgeItem
    low_a: KnowledgeItem
    low_b: KnowledgeItem


async def build(items: ItemWrites, base_id: str) -> Tree:
    """top(dir) ─┬─ top_leaf
                 └─ mid(dir) ── low(sitemap) ─┬─ low_a
                                              └─ low_b
    Every container has finished preparing; every leaf is queued (processing)."""
    (top,) = await items.create_roots(base_id, [ValidItem(ItemType.DIRECTORY, DirectoryItemData("/t", "/t"))])
    await items.set_status(top.id, S.PROCESSING, ItemPhase.PREPARING)
    created = await items.create_children(base_id, top.id, [leaf("/t/f"), dir_spec("/t/m")])
    src = {i.source: i for i in created}
    (low,) = await items.create_children(
        base_id, src["/t/m"].id, [ChildSpec(ItemType.SITEMAP, SitemapItemData("https://x/s.xml", "https://x/s.xml"))]
    )
    low_a, low_b = await items.create_children(base_id, low.id, [leaf("https://x/a"), leaf("https://x/b")])
    await items.set_status(top.id, S.PROCESSING)
    return Tree(*(await items.get_many([top.id, src["/t/m"].id, low.id, src["/t/f"].id, low_a.id, low_b.id])))


async def states(items, tree: Tree) -> dict[str, tuple]:
    out = {}
    for name in ("top", "mid", "low"):
        item = await items.get(getattr(tree, name).id)
        out[name] = (item.status, item.phase, item.error)
    return out


PROCESSING = (S.PROCESSING, None, None)
COMPLETED = (S.COMPLETED, None, None)
FAILED = (S.FAILED, None, CHILD_FAILED_MESSAGE)


async def test_completion_propagates_bottom_up_through_three_levels(items, base):
    t = await build(items, base.id)
    assert await states(items, t) == {"top": PROCESSING, "mid": PROCESSING, "low": PROCESSING}

    assert [i.id for i in await items.set_status(t.low_a.id, S.COMPLETED)] == [t.low_a.id]
    changed = await items.set_status(t.low_b.id, S.COMPLETED)
    assert [i.id for i in changed] == [t.low_b.id, t.low.id, t.mid.id]  # top still waits for top_leaf
    assert await states(items, t) == {"top": PROCESSING, "mid": COMPLETED, "low": COMPLETED}

    changed = await items.set_status(t.top_leaf.id, S.COMPLETED)
    assert [i.id for i in changed] == [t.top_leaf.id, t.top.id]
    assert await states(items, t) == {"top": COMPLETED, "mid": COMPLETED, "low": COMPLETED}


async def test_a_failed_leaf_fails_every_ancestor_once_all_are_terminal(items, base):
    t = await build(items, base.id)
    await items.set_status(t.low_a.id, S.FAILED, error="HTTP 500")
    assert (await states(items, t))["low"] == PROCESSING  # low_b is still queued
    await items.set_status(t.top_leaf.id, S.COMPLETED)
    changed = await items.set_status(t.low_b.id, S.COMPLETED)
    assert [i.id for i in changed] == [t.low_b.id, t.low.id, t.mid.id, t.top.id]
    assert await states(items, t) == {"top": FAILED, "mid": FAILED, "low": FAILED}
    assert all(i.error == "One or more child items failed" for i in changed[1:])

    # reindexing the failed leaf puts the whole chain back to processing...
    changed = await items.set_status(t.low_a.id, S.PROCESSING)
    assert [i.id for i in changed] == [t.low_a.id, t.low.id, t.mid.id, t.top.id]
    assert await states(items, t) == {"top": PROCESSING, "mid": PROCESSING, "low": PROCESSING}
    # ...and success completes it
    await items.set_status(t.low_a.id, S.COMPLETED)
    assert await states(items, t) == {"top": COMPLETED, "mid": COMPLETED, "low": COMPLETED}


async def test_an_idle_child_keeps_its_ancestors_processing(items, base):
    t = await build(items, base.id)
    for i in (t.low_a, t.low_b, t.top_leaf):
        await items.set_status(i.id, S.COMPLETED)
    assert (await states(items, t))["top"] == COMPLETED
    changed = await items.set_status(t.low_b.id, S.IDLE)
    assert [i.id for i in changed] == [t.low_b.id, t.low.id, t.mid.id, t.top.id]
    assert await states(items, t) == {"top": PROCESSING, "mid": PROCESSING, "low": PROCESSING}


async def test_own_phase_wins_over_children(items, base):
    t = await build(items, base.id)
    for i in (t.low_a, t.low_b, t.top_leaf):
        await items.set_status(i.id, S.COMPLETED)
    # the middle directory is re-prepared (a rescan): processing/preparing, its parent follows
    changed = await items.set_status(t.mid.id, S.PROCESSING, ItemPhase.PREPARING)
    assert [i.id for i in changed] == [t.mid.id, t.top.id]
    assert await states(items, t) == {
        "top": PROCESSING, "mid": (S.PROCESSING, ItemPhase.PREPARING, None), "low": COMPLETED}
    # a child finishing while the container still prepares does not complete it
    await items.set_status(t.low_a.id, S.PROCESSING)
    await items.set_status(t.low_a.id, S.COMPLETED)
    assert (await states(items, t))["mid"] == (S.PROCESSING, ItemPhase.PREPARING, None)
    # preparing done: the container takes its state from its children at once
    changed = await items.set_status(t.mid.id, S.PROCESSING)
    assert [(i.id, i.status) for i in changed] == [(t.mid.id, S.COMPLETED), (t.top.id, S.COMPLETED)]


async def test_a_container_without_children_completes(items, base):
    (d,) = await items.create_roots(base.id, [ValidItem(ItemType.DIRECTORY, DirectoryItemData("/e", "/e"))])
    await items.set_status(d.id, S.PROCESSING, ItemPhase.PREPARING)
    (done,) = await items.set_status(d.id, S.PROCESSING)  # expansion found nothing
    assert (done.status, done.phase, done.error) == COMPLETED


async def test_deleting_the_failed_child_completes_the_chain(items, base):
    t = await build(items, base.id)
    await items.set_status(t.low_a.id, S.FAILED, error="boom")
    await items.set_status(t.low_b.id, S.COMPLETED)
    await items.set_status(t.top_leaf.id, S.COMPLETED)
    assert (await states(items, t))["top"] == FAILED
    changed = await items.delete([t.low_a.id])
    assert [i.id for i in changed] == [t.low.id, t.mid.id, t.top.id]
    assert await states(items, t) == {"top": COMPLETED, "mid": COMPLETED, "low": COMPLETED}


async def test_deleting_the_last_pending_child_completes_its_ancestors(items, base):
    t = await build(items, base.id)
    await items.set_status(t.low_a.id, S.COMPLETED)
    await items.set_status(t.top_leaf.id, S.COMPLETED)
    changed = await items.delete([t.low_b.id])  # the only non-terminal leaf
    assert [i.id for i in changed] == [t.low.id, t.mid.id, t.top.id]
    assert await states(items, t) == {"top": COMPLETED, "mid": COMPLETED, "low": COMPLETED}


async def test_deleting_a_nested_container_reconciles_its_parent(items, base):
    t = await build(items, base.id)
    await items.set_status(t.top_leaf.id, S.COMPLETED)
    changed = await items.delete([t.mid.id])  # takes low, low_a, low_b with it
    assert [i.id for i in changed] == [t.top.id]
    assert (await items.get(t.top.id)).status is S.COMPLETED
    assert await items.get_many([t.mid.id, t.low.id, t.low_a.id, t.low_b.id]) == []


async def test_deleting_every_child_leaves_a_completed_container(items, base):
    t = await build(items, base.id)
    await items.set_status(t.low_a.id, S.FAILED, error="x")
    await items.set_status(t.low_b.id, S.FAILED, error="y")
    assert (await states(items, t))["low"] == FAILED
    changed = await items.delete([t.low_a.id, t.low_b.id])
    assert t.low.id in [i.id for i in changed]
    assert (await states(items, t))["low"] == COMPLETED


async def test_deleting_a_child_and_its_ancestor_together(items, base):
    t = await build(items, base.id)
    changed = await items.delete([t.low_a.id, t.mid.id])
    assert [i.id for i in changed] == []  # top still waits for top_leaf: unchanged, not returned
    assert (await items.get(t.top.id)).status is S.PROCESSING
    assert await items.get_many([t.low.id]) == []


async def test_siblings_reconciled_in_one_batch(items, base):
    t = await build(items, base.id)
    changed = await items.set_status_many([t.low_a.id, t.low_b.id, t.top_leaf.id], S.COMPLETED)
    assert {i.id for i in changed} == {t.low_a.id, t.low_b.id, t.top_leaf.id, t.low.id, t.mid.id, t.top.id}
    assert len(changed) == 6
    assert all(i.status is S.COMPLETED for i in changed)


async def test_an_ancestor_flipped_and_flipped_back_is_not_reported(items, base):
    """Re-finishing an empty sub-folder reconciles both the sub-folder and its parent;
    whichever walk runs first, the parent ends as it began and must not be returned
    (found by the model-based test below; set order varies, so try many trees)."""
    for n in range(20):
        (top,) = await items.create_roots(base.id, [ValidItem(ItemType.DIRECTORY, DirectoryItemData(f"/{n}", f"/{n}"))])
        (empty,) = await items.create_children(base.id, top.id, [dir_spec(f"/{n}/empty")])
        await items.set_status(empty.id, S.PROCESSING)
        assert (await items.get(top.id)).status is S.COMPLETED
        changed = await items.set_status(empty.id, S.PROCESSING)
        assert [(i.id, i.status) for i in changed] == [(empty.id, S.COMPLETED)]


@pytest.mark.parametrize(
    ("phase", "counts", "expected"),
    [
        ("preparing", {"failed": 3}, ("processing", "preparing", None)),
        (None, {}, ("completed", None, None)),
        (None, {"idle": 1}, ("processing", None, None)),
        (None, {"processing": 1, "failed": 1}, ("processing", None, None)),
        (None, {"completed": 4, "failed": 1}, ("failed", None, CHILD_FAILED_MESSAGE)),
        (None, {"completed": 4}, ("completed", None, None)),
    ],
)
def test_derive_container_state(phase, counts, expected):
    assert derive_container_state(phase, counts) == expected


# --- model-based: random trees, random operations ----------------------------------------

LEAF_STATES = [
    (S.IDLE, None, None),
    (S.PROCESSING, None, None),
    (S.PROCESSING, ItemPhase.READING, None),
    (S.PROCESSING, ItemPhase.EMBEDDING, None),
    (S.COMPLETED, None, None),
    (S.FAILED, None, "read error"),
]

# a tree shape: a list of nodes, each either "leaf" or a list (a container with children)
shapes = st.recursive(
    st.just("leaf"), lambda kids: st.lists(kids, min_size=0, max_size=3), max_leaves=12
).filter(lambda s: isinstance(s, list))

operations = st.lists(
    st.tuples(st.sampled_from(["leaf", "many", "container", "delete", "delete_many"]), st.integers(0, 10_000),
              st.integers(0, 10_000)),
    min_size=1,
    max_size=12,
)


def expected_state(item: KnowledgeItem, children: list[KnowledgeItem]) -> tuple:
    status, phase, error = derive_container_state(
        item.phase.value if item.phase else None,
        {s.value: sum(1 for c in children if c.status is s) for s in S},
    )
    return (S(status), ItemPhase(phase) if phase else None, error)


@pytest.fixture
def runner():
    with asyncio.Runner() as r:
        yield r


@pytest.fixture
def sync_db(runner, tmp_path):
    database = runner.run(Database.open(tmp_path / "model"))
    yield database
    runner.run(database.close())


@settings(max_examples=200)
@given(shape=shapes, ops=operations)
def test_every_container_always_matches_the_rule(runner, sync_db, shape, ops):
    items = ItemWrites(sync_db)

    async def scenario():
        base = await BaseWrites(sync_db).create(name=f"M {new_id()}", embedding_model_id="p::m", dimensions=2)
        (root,) = await items.create_roots(base.id, [ValidItem(ItemType.DIRECTORY, DirectoryItemData("/r", "/r"))])

        def specs(node, path):
            return [dir_spec(f"{path}/{n}", specs(c, f"{path}/{n}")) if isinstance(c, list) else leaf(f"{path}/{n}")
                    for n, c in enumerate(node)]

        await items.create_children(base.id, root.id, specs(shape, "/r"))
        all_items = await items.list_all(base.id)
        for container in sorted((i for i in all_items if i.type in CONTAINER_TYPES),
                                key=lambda i: -i.source.count("/")):
            await items.set_status(container.id, S.PROCESSING)  # "prepared": follows its children

        async def check(before: dict[str, KnowledgeItem], returned: list[KnowledgeItem], targets: set[str]):
            now = {i.id: i for i in await items.list_all(base.id)}
            for item in now.values():
                if item.type in CONTAINER_TYPES:
                    kids = [c for c in now.values() if c.group_id == item.id]
                    assert (item.status, item.phase, item.error) == expected_state(item, kids), item
            moved = {i for i, item in now.items()
                     if i in before and (item.status, item.phase, item.error)
                     != (before[i].status, before[i].phase, before[i].error)}
            assert moved <= {i.id for i in returned} <= moved | targets
            assert len(returned) == len({i.id for i in returned})
            for item in returned:  # what comes back is the stored state
                assert item == now[item.id]

        await check({}, [], set())
        for kind, pick, choice in ops:
            current = await items.list_all(base.id)
            before = {i.id: i for i in current}
            leaves = [i for i in current if i.type not in CONTAINER_TYPES]
            containers = [i for i in current if i.type in CONTAINER_TYPES]
            if kind == "leaf" and leaves:
                target = leaves[pick % len(leaves)]
                status, phase, error = LEAF_STATES[choice % len(LEAF_STATES)]
                returned = await items.set_status(target.id, status, phase, error)
                await check(before, returned, {target.id})
            elif kind == "many" and leaves:
                targets = {leaves[(pick * k) % len(leaves)].id for k in (1, 3, 7)}
                status, phase, error = LEAF_STATES[choice % len(LEAF_STATES)]
                returned = await items.set_status_many(sorted(targets), status, phase, error)
                await check(before, returned, targets)
            elif kind == "container" and containers:
                target = containers[pick % len(containers)]
                phase = ItemPhase.PREPARING if choice % 2 else None
                returned = await items.set_status(target.id, S.PROCESSING, phase)
                await check(before, returned, {target.id})
            elif kind == "delete" and len(current) > 1:
                target = current[1 + pick % (len(current) - 1)]  # keep the root
                returned = await items.delete([target.id])
                await check(before, returned, set())
            elif kind == "delete_many" and len(current) > 1:
                doomed = {current[1 + (pick * k) % (len(current) - 1)].id for k in (1, 2, 5)}
                returned = await items.delete(sorted(doomed))
                await check(before, returned, set())

    runner.run(scenario())
