"""Hostile sources: what a careless or malicious file system, web server or sitemap can do.

Each case goes through the facade with real files and a real HTTP server on
127.0.0.1, and ends with the same checks: the queue drains, nothing is left
`processing`, the invariants hold, and a failed item says what was wrong with
which source (never "Unexpected error"). Every case but the damaged SQLite file runs on
both backends (tests/support/facades.py).
"""

from __future__ import annotations

import asyncio
import gzip
import os

import pytest

from ktui.core.errors import StoreError
from ktui.core.models import ANY_GROUP, ItemInput, ItemStatus
from tests.support.embedding_server import embedding_server_fixture
from tests.support.facades import backend_fixture
from tests.support.httpserver import Response, routes, serve
from tests.support.services import open_service

pytestmark = pytest.mark.faults

DIMS = 16
PAGE = "<html><head><title>{t}</title></head><body><article><h1>{t}</h1><p>{t} explains how kites fly " \
       "in steady coastal wind, with long paragraphs about string, spars and sails.</p></article></body></html>"


server = embedding_server_fixture(DIMS)
backend = backend_fixture(__name__, {
    "test_corrupted_store_is_reported_and_rebuilt_and_other_bases_are_unaffected":
        "overwrites pages of a base's SQLite file",
})


async def settle(ks, base_id) -> dict[str, object]:
    """Wait, check the common guarantees, return {source: item}."""
    assert await ks.wait_idle(base_id, timeout=60), "the queue did not drain"
    assert await ks.check_invariants() == []
    items = (await ks.list_items(base_id, group_id=ANY_GROUP, limit=100)).items
    assert not [i for i in items if i.status == ItemStatus.PROCESSING]
    for item in items:
        if item.status == ItemStatus.FAILED:
            assert item.error and "Unexpected error" not in item.error, item.error
    return {i.source: i for i in items}


async def failed_with(ks, item_id: str, *words: str) -> str:
    item = await ks.get_item(item_id)
    assert item.status == ItemStatus.FAILED, (item.status, item.error)
    assert all(w in item.error for w in words), item.error
    return item.error


# --- web ---------------------------------------------------------------------------

BOMB = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>&lol9;</loc></url></urlset>"""

EXTERNAL_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>&xxe;</loc></url></urlset>"""


def gzip_bomb() -> bytes:
    """~100 KB on the wire, 100 MB of zeros once inflated."""
    return gzip.compress(b"<urlset>" + b" " * 100_000_000, compresslevel=9)


def sitemap_of(locations: list[str]) -> bytes:
    body = "".join(f"<url><loc>{loc}</loc></url>" for loc in locations)
    return f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{body}</urlset>'.encode()


async def test_sitemap_bombs_are_refused(tmp_path, server) -> None:
    table = {
        "/bomb.xml": Response(200, BOMB, {"Content-Type": "application/xml"}),
        "/xxe.xml": Response(200, EXTERNAL_ENTITY, {"Content-Type": "application/xml"}),
        "/bomb.xml.gz": Response(200, gzip_bomb(), {"Content-Type": "application/x-gzip"}),
    }
    with serve(routes(table)) as web:
        async with open_service(tmp_path / "data", server.url) as ks:
            base = await ks.create_base("Bombs", dimensions=DIMS)
            items = await ks.add_items(base.id, [ItemInput("sitemap", {"url": web.url + p}) for p in table])
            await settle(ks, base.id)
            await failed_with(ks, items[0].id, "refused", "/bomb.xml")
            await failed_with(ks, items[1].id, "refused", "/xxe.xml")
            await failed_with(ks, items[2].id, "too large", "/bomb.xml.gz")
            assert (await ks.list_items(base.id, group_id=ANY_GROUP, limit=100)).total == 3  # no children


