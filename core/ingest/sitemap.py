"""Sitemap expansion: a sitemap URL into the page URLs it lists.

* `urlset` sitemaps give their `<url><loc>` entries; `sitemapindex` files are
  followed (nested indexes up to `max_sitemap_depth`, each sitemap fetched once,
  so an index that lists itself ends);
* gzip-compressed sitemaps (`.xml.gz` served as-is) are inflated with a size cap;
* a plain-text sitemap (one URL per line, served as text/plain) is accepted too;
* XML goes through defusedxml: entity declarations (billion laughs) and external
  entities are refused, malformed XML fails with the parser's message;
* only absolute http(s) locations are kept (file:, ftp:, javascript:, relative
  ones are dropped), fragments removed, duplicates dropped in first-seen order,
  and at most `max_sitemap_urls` are returned (the rest are ignored).

A failure of the sitemap itself (HTTP error, malformed, a bomb) fails the
expansion; a failing *nested* sitemap is skipped so one broken child does not
lose the other thousands of pages, unless nothing at all is left.
"""

from __future__ import annotations

import asyncio
import zlib
from urllib.parse import urlsplit, urlunsplit
from xml.etree.ElementTree import Element, ParseError

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException

from ktui.core.config import IngestSettings
from ktui.core.errors import IngestError
from ktui.core.ingest.fetch import FetchedResource, Fetcher, validate_url

NO_URLS = "Sitemap contains no indexable URLs"


def _local(tag: object) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def normalise_location(raw: str | None) -> str | None:
    """An absolute http(s) URL without its fragment, or None when it must be refused."""
    if not raw:
        return None
    candidate = raw.strip()
    try:
        parts = urlsplit(candidate)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    if any(c.isspace() for c in candidate):
        return None
    return urlunsplit((parts.scheme.lower(), parts.netloc, parts.path or "/", parts.query, ""))


def _inflate(body: bytes, limit: int, url: str) -> bytes:
    if body[:2] != b"\x1f\x8b":
        return body
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise IngestError(f"Malformed compressed sitemap: {url}: {exc}") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise IngestError(f"Sitemap is too large once decompressed (limit {limit} bytes): {url}")
    if not inflater.eof:
        raise IngestError(f"Malformed compressed sitemap: {url}: truncated gzip data")
    return out


def parse_sitemap(resource: FetchedResource, limit: int) -> tuple[str, list[str]]:
    """("urlset" | "sitemapindex" | "text", locations as written). Blocking; raises IngestError."""
    url = resource.url
    body = _inflate(resource.body, limit, url)
    stripped = body.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not stripped:
        raise IngestError(f"Sitemap is empty: {url}")
    if not stripped.startswith(b"<") and resource.content_type in ("text/plain", ""):
        lines = stripped.decode("utf-8", errors="replace").splitlines()
        return "text", [line.strip() for line in lines if line.strip()]
    try:
        root: Element = SafeET.fromstring(body)
    except DefusedXmlException as exc:
        raise IngestError(
            f"Sitemap refused: XML entity or DTD declarations are not allowed ({type(exc).__name__}): {url}"
        ) from None
    except ParseError as exc:
        raise IngestError(f"Malformed sitemap XML: {url}: {exc}") from None
    kind = _local(root.tag)
    if kind == "urlset":
        entry = "url"
    elif kind == "sitemapindex":
        entry = "sitemap"
    else:
        raise IngestError(f"Not a sitemap (root element <{kind}>): {url}")
    locations = [
        (child.text or "")
        for element in root
        if _local(element.tag) == entry
        for child in element
        if _local(child.tag) == "loc"
    ]
    return kind, locations


class _Expansion:
    def __init__(self, settings: IngestSettings, fetcher: Fetcher):
        self.settings = settings
        self.fetcher = fetcher
        self.urls: dict[str, None] = {}  # an ordered set
        self.visited: set[str] = set()
        self.child_errors: list[str] = []

    @property
    def full(self) -> bool:
        return len(self.urls) >= self.settings.max_sitemap_urls

    async def visit(self, url: str, depth: int) -> None:
        if url in self.visited or self.full:
            return
        self.visited.add(url)
        resource = await self.fetcher.fetch(url)
        kind, locations = await asyncio.to_thread(parse_sitemap, resource, self.settings.max_body_bytes)
        if kind == "sitemapindex":
            if depth >= self.settings.max_sitemap_depth:
                self.child_errors.append(f"nested sitemaps deeper than {self.settings.max_sitemap_depth} levels at {url}")
                return
            children = [c for c in dict.fromkeys(normalise_location(loc) for loc in locations) if c]
            await asyncio.gather(*(self.visit_child(child, depth + 1) for child in children))
            return
        for loc in locations:
            normal = normalise_location(loc)
            if normal is not None:
                self.urls.setdefault(normal, None)
                if self.full:
                    break

    async def visit_child(self, url: str, depth: int) -> None:
        try:
            await self.visit(url, depth)
        except IngestError as exc:
            self.child_errors.append(str(exc))


async def expand_sitemap(url: str, settings: IngestSettings, fetcher: Fetcher) -> list[str]:
    """The page URLs a sitemap (or sitemap index) lists; see the module docstring."""
    root = validate_url(url)
    expansion = _Expansion(settings, fetcher)
    await expansion.visit(root, 0)
    found = list(expansion.urls)[: settings.max_sitemap_urls]
    if not found:
        if expansion.child_errors:
            raise IngestError(f"{NO_URLS} ({expansion.child_errors[0]})")
        raise IngestError(NO_URLS)
    return found
