"""Watched folders and interrupted imports on a shared PostgreSQL store (core/runtime/following.py,
core/store/postgres/process_leases.py): one process of the folder's machine follows it, another
takes over when it stops, a process of another machine (or one where the folder is missing)
never does; an `importing` base is discarded only once its importer's lease expired.

Two facades ("machines", each its own data directory) on one real PostgreSQL schema, a real
embedding server and real watchfiles; each facade's lease owner is injected (so its host) and
both read one clock the test advances: nothing waits on a TTL."""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("psycopg")

from ktui.core.config import StoreSettings  # noqa: E402
from ktui.core.errors import ConstraintError  # noqa: E402
from ktui.core.models import FolderFollower, ItemInput, ItemStatus  # noqa: E402
from ktui.core.service import KnowledgeService  # noqa: E402
from ktui.core.store.postgres.leases import LeaseOwner, Leases  # noqa: E402
from tests.support.embedding_server import embedding_server_fixture  # noqa: E402
from tests.support.services import FAKE_MODEL, fake_settings  # noqa: E402

pytestmark = pytest.mark.timeout(180)

server = embedding_server_fixture(32, scope="module")
STALL = 3600.0  # the TTL of a process whose heartbeat never comes during a test
DEADLINE = 60.0  # generous: how long to wait for a condition, never a measured figure