async def test_sitemap_keeps_only_http_locations(tmp_path, server) -> None:
    with serve(routes({})) as web:
        pages = {f"/p{i}": Response(200, PAGE.format(t=f"Page{i}"), {"Content-Type": "text/html"}) for i in (1, 2)}
        hostile = ["file:///etc/passwd", "ftp://127.0.0.1/x.html", "javascript:alert(document.cookie)",
                   "data:text/html,<h1>x</h1>", "/relative/path", "mailto:someone@example.org"]
        web.handler = routes({**pages, "/sitemap.xml": Response(
            200, sitemap_of([web.url + "/p1", *hostile, web.url + "/p2"]), {"Content-Type": "application/xml"})})
        async with open_service(tmp_path / "data", server.url) as ks:
            base = await ks.create_base("Sitemap", dimensions=DIMS)
            [root] = await ks.add_items(base.id, [ItemInput("sitemap", {"url": web.url + "/sitemap.xml"})])
            by_source = await settle(ks, base.id)
            children = sorted(s for s, i in by_source.items() if i.group_id == root.id)
            assert children == [web.url + "/p1", web.url + "/p2"]
            assert all(by_source[c].status == ItemStatus.COMPLETED for c in children)
            assert not [r for r in web.requests if not r.path.startswith(("/p", "/sitemap"))]
            hits = (await ks.search(base.id, "Page2 kites", mode="bm25")).results
            assert hits and hits[0].metadata["source"] == web.url + "/p2"


async def test_redirect_loops_and_chains_fail_clearly(tmp_path, server) -> None:
    def chain(req):
        n = int(req.path.rsplit("/", 1)[1])
        return Response(302, b"", {"Location": f"/chain/{n + 1}"})

    table = {
        "/a": Response(302, b"", {"Location": "/b"}),
        "/b": Response(301, b"", {"Location": "/a"}),
        "/self": Response(307, b"", {"Location": "/self"}),
        "/to-file": Response(302, b"", {"Location": "file:///etc/passwd"}),
        **{f"/chain/{n}": chain for n in range(50)},
    }
    with serve(routes(table)) as web:
        async with open_service(tmp_path / "data", server.url) as ks:
            base = await ks.create_base("Redirects", dimensions=DIMS)
            urls = ["/a", "/self", "/chain/0", "/to-file"]
            items = await ks.add_items(base.id, [ItemInput("url", {"url": web.url + u}) for u in urls])
            await settle(ks, base.id)
            await failed_with(ks, items[0].id, "redirect loop", web.url + "/a")
            await failed_with(ks, items[1].id, "redirect loop")
            await failed_with(ks, items[2].id, "more than", "redirects")
            await failed_with(ks, items[3].id, "non-http(s) location")
            assert len(web.requests) < 30  # every loop stopped early


# --- files -------------------------------------------------------------------------

async def test_hostile_files(tmp_path, server) -> None:
    files = tmp_path / "files"
    files.mkdir()
    huge = files / "huge.md"
    with open(huge, "wb") as fh:  # 2 GiB, sparse: no data block is written
        fh.truncate(2 * 1024**3)
    binary = files / "image.md"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40)
    latin = files / "latin1.md"
    latin.write_bytes("# Crème brûlée\n\nCafé façade naïve — kites over the jetée.\n".encode("cp1252"))
    broken = files / "broken.md"
    broken.write_bytes(b"# Broken\n\nValid start \xff\xfe\xfd then \xc3\x28 invalid \xe2\x82 bytes, kite words.\n")
    empty = files / "empty.md"
    empty.write_bytes(b"")
    async with open_service(tmp_path / "data", server.url) as ks:
        base = await ks.create_base("Files", dimensions=DIMS)
        paths = [huge, binary, latin, broken, empty]
        items = await ks.add_items(base.id, [ItemInput("file", {"path": str(p)}) for p in paths])
        await settle(ks, base.id)
        await failed_with(ks, items[0].id, "too large", "limit", str(huge))
        await failed_with(ks, items[1].id, "binary", str(binary))
        # text in another encoding, or with some invalid bytes, is still text: it is read
        for item, word in ((items[2], "brûlée"), (items[3], "Broken")):
            assert (await ks.get_item(item.id)).status == ItemStatus.COMPLETED, (await ks.get_item(item.id)).error
            hits = (await ks.search(base.id, word, mode="bm25")).results
            assert hits and hits[0].item_id == item.id
        await failed_with(ks, items[4].id, str(empty))
        assert os.stat(huge).st_blocks * 512 < 1024**2  # the test itself never wrote the 2 GiB


