"""Sitemap expansion against a real HTTP server: urlset, index, gzip, hostile and broken input."""

from __future__ import annotations

import gzip

import pytest

from ktui.core.config import IngestSettings
from ktui.core.errors import IngestError
from ktui.core.ingest import Fetcher, expand_sitemap
from tests.support.httpserver import Response

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
XML = {"Content-Type": "application/xml"}


def urlset(*locs: str, extra: str = "") -> str:
    body = "".join(f"<url><loc>{loc}</loc><lastmod>2024-01-01</lastmod></url>" for loc in locs)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {NS} {extra}>{body}</urlset>'


def index(*locs: str) -> str:
    body = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex {NS}>{body}</sitemapindex>'


async def expand(url: str, **kw) -> list[str]:
    st = IngestSettings(**{"fetch_timeout": 5.0, **kw})
    async with Fetcher(st) as fetcher:
        return await expand_sitemap(url, st, fetcher)


async def test_urlset_keeps_http_locations_only_deduplicated_in_order(site) -> None:
    image_ns = 'xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"'
    doc = urlset(
        "https://example.org/a", "http://example.org/b", "https://example.org/a#section",
        "file:///etc/passwd", "ftp://example.org/f.txt", "javascript:alert(1)", "/relative/path",
        "  https://example.org/c  ", "", "https://example.org/a",
        extra=image_ns,
    ).replace("</url></urlset>", "<image:image><image:loc>https://img.example.org/x.png</image:loc>"
                                  "</image:image></url></urlset>")
    site.table.update({"/sitemap.xml": Response(200, doc, XML)})
    urls = await expand(site.url + "/sitemap.xml")
    assert urls == ["https://example.org/a", "http://example.org/b", "https://example.org/c"]


async def test_gzip_sitemap_and_nested_index(site) -> None:
    base = site.url
    site.table.update({
        "/index.xml": Response(200, index(f"{base}/one.xml.gz", f"{base}/inner-index.xml"), XML),
        "/one.xml.gz": Response(200, gzip.compress(urlset("https://e.org/1", "https://e.org/2").encode()),
                                {"Content-Type": "application/x-gzip"}),
        "/inner-index.xml": Response(200, index(f"{base}/two.xml"), XML),
        "/two.xml": Response(200, urlset("https://e.org/2", "https://e.org/3"), XML),
    })
    urls = await expand(base + "/index.xml")
    assert sorted(urls) == ["https://e.org/1", "https://e.org/2", "https://e.org/3"]


async def test_index_depth_is_bounded_and_self_reference_ends(site) -> None:
    base = site.url
    site.table.update({
        "/self.xml": Response(200, index(f"{base}/self.xml", f"{base}/leaf.xml"), XML),
        "/leaf.xml": Response(200, urlset("https://e.org/leaf"), XML),
        "/d0.xml": Response(200, index(f"{base}/d1.xml"), XML),
        "/d1.xml": Response(200, index(f"{base}/d2.xml"), XML),
        "/d2.xml": Response(200, urlset("https://e.org/deep"), XML),
    })
    assert await expand(base + "/self.xml") == ["https://e.org/leaf"]
    assert await expand(base + "/d0.xml", max_sitemap_depth=2) == ["https://e.org/deep"]
    with pytest.raises(IngestError, match=r"Sitemap contains no indexable URLs \(nested sitemaps deeper"):
        await expand(base + "/d0.xml", max_sitemap_depth=1)


async def test_broken_child_sitemap_is_skipped(site) -> None:
    base = site.url
    site.table.update({
        "/index.xml": Response(200, index(f"{base}/missing.xml", f"{base}/ok.xml"), XML),
        "/ok.xml": Response(200, urlset("https://e.org/ok"), XML),
        "/only-broken.xml": Response(200, index(f"{base}/missing.xml"), XML),
    })
    assert await expand(base + "/index.xml") == ["https://e.org/ok"]
    with pytest.raises(IngestError, match=r"Sitemap contains no indexable URLs \(Failed to fetch .*: HTTP 404\)"):
        await expand(base + "/only-broken.xml")


async def test_url_cap(site) -> None:
    doc = urlset(*(f"https://e.org/p{i}" for i in range(50)))
    site.table.update({"/s.xml": Response(200, doc, XML)})
    urls = await expand(site.url + "/s.xml", max_sitemap_urls=10)
    assert urls == [f"https://e.org/p{i}" for i in range(10)]


async def test_plain_text_sitemap(site) -> None:
    body = "https://e.org/x\n\nftp://e.org/no\nhttps://e.org/y\n"
    site.table.update({"/s.txt": Response(200, body, {"Content-Type": "text/plain"})})
    assert await expand(site.url + "/s.txt") == ["https://e.org/x", "https://e.org/y"]


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol9 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
]>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>https://e.org/&lol9;</loc></url></urlset>"""

EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE r [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>https://e.org/&xxe;</loc></url></urlset>"""


@pytest.mark.parametrize("path,body,ctype,message", [
    ("/bomb.xml", BILLION_LAUGHS, "application/xml", r"Sitemap refused: XML entity or DTD declarations"),
    ("/xxe.xml", EXTERNAL_ENTITY, "application/xml", r"Sitemap refused: XML entity or DTD declarations"),
    ("/broken.xml", "<urlset><url><loc>https://e.org/a</loc></url>", "application/xml", r"Malformed sitemap XML: .*"),
    ("/html.xml", "<html><body>not a sitemap</body></html>", "text/html", r"Not a sitemap \(root element <html>\)"),
    ("/empty.xml", "   \n", "application/xml", r"Sitemap is empty"),
    ("/nothing.xml", urlset("file:///x", "mailto:a@b.c"), "application/xml", r"^Sitemap contains no indexable URLs$"),
    ("/badgz.xml.gz", b"\x1f\x8b\x08\x00garbage", "application/gzip", r"Malformed compressed sitemap"),
])
async def test_hostile_and_broken_sitemaps_fail_clearly(site, path, body, ctype, message) -> None:
    site.table.update({path: Response(200, body, {"Content-Type": ctype})})
    with pytest.raises(IngestError, match=message):
        await expand(site.url + path)


async def test_gzip_bomb_is_capped(site) -> None:
    bomb = gzip.compress(b" " * 3_000_000)
    site.table.update({"/s.xml.gz": Response(200, bomb, {"Content-Type": "application/gzip"})})
    with pytest.raises(IngestError, match=r"too large once decompressed"):
        await expand(site.url + "/s.xml.gz", max_body_bytes=1_000_000)


async def test_root_errors(site) -> None:
    site.table.update({"/500.xml": Response(500, "err")})
    with pytest.raises(IngestError, match=r"^Failed to fetch .*/404\.xml: HTTP 404$"):
        await expand(site.url + "/404.xml")
    with pytest.raises(IngestError, match=r"HTTP 500"):
        await expand(site.url + "/500.xml")
    with pytest.raises(IngestError, match=r"^Invalid knowledge url: ftp://e.org/s.xml$"):
        await expand("ftp://e.org/s.xml")
