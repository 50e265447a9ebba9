"""Fetching URLs for url and sitemap items: one shared client, bounded and defensive.

One `Fetcher` is shared by the runtime for all bases so a sitemap of 5,000 pages
never opens more than `fetch_concurrency` sockets at once. Redirects are followed
by hand (not by httpx) so that every hop is checked: only http/https targets,
at most `max_redirects` hops, loops reported as such. Bodies are streamed and the
transfer is abandoned as soon as it passes `max_body_bytes` (counted after
content decoding, so a gzip bomb is stopped too).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Self
from urllib.parse import urljoin, urlsplit

import httpx

from ktui.core.config import IngestSettings
from ktui.core.errors import IngestError

USER_AGENT = "ktui/0.1 (knowledge base indexer; +https://pypi.org/project/ktui/)"
_REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True, slots=True)
class FetchedResource:
    """A fetched body and what the server said about it."""

    url: str  # final URL, after redirects
    status: int
    content_type: str  # media type only, lower case ("text/html"); "" when absent
    body: bytes
    charset: str | None = None  # from the Content-Type header, when given


def validate_url(url: str) -> str:
    """Return `url` stripped if it is an absolute http(s) URL, else raise IngestError."""
    candidate = url.strip() if isinstance(url, str) else ""
    try:
        parts = urlsplit(candidate)
        ok = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
    except ValueError:
        ok = False
    if not ok:
        raise IngestError(f"Invalid knowledge url: {url}")
    return candidate


def _split_content_type(header: str | None) -> tuple[str, str | None]:
    if not header:
        return "", None
    media, _, params = header.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, value = param.strip().partition("=")
        if key.lower() == "charset" and value:
            charset = value.strip().strip('"').strip("'") or None
    return media.strip().lower(), charset


class Fetcher:
    """Shared httpx.AsyncClient plus a semaphore limiting concurrent fetches."""

    def __init__(self, settings: IngestSettings):
        self.settings = settings
        self._semaphore = asyncio.Semaphore(settings.fetch_concurrency)
        self._client = httpx.AsyncClient(
            follow_redirects=False,
            timeout=httpx.Timeout(settings.fetch_timeout),
            limits=httpx.Limits(
                max_connections=settings.fetch_concurrency,
                max_keepalive_connections=settings.fetch_concurrency,
            ),
            headers={"User-Agent": USER_AGENT, "Accept": "*/*"},
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def fetch(self, url: str) -> FetchedResource:
        """GET `url`; raise IngestError with a message naming the URL on any failure.

        The whole exchange (all hops and the body) is also bounded by a deadline of
        four times `fetch_timeout`, so a server trickling bytes cannot hold a slot forever.
        """
        current = validate_url(url)
        async with self._semaphore:
            try:
                async with asyncio.timeout(self.settings.fetch_timeout * 4):
                    return await self._fetch(url, current)
            except TimeoutError:
                raise IngestError(f"Timed out fetching {url}") from None

    async def _fetch(self, original: str, current: str) -> FetchedResource:
        seen: list[str] = [current]
        for _hop in range(self.settings.max_redirects + 1):
            try:
                async with self._client.stream("GET", current) as response:
                    if response.status_code in _REDIRECT_CODES and "location" in response.headers:
                        target = urljoin(current, response.headers["location"])
                        try:
                            target = validate_url(target)
                        except IngestError:
                            raise IngestError(
                                f"Failed to fetch {original}: redirected to a non-http(s) location {target}"
                            ) from None
                        if target in seen:
                            raise IngestError(f"Failed to fetch {original}: redirect loop at {target}")
                        seen.append(target)
                        current = target
                        continue
                    if not 200 <= response.status_code < 300:
                        raise IngestError(f"Failed to fetch {original}: HTTP {response.status_code}")
                    body = await self._read_limited(original, response)
                    media, charset = _split_content_type(response.headers.get("content-type"))
                    return FetchedResource(str(response.url), response.status_code, media, body, charset)
            except httpx.TimeoutException:
                raise IngestError(f"Timed out fetching {original}") from None
            except httpx.InvalidURL:
                raise IngestError(f"Invalid knowledge url: {original}") from None
            except httpx.ConnectError as exc:
                raise IngestError(f"Failed to fetch {original}: cannot connect ({exc})") from None
            except httpx.HTTPError as exc:
                raise IngestError(f"Failed to fetch {original}: {type(exc).__name__}: {exc}") from None
        raise IngestError(f"Failed to fetch {original}: more than {self.settings.max_redirects} redirects")

    async def _read_limited(self, original: str, response: httpx.Response) -> bytes:
        limit = self.settings.max_body_bytes
        declared = response.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit and "content-encoding" not in response.headers:
            raise IngestError(f"Failed to fetch {original}: body too large ({_mb(int(declared))}; limit {_mb(limit)})")
        parts: list[bytes] = []
        size = 0
        async for piece in response.aiter_bytes():
            size += len(piece)
            if size > limit:
                raise IngestError(f"Failed to fetch {original}: body too large (over the {_mb(limit)} limit)")
            parts.append(piece)
        return b"".join(parts)


def _mb(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB" if n >= 100_000 else f"{n} bytes"