async def test_path_that_vanishes_before_it_is_read(tmp_path, server) -> None:
    doomed = tmp_path / "doomed.md"
    doomed.write_text("# Doomed\n\nThis file disappears before it is read.\n")
    folder = tmp_path / "doomed-folder"
    folder.mkdir()
    (folder / "x.md").write_text("# X\n\ncontent\n")
    async with open_service(tmp_path / "data", server.url, concurrency=1) as ks:
        base = await ks.create_base("Vanishing", dimensions=DIMS)
        server.faults.delay(0.5)  # the one worker is busy embedding this note
        await ks.add_items(base.id, [ItemInput("note", {"content": "Keeps the only worker busy for a while."})])
        accepted = await ks.add_items(base.id, [ItemInput("file", {"path": str(doomed)}),
                                                ItemInput("directory", {"path": str(folder)})])
        assert all(i.status == ItemStatus.PROCESSING for i in accepted)  # accepted, still queued
        doomed.unlink()
        (folder / "x.md").unlink()
        folder.rmdir()
        server.faults.delay(0)
        await settle(ks, base.id)
        await failed_with(ks, accepted[0].id, "not found", str(doomed))
        await failed_with(ks, accepted[1].id, str(folder))


# --- a corrupted store ------------------------------------------------------------

@pytest.mark.parametrize("damage", ["header", "inner-pages"])
async def test_corrupted_store_is_reported_and_rebuilt_and_other_bases_are_unaffected(tmp_path, server, damage) -> None:
    data = tmp_path / "data"
    async with open_service(data, server.url) as ks:
        good = await ks.create_base("Good", dimensions=DIMS)
        bad = await ks.create_base("Bad", dimensions=DIMS)
        for base, word in ((good, "albatross"), (bad, "cormorant")):
            await ks.add_items(base.id, [ItemInput("note", {"content": f"The {word} glides over the harbour {n}. " * 30})
                                         for n in range(5)])
            await ks.add_items(base.id, [ItemInput("note", {"content": f"Filler {n} about kites and string. " * 30})
                                         for n in range(35)])
        await ks.wait_idle(timeout=30)
    store_file = data / "bases" / f"{bad.id}.sqlite"
    size = store_file.stat().st_size
    with open(store_file, "r+b") as fh:
        if damage == "header":  # not a database any more: fails on open
            fh.write(os.urandom(16 * 1024))
        else:  # opens, but pages inside are garbage: fails when read or written
            for frac in (0.6, 0.75, 0.85):
                fh.seek(int(size * frac) // 4096 * 4096)
                fh.write(os.urandom(4096))

    async with open_service(data, server.url) as ks:
        # the damaged base says so, naming the file
        if damage == "header":
            with pytest.raises(StoreError) as caught:
                await asyncio.wait_for(ks.search(bad.id, "cormorant"), 30)
            assert str(store_file) in str(caught.value)
        problems = await ks.check_invariants()
        assert problems and all(str(store_file) in p for p in problems), problems
        # new work on it fails saying so
        if damage == "header":
            [note] = await ks.add_items(bad.id, [ItemInput("note", {"content": "A new note for the bad base."})])
            assert await ks.wait_idle(timeout=30)
            await failed_with(ks, note.id, str(store_file))
        # the other base is untouched
        hits = (await ks.search(good.id, "albatross", mode="bm25")).results
        assert len(hits) == 5
        # a forced reindex of one item rebuilds it all (the old vectors are unreadable)
        one = (await ks.list_items(bad.id, limit=100)).items[0]
        await ks.reindex_items(bad.id, [one.id], force=True)
        assert await ks.wait_idle(timeout=30)
        assert await ks.check_invariants() == []
        items = (await ks.list_items(bad.id, group_id=ANY_GROUP, limit=100)).items
        assert {i.status for i in items} == {ItemStatus.COMPLETED}
        assert len(items) == (41 if damage == "header" else 40)  # with the note that failed on the broken store
        assert len((await ks.search(bad.id, "cormorant", mode="bm25")).results) == 5
        assert len((await ks.search(good.id, "albatross", mode="bm25")).results) == 5
        kept = [p.name for p in (data / "bases").iterdir() if ".corrupt" in p.name]
        assert kept, "the damaged file is kept aside for inspection"
        await ks.delete_base(bad.id)
        assert not [p for p in (data / "bases").iterdir() if p.name.startswith(bad.id)]
