"""Keyset listing of items on the facade (`KnowledgeService.list_items_after`, `iter_items`):
every item exactly once in (created_at, id) order, with items sharing a timestamp (one
`add_items` call stamps all its rows alike) and with items added and deleted between
pages, on both backends (SQLite, and a shared PostgreSQL store: tests/support/facades.py)."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ktui.core.errors import NotFoundError, ValidationError
from ktui.core.models import ANY_GROUP, ItemInput, KnowledgeItem
from tests.support.embedding_server import embedding_server_fixture
from tests.support.facades import BACKENDS, backend_overrides
from tests.support.services import FAKE_MODEL, open_service, write_files

DIMS = 16

server = embedding_server_fixture(DIMS)


@pytest.fixture(params=BACKENDS)
async def ks(request, tmp_path, server):
    async with open_service(tmp_path / "data", server.url, **backend_overrides(request.param, request)) as service:
        yield service


def notes(prefix: str, n: int) -> list[ItemInput]:
    return [ItemInput("note", {"content": f"{prefix} {i}"}) for i in range(n)]


def order(items: list[KnowledgeItem], newest_first: bool) -> list[str]:
    return [i.id for i in sorted(items, key=lambda i: (i.created_at, i.id), reverse=newest_first)]


async def walk(ks, base_id: str, limit: int, **kw) -> list[KnowledgeItem]:
    out, cursor = [], None
    while True:
        page = await ks.list_items_after(base_id, cursor=cursor, limit=limit, **kw)
        assert len(page.items) <= limit
        out.extend(page.items)
        if page.next_cursor is None:
            return out
        assert len(page.items) == limit  # a short page is the last one
        cursor = page.next_cursor


async def test_pages_through_ties_in_order_on_every_level(ks, tmp_path):
    base = await ks.create_base("Docs", FAKE_MODEL, DIMS)
    corpus = write_files(tmp_path / "corpus", {f"d/f{i}.md": f"# F{i}\n\nbody {i}\n" for i in range(7)})
    first = await ks.add_items(base.id, notes("a", 23))
    assert len({i.created_at for i in first}) == 1  # one call, one timestamp: 23 ties
    folder, *second = await ks.add_items(base.id, [ItemInput("directory", {"path": str(corpus)}), *notes("b", 11)])
    assert await ks.wait_idle(base.id, timeout=60)
    roots = [*first, folder, *second]
    everything = (await ks.list_items(base.id, group_id=ANY_GROUP, limit=100)).items
    assert len(everything) == len(roots) + 1 + 7  # the folder's d/ and its files

    for newest_first in (True, False):
        for limit in (1, 4, 10, 23, 1000):
            got = await walk(ks, base.id, limit, newest_first=newest_first)
            assert [i.id for i in got] == order(roots, newest_first)
            got = await walk(ks, base.id, limit, group_id=ANY_GROUP, newest_first=newest_first)
            assert [i.id for i in got] == order(everything, newest_first)
    # the same first page as list_items (newest first), and the same filters
    assert (await ks.list_items_after(base.id, limit=20)).items == (await ks.list_items(base.id)).items
    sub = next(i for i in everything if i.group_id == folder.id)
    assert [i.id for i in await walk(ks, base.id, 3, group_id=sub.id)] == order(
        [i for i in everything if i.group_id == sub.id], True)
    files = [i async for i in ks.iter_items(base.id, type="file", group_id=ANY_GROUP, page_size=2)]
    assert [i.id for i in files] == order([i for i in everything if i.type.value == "file"], True)
    assert [i async for i in ks.iter_items(base.id, type="file")] == []  # files are not roots


async def test_items_added_and_deleted_between_pages(ks):
    base = await ks.create_base("Docs", FAKE_MODEL, DIMS)
    batches = [await ks.add_items(base.id, notes(f"n{b}", 9)) for b in range(4)]
    present = [i for batch in batches for i in batch]
    for newest_first in (True, False):
        seen: list[str] = []
        kept = {i.id for i in present}
        added: set[str] = set()
        cursor, step = None, 0
        while True:
            page = await ks.list_items_after(base.id, cursor=cursor, limit=5, newest_first=newest_first)
            seen.extend(i.id for i in page.items)
            if page.next_cursor is None:
                break
            cursor, step = page.next_cursor, step + 1
            # delete one item already listed and one not yet listed; add a batch
            listed = [i for i in seen if i in kept]
            ahead = [i for i in order([p for p in present if p.id in kept], newest_first) if i not in seen]
            gone = listed[-1:] + ahead[-1:]
            await ks.delete_items(base.id, gone)
            kept -= set(gone)
            more = await ks.add_items(base.id, notes(f"late{step}", 3))
            added |= {i.id for i in more}
        assert len(seen) == len(set(seen))  # nothing twice
        original = {i.id for i in present}
        assert kept <= set(seen)  # every item there all along, once
        assert set(seen) <= original | added  # nothing that was never there
        if newest_first:
            assert not set(seen) & added  # new items are newer than the cursor: behind it
        else:
            assert added <= set(seen)  # ... and ahead of it in the oldest-first order
        present = [i async for i in ks.iter_items(base.id)]  # for the second order


async def test_bad_cursors_and_limits_are_refused(ks):
    base = await ks.create_base("Docs", FAKE_MODEL, DIMS)
    await ks.add_items(base.id, notes("x", 3))
    page = await ks.list_items_after(base.id, limit=1)
    assert page.next_cursor is not None
    for bad in ("", "%%%", "bm90IGpzb24", 42, "WzEsMl0", "W10", "x" * 2000):
        with pytest.raises(ValidationError) as exc:
            await ks.list_items_after(base.id, cursor=bad)
        assert list(exc.value.errors) == ["cursor"], bad
    for limit in (0, 1001, "5", None):
        with pytest.raises(ValidationError):
            await ks.list_items_after(base.id, limit=limit)
    with pytest.raises(NotFoundError):
        await ks.list_items_after("no-such-base")
    with pytest.raises(NotFoundError):
        await ks.list_items_after("no-such-base", cursor=page.next_cursor)
    # a cursor of another base or filter is only a position: it never fails
    other = await ks.create_base("Other", FAKE_MODEL, DIMS)
    assert (await ks.list_items_after(other.id, cursor=page.next_cursor)).items == []


# --- hypothesis: random batches, page sizes, additions and deletions ----------------------------


@pytest.fixture
def runner():
    with asyncio.Runner() as r:
        yield r


@pytest.fixture(params=BACKENDS)
def sync_ks(request, runner, tmp_path: Path, server):
    context = open_service(tmp_path / "fuzz", server.url, **backend_overrides(request.param, request))
    service = runner.run(context.__aenter__())
    yield service
    runner.run(context.__aexit__(None, None, None))


step = st.tuples(st.integers(0, 4), st.integers(0, 3))  # (items added, items deleted) after a page


def test_every_item_exactly_once_whatever_happens_between_pages(runner, sync_ks):
    ks = sync_ks
    names = itertools.count()

    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(batches=st.lists(st.integers(1, 12), min_size=1, max_size=4), limit=st.integers(1, 8),
           steps=st.lists(step, max_size=12), newest_first=st.booleans(), data=st.data())
    def run(batches, limit, steps, newest_first, data):
        async def go():
            base = await ks.create_base(f"Fuzz {next(names)}", FAKE_MODEL, DIMS)
            created = [i for n in batches for i in await ks.add_items(base.id, notes("n", n))]
            deleted: set[str] = set()
            seen: list[str] = []
            cursor = None
            for n_add, n_del in [*steps, *[(0, 0)] * 200]:
                page = await ks.list_items_after(base.id, cursor=cursor, limit=limit, newest_first=newest_first)
                assert not {i.id for i in page.items} & deleted
                seen.extend(i.id for i in page.items)
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
                if n_add:
                    created += await ks.add_items(base.id, notes("late", n_add))
                alive = [i.id for i in created if i.id not in deleted]
                if n_del and alive:
                    gone = data.draw(st.lists(st.sampled_from(alive), max_size=n_del, unique=True))
                    if gone:
                        await ks.delete_items(base.id, gone)
                        deleted |= set(gone)
            else:
                pytest.fail("the listing never ended")
            assert len(seen) == len(set(seen))
            now = {i.id for i in await walk(ks, base.id, 1000)}
            assert now == {i.id for i in created} - deleted
            first = {i.id for i in created[: sum(batches)]}
            assert first - deleted <= set(seen)  # there from start to end: listed
            assert set(seen) <= {i.id for i in created}
            by_id = {i.id: i for i in created}
            keys = [(by_id[i].created_at, i) for i in seen]
            assert keys == sorted(keys, reverse=newest_first)
            await ks.delete_base(base.id)

        runner.run(go())

    run()
