"""Fetcher and URL reading against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import gzip
import threading
import time

import pytest

from ktui.core.config import IngestSettings
from ktui.core.errors import IngestError
from ktui.core.ingest import Fetcher, chunk_documents, read_leaf
from ktui.core.models import ItemType, UrlItemData
from tests.support.httpserver import Request, Response, routes, serve
from tests.support.ingest_fixtures import make_pdf

ARTICLE = "<p>" + " ".join(["Vector search finds passages that mean the same thing as the query."] * 8) + "</p>"
HTML = f"""<!doctype html><html><head><title>Guide</title></head><body><nav>Menu Home About</nav>
<main><h1>Search guide</h1>{ARTICLE}<h2>Hybrid mode</h2>{ARTICLE}</main><footer>(c) site</footer></body></html>"""


def settings(**kw) -> IngestSettings:
    return IngestSettings(**{"fetch_timeout": 5.0, **kw})


async def read_url(url: str, fetcher: Fetcher, st: IngestSettings | None = None):
    return await read_leaf(ItemType.URL, UrlItemData(url=url, source=url), st or fetcher.settings, fetcher)


async def test_html_page_through_trafilatura(site) -> None:
    table = {"/page": Response(200, HTML, {"Content-Type": "text/html; charset=utf-8"})}
    site.table.update(table)
    async with Fetcher(settings()) as fetcher:
        docs = await read_url(site.url + "/page", fetcher)
    doc = docs[0]
    assert doc.metadata["source"] == site.url + "/page" and doc.metadata["title"] == "Guide"
    assert doc.metadata["content_type"] == "text/markdown"
    assert "Vector search finds passages" in doc.text and "Hybrid mode" in doc.text
    assert "Menu Home About" not in doc.text
    chunks = chunk_documents(docs, chunk_size=64, chunk_overlap=8, item_id="u", item_type="url",
                             source=site.url + "/page")
    assert {"Search guide", "Search guide > Hybrid mode"} <= {c.metadata.get("heading") for c in chunks}
    assert all(c.metadata["title"] == "Guide" for c in chunks)


SHORT_PAGES = {
    # semantic markup: a site header with logo and menu, a footer menu, a short article
    "/semantic": """<!doctype html><html><head><title>Sea otters</title></head><body>
<a class="skip-link" href="#main">Skip to content</a>
<header class="site-header"><a href="/" class="logo">Wildlife notes</a>
  <nav><ul><li><a href="/">Home</a></li><li><a href="/mammals">Mammals</a></li><li><a href="/about">About us</a></li>
  </ul></nav></header>
<main id="main"><h1>Sea otters</h1><p>Sea otters hold hands while they sleep.</p></main>
<footer><nav><a href="/privacy">Privacy policy</a> | <a href="/terms">Terms of use</a></nav>
<p>Copyright 2026 Wildlife notes</p></footer></body></html>""",
    # the same page built of divs: menus named by class and id, breadcrumbs
    "/divs": """<!doctype html><html><head><title>Sea otters</title></head><body>
<div id="header"><a href="/">Wildlife notes</a><ul class="main-menu"><li><a href="/">Home</a></li>
  <li><a href="/mammals">Mammals</a></li><li><a href="/about">About us</a></li></ul></div>
<div class="breadcrumbs"><a href="/">Home</a> / <a href="/mammals">Mammals</a> / Sea otters</div>
<div id="content"><h1>Sea otters</h1><p>Sea otters hold hands while they sleep.</p></div>
<div id="footer"><a href="/privacy">Privacy policy</a> <a href="/terms">Terms of use</a></div></body></html>""",
}
MENU_WORDS = ("Skip to content", "Wildlife notes", "Home", "Mammals", "About us", "Privacy", "Terms", "Copyright")


@pytest.mark.parametrize("path", sorted(SHORT_PAGES))
async def test_navigation_and_site_menus_are_not_indexed(site, path) -> None:
    """On a short page trafilatura falls back to all the text it sees: the site's menus
    used to open the first chunk. They are removed before extraction."""
    site.table[path] = Response(200, SHORT_PAGES[path], {"Content-Type": "text/html; charset=utf-8"})
    async with Fetcher(settings()) as fetcher:
        docs = await read_url(site.url + path, fetcher)
    chunks = chunk_documents(docs, chunk_size=256, chunk_overlap=32, item_id="u", item_type="url",
                             source=site.url + path)
    first = chunks[0].text
    assert "Sea otters hold hands while they sleep." in first, first
    assert not [w for w in MENU_WORDS if w in docs[0].text], docs[0].text
    assert docs[0].text.lstrip("# ").startswith("Sea otters"), docs[0].text


async def test_a_page_of_nothing_but_navigation_keeps_its_links_text(site) -> None:
    site.table["/index"] = Response(200, """<html><body><nav><ul><li><a href="/a">Alpha reports</a></li>