class Clock:
    """Epoch seconds that move only when the test says (starting at the real time, as the
    server's clock stamps an import's first lease)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def machine(tmp_path, server, postgres_server, pg_schema):
    clock = Clock()
    opened: list[KnowledgeService] = []

    async def open_as(name: str, owner: str, **leases_kw) -> KnowledgeService:
        settings = fake_settings(tmp_path / name, server.url).with_(
            store=StoreSettings(url=postgres_server.url, schema=pg_schema))
        ks = await KnowledgeService.open(settings=settings, leases=Leases(LeaseOwner(owner), clock=clock, **leases_kw))
        opened.append(ks)
        return ks

    open_as.clock = clock  # type: ignore[attr-defined]
    open_as.opened = opened  # type: ignore[attr-defined]
    return open_as


@pytest.fixture
async def closing(machine):
    yield machine
    for ks in reversed(machine.opened):
        await ks.close()


async def until(predicate, what: str):
    end = asyncio.get_running_loop().time() + DEADLINE
    while True:
        value = await predicate()
        if value:
            return value
        assert asyncio.get_running_loop().time() < end, f"no {what} within {DEADLINE} s"
        await asyncio.sleep(0.05)


def notes(folder):
    folder.mkdir()
    (folder / "a.md").write_text("# Alpacas\n\nAlpacas hum.\n", encoding="utf-8")
    (folder / "b.md").write_text("# Badgers\n\nBadgers dig setts.\n", encoding="utf-8")
    return folder


async def files_of(ks: KnowledgeService, base_id: str, root_id: str) -> dict[str, list[ItemStatus]]:
    page = await ks.list_items(base_id, type="file", group_id=root_id, limit=100)
    out: dict[str, list[ItemStatus]] = {}
    for item in page.items:
        out.setdefault(item.source.rsplit("/", 1)[-1], []).append(item.status)
    return out


async def test_one_process_follows_a_folder_and_another_of_its_machine_takes_over_when_it_stops(
        closing, tmp_path, server):
    folder = notes(tmp_path / "notes")
    a = await closing("a", "laptop:1:aaaa")
    base = await a.create_base("Notes", FAKE_MODEL, None)
    (root,) = await a.add_items(base.id, [ItemInput("directory", {"path": str(folder), "watch": True})])
    assert await a.wait_idle(timeout=DEADLINE)
    b = await closing("b", "laptop:2:bbbb")
    assert await b.wait_recovered(timeout=DEADLINE)
    await b._runtime.beat_process_leases()  # a heartbeat of b: a's lease is live, b leaves the folder alone
    assert (await a.folder_followers([root.id]))[root.id] == FolderFollower(here=True, host="laptop", follower="laptop")
    assert (await b.folder_followers([root.id]))[root.id] == FolderFollower(here=False, host="laptop", follower="laptop")

    before = server.texts_embedded
    (folder / "c.md").write_text("# Capybaras\n\nCapybaras swim in rivers.\n", encoding="utf-8")

    async def c_done():
        files = await files_of(a, base.id, root.id)
        return files.get("c.md") == [ItemStatus.COMPLETED] and files
    files = await until(c_done, "c.md indexed")
    assert await a.wait_idle(timeout=DEADLINE) and await b.wait_idle(timeout=DEADLINE)
    assert await files_of(b, base.id, root.id) == files == {n: [ItemStatus.COMPLETED] for n in ("a.md", "b.md", "c.md")}
    assert server.texts_embedded - before == 1  # c.md's one chunk, embedded once, by one process

    await a.close()  # a clean stop gives the folder back
    assert (await b.folder_followers([root.id]))[root.id].follower is None
    await b._runtime.beat_process_leases()
    assert (await b.folder_followers([root.id]))[root.id] == FolderFollower(here=True, host="laptop", follower="laptop")
    (folder / "a.md").unlink()

    async def a_gone():
        return "a.md" not in (files := await files_of(b, base.id, root.id)) and files
    assert set(await until(a_gone, "a.md removed by the new follower")) == {"b.md", "c.md"}


async def test_a_stalled_followers_folder_is_taken_over_once_its_lease_expires(closing, tmp_path):
    folder = notes(tmp_path / "notes")
    # a's own heartbeat never comes during the test (a TTL of an hour): it has stalled
    a = await closing("a", "laptop:1:aaaa", ttl=STALL)
    base = await a.create_base("Notes", FAKE_MODEL, None)
    (root,) = await a.add_items(base.id, [ItemInput("directory", {"path": str(folder), "watch": True})])
    assert await a.wait_idle(timeout=DEADLINE)
    b = await closing("b", "laptop:2:bbbb")
    await b._runtime.beat_process_leases()
    assert not (await b.folder_followers([root.id]))[root.id].here
    closing.clock.now += STALL + 1
    await b._runtime.beat_process_leases()
    assert (await b.folder_followers([root.id]))[root.id].here
    await a._runtime.beat_process_leases()  # a wakes up: renewing tells it the folder is b's now
    assert not (await a.folder_followers([root.id]))[root.id].here
    assert not a._runtime.watcher.watching(root.id)


async def test_another_machines_folder_or_a_missing_one_is_never_followed(closing, tmp_path):
    folder = notes(tmp_path / "notes")
    a = await closing("a", "laptop:1:aaaa")
    base = await a.create_base("Notes", FAKE_MODEL, None)
    (root,) = await a.add_items(base.id, [ItemInput("directory", {"path": str(folder), "watch": True})])
    assert await a.wait_idle(timeout=DEADLINE)
    await a.close()  # nobody follows it now

    # another machine: the same path exists here (one file system in the test), yet it is the laptop's
    desk = await closing("desk", "desk:3:cccc")
    assert await desk.wait_recovered(timeout=DEADLINE)
    await desk._runtime.beat_process_leases()
    assert (await desk.folder_followers([root.id]))[root.id] == FolderFollower(
        here=False, host="laptop", follower=None, mine=False)

    # the laptop again, but the folder is not there (an unmounted disk): not taken
    folder.rename(tmp_path / "away")
    laptop = await closing("laptop", "laptop:4:dddd")
    assert await laptop.wait_recovered(timeout=DEADLINE)
    await laptop._runtime.beat_process_leases()
    assert (await laptop.folder_followers([root.id]))[root.id] == FolderFollower(here=False, host="laptop")
    (tmp_path / "away").rename(folder)
    await laptop._runtime.beat_process_leases()  # back: followed from the next beat
    assert (await laptop.folder_followers([root.id]))[root.id].here

    # turning watch on from the desk makes it the desk's folder: the laptop lets go at its next beat
    await desk.set_watch(base.id, root.id, True)
    assert (await desk.folder_followers([root.id]))[root.id] == FolderFollower(here=True, host="desk", follower="desk")
    await laptop._runtime.beat_process_leases()
    assert not (await laptop.folder_followers([root.id]))[root.id].here
    await desk.set_watch(base.id, root.id, False)
    assert (await desk.folder_followers([root.id]))[root.id] == FolderFollower(here=False)


async def test_an_interrupted_import_is_discarded_only_once_its_lease_expired(closing):
    # the importer's heartbeat never comes during the test (a TTL of an hour): it stalls mid-import
    a = await closing("a", "laptop:1:aaaa", ttl=STALL)
    half = await a._workflow.create_base("Half", FAKE_MODEL, None, free_name=True, import_fingerprint="0" * 64)
    b = await closing("b", "desk:2:bbbb")  # its open discards what nobody is importing: not this one
    assert await b.wait_recovered(timeout=DEADLINE)
    await b._runtime.beat_process_leases()
    assert [x.id for x in (await b.list_bases()).items] == [half.id]

    closing.clock.now += STALL + 1  # the importer's lease expires
    assert await b._process_claims.interrupted_imports() == [half.id]  # b takes it over...
    with pytest.raises(ConstraintError, match="given up"):
        await a._imports.finish(half.id)  # ...so the stalled importer can no longer finish it
    await b._discard_interrupted_imports()  # b's own lease: nobody else's to take
    assert (await b.list_bases()).total == 1
    await b.delete_base(half.id)  # what the discard goes on to do with the base it took
    assert (await a.list_bases()).total == 0

    # the whole path at a heartbeat: another expired import is found and discarded (the
    # clock back at the real time: a new import's first lease is stamped by the server's clock)
    closing.clock.now = time.time()
    other = await a._workflow.create_base("Other", FAKE_MODEL, None, free_name=True, import_fingerprint="1" * 64)
    await b._runtime.beat_process_leases()
    assert [x.id for x in (await b.list_bases()).items] == [other.id]  # live
    closing.clock.now += STALL + 1
    await b._runtime.beat_process_leases()
    assert (await b.list_bases()).total == 0
    # an import that finished is never taken
    closing.clock.now = time.time()
    done = await a._workflow.create_base("Done", FAKE_MODEL, None, free_name=True, import_fingerprint="2" * 64)
    await a._imports.finish(done.id)
    closing.clock.now += STALL + 1
    await b._runtime.beat_process_leases()
    assert [x.id for x in (await b.list_bases()).items] == [done.id]