<li><a href="/b">Beta reports</a></li></ul></nav></body></html>""", {"Content-Type": "text/html"})
    async with Fetcher(settings()) as fetcher:
        docs = await read_url(site.url + "/index", fetcher)
    assert "Alpha reports" in docs[0].text and "Beta reports" in docs[0].text


async def test_an_articles_own_header_and_a_title_header_are_kept(site) -> None:
    site.table["/notes"] = Response(200, """<html><body>
<header><h1>Release notes</h1><p>Version 2 is out.</p></header>
<article><header><h2>Kites</h2><p>By the kite team</p></header><p>It adds box kites.</p>
<footer>Filed under <a href="/t/kites">kites</a></footer></article>
<footer>Contact the team</footer></body></html>""", {"Content-Type": "text/html"})
    async with Fetcher(settings()) as fetcher:
        text = (await read_url(site.url + "/notes", fetcher))[0].text
    assert "Release notes" in text and "Version 2 is out." in text and "It adds box kites." in text, text
    assert "Contact the team" not in text, text


async def test_redirects_are_followed_and_final_url_recorded(site) -> None:
    table = {
        "/a": Response(301, "", {"Location": "/b"}),
        "/b": Response(302, "", {"Location": "/c"}),
        "/c": Response(200, "plain words here", {"Content-Type": "text/plain"}),
    }
    site.table.update(table)
    async with Fetcher(settings()) as fetcher:
        res = await fetcher.fetch(site.url + "/a")
        docs = await read_url(site.url + "/a", fetcher)
    assert res.url == site.url + "/c" and res.status == 200 and res.body == b"plain words here"
    assert res.content_type == "text/plain"
    assert docs[0].text == "plain words here" and docs[0].metadata["url"] == site.url + "/c"


async def test_redirect_loop_and_too_many_redirects(site) -> None:
    table = {"/loop1": Response(302, "", {"Location": "/loop2"}), "/loop2": Response(302, "", {"Location": "/loop1"})}
    for i in range(10):
        table[f"/hop{i}"] = Response(302, "", {"Location": f"/hop{i + 1}"})
    table["/hop10"] = Response(200, "end", {"Content-Type": "text/plain"})
    site.table.update(table)
    async with Fetcher(settings(max_redirects=5)) as fetcher:
        with pytest.raises(IngestError, match=r"Failed to fetch .*/loop1: redirect loop"):
            await fetcher.fetch(site.url + "/loop1")
        with pytest.raises(IngestError, match=r"Failed to fetch .*/hop0: more than 5 redirects"):
            await fetcher.fetch(site.url + "/hop0")
        assert (await fetcher.fetch(site.url + "/hop5")).body == b"end"  # exactly 5 hops is fine


async def test_redirect_to_a_non_http_scheme_is_refused(site) -> None:
    table = {"/evil": Response(302, "", {"Location": "file:///etc/passwd"})}
    site.table.update(table)
    async with Fetcher(settings()) as fetcher:
        with pytest.raises(IngestError, match=r"redirected to a non-http\(s\) location file:///etc/passwd"):
            await fetcher.fetch(site.url + "/evil")


async def test_http_errors_name_the_status(site) -> None:
    table = {"/gone": Response(410, "gone"), "/boom": Response(500, "oops")}
    site.table.update(table)
    async with Fetcher(settings()) as fetcher:
        for path, code in (("/missing", 404), ("/gone", 410), ("/boom", 500)):
            with pytest.raises(IngestError, match=rf"^Failed to fetch {site.url}{path}: HTTP {code}$"):
                await read_url(site.url + path, fetcher)


@pytest.mark.parametrize("url", ["ftp://example.org/file.txt", "file:///etc/passwd", "javascript:alert(1)",
                                 "example.org/page", "http://", "", "mailto:a@b.c"])
async def test_only_http_and_https_urls(url: str) -> None:
    async with Fetcher(settings()) as fetcher:
        with pytest.raises(IngestError, match="^Invalid knowledge url: "):
            await fetcher.fetch(url)


async def test_oversize_body_is_aborted(site) -> None:
    big = b"x" * 50_000
    compressed = gzip.compress(b"y" * 200_000)  # small on the wire, big once decoded
    table = {
        "/big": Response(200, big, {"Content-Type": "text/plain"}),
        "/bomb": Response(200, compressed, {"Content-Type": "text/plain", "Content-Encoding": "gzip"}),
        "/ok": Response(200, b"z" * 1000, {"Content-Type": "text/plain"}),
    }
    site.table.update(table)
    async with Fetcher(settings(max_body_bytes=10_000)) as fetcher:
        with pytest.raises(IngestError, match=r"Failed to fetch .*/big: body too large"):
            await fetcher.fetch(site.url + "/big")
        with pytest.raises(IngestError, match=r"Failed to fetch .*/bomb: body too large"):
            await fetcher.fetch(site.url + "/bomb")
        assert len((await fetcher.fetch(site.url + "/ok")).body) == 1000


async def test_timeout_is_reported(site) -> None:
    table = {"/slow": Response(200, "late", {"Content-Type": "text/plain"}, delay=1.5)}
    site.table.update(table)
    async with Fetcher(settings(fetch_timeout=0.3)) as fetcher:
        with pytest.raises(IngestError, match=r"Timed out fetching .*/slow"):
            await fetcher.fetch(site.url + "/slow")


async def test_connection_refused_is_an_ingest_error() -> None:
    with serve(routes({})) as srv:
        url = srv.url
    async with Fetcher(settings()) as fetcher:
        with pytest.raises(IngestError, match=rf"Failed to fetch {url}/x: "):
            await fetcher.fetch(url + "/x")


async def test_concurrent_fetches_are_limited(site) -> None:
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}

    def slow(_req: Request) -> Response:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        return Response(200, "ok", {"Content-Type": "text/plain"})

    site.table.update({"/p": slow})
    async with Fetcher(settings(fetch_concurrency=3)) as fetcher:
        results = await asyncio.gather(*(fetcher.fetch(f"{site.url}/p?i={i}") for i in range(15)))
    assert len(results) == 15
    assert state["peak"] <= 3


async def test_content_types_choose_the_parser(site, tmp_path) -> None:
    pdf_bytes = make_pdf(tmp_path / "x.pdf", ["PDF served over HTTP."]).read_bytes()
    table = {
        "/doc": Response(200, pdf_bytes, {"Content-Type": "application/pdf"}),
        "/download": Response(200, pdf_bytes, {"Content-Type": "application/octet-stream"}),
        "/readme.md": Response(200, "# Title\n\nBody", {"Content-Type": "text/markdown; charset=utf-8"}),
        "/latin": Response(200, "caf\xe9 cr\xe8me".encode("latin-1"), {"Content-Type": "text/plain; charset=iso-8859-1"}),
        "/data": Response(200, '{"a": [1, 2]}', {"Content-Type": "application/json"}),
        "/img": Response(200, b"\x89PNG\r\n", {"Content-Type": "image/png"}),
        "/empty": Response(200, b"", {"Content-Type": "text/plain"}),
    }
    site.table.update(table)
    async with Fetcher(settings()) as fetcher:
        pdf = await read_url(site.url + "/doc", fetcher)
        assert pdf[0].metadata["page"] == 1 and "PDF served over HTTP." in pdf[0].text
        sniffed = await read_url(site.url + "/download", fetcher)
        assert "PDF served" in sniffed[0].text
        md = await read_url(site.url + "/readme.md", fetcher)
        assert md[0].metadata["content_type"] == "text/markdown"
        assert (await read_url(site.url + "/latin", fetcher))[0].text == "café crème"
        assert '"a": [' in (await read_url(site.url + "/data", fetcher))[0].text
        with pytest.raises(IngestError, match=r"Unsupported content type image/png: .*/img"):
            await read_url(site.url + "/img", fetcher)
        with pytest.raises(IngestError, match=r"Empty response body: .*/empty"):
            await read_url(site.url + "/empty", fetcher)
