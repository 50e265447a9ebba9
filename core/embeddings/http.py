"""HTTP plumbing shared by the remote providers: retries, backoff, limits, error text.

Every remote call goes through `ProviderHttp.request_json`, so all providers get
the same behaviour: a per-provider concurrency limit (`ProviderConfig.concurrency`),
retries with exponential backoff (and jitter) on 429, 5xx, timeouts and dropped
connections, and failures turned into `core.errors` messages that say what to do
next. An unreachable server is not retried: "connection refused" will not fix
itself in a second, and the user should hear about it at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from ktui.core.config import ProviderConfig
from ktui.core.embeddings.pacing import ProviderPacing
from ktui.core.embeddings.transport import (
    LocalClient,
    TransportConnectError,
    TransportDropped,
    TransportError,
    TransportTimeout,
)
from ktui.core.errors import (
    EmbeddingShapeError,
    ModelNotFoundError,
    ProviderError,
    ProviderUnavailableError,
)

DEFAULT_RETRY_BASE_DELAY = 0.5  # seconds; doubled per attempt
MAX_RETRY_DELAY = 8.0
RETRY_BASE_DELAY_ENV = "KTUI_RETRY_BASE_DELAY"  # tests set this to keep backoff short
_RETRY_STATUSES = {408, 429, 500, 502, 503, 504}
_BUSY_STATUSES = {429, 503}  # the server says it is overloaded: slow down, not only retry


class _Overloaded(Exception):
    """A multi-text request timed out: split it rather than send it whole again."""


def default_retry_base_delay() -> float:
    raw = os.environ.get(RETRY_BASE_DELAY_ENV)
    if raw:
        try:
            return max(0.0, float(raw))
        except ValueError:
            pass
    return DEFAULT_RETRY_BASE_DELAY


def join_url(base: str, path: str) -> str:
    """`base` without trailing slashes + `/path`."""
    return base.rstrip("/") + "/" + path.lstrip("/")


def versioned_url(base: str, endpoint: str) -> str:
    """URL of an OpenAI-style `/v1/<endpoint>` whether `base` ends in `/`, `/v1`, or neither.

    `http://h:8080`, `http://h:8080/`, `http://h:8080/v1` and `http://h:8080/v1/`
    all give `http://h:8080/v1/<endpoint>`; a base that already ends with the
    endpoint is used as is.
    """
    b = base.rstrip("/")
    if b.endswith("/" + endpoint):
        return b
    if b.endswith("/v1"):
        return f"{b}/{endpoint}"
    return f"{b}/v1/{endpoint}"


def _excerpt(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def error_detail(resp: Any) -> str:
    """The server's own error message, if it sent one (`{"error": ...}` or text)."""
    try:
        body = resp.json()
    except (ValueError, UnicodeDecodeError):
        return _excerpt(resp.text or "")
    if isinstance(body, dict):
        err = body.get("error", body.get("message", body.get("detail")))
        if isinstance(err, dict):
            err = err.get("message", err)
        if err is not None:
            return _excerpt(str(err))
    return _excerpt(json.dumps(body))


class ProviderHttp:
    """One provider's HTTP client, with its own connection pool and concurrency limit."""

    def __init__(self, config: ProviderConfig, *, retry_base_delay: float | None = None):
        if not config.base_url:
            raise ProviderError(f"Provider '{config.name}' has no base_url; set providers.{config.name}.base_url")
        self.config = config
        self.base_url = config.base_url.rstrip("/")
        self.retry_base_delay = default_retry_base_delay() if retry_base_delay is None else retry_base_delay
        self._client: Any = None  # a LocalClient, or an httpx.AsyncClient
        self.pacing = ProviderPacing(config.name, config.concurrency)

    @property
    def label(self) -> str:
        origin = f" (set by {self.config.origin}={self.shown_url})" if self.config.origin else ""
        return f"{self.config.kind} provider '{self.config.name}'{origin}"

    @property
    def shown_url(self) -> str:
        """base_url as it may be shown: without the user:password of its userinfo."""
        return redact_secrets(self.base_url)

    @property
    def _fix_url(self) -> str:
        if self.config.origin:
            return f"fix the {self.config.origin} environment variable"
        return f"fix providers.{self.config.name}.base_url in the settings file"

    def _get_client(self) -> Any:
        if self._client is None:
            headers = {"Accept": "application/json"}
            key = self.config.api_key
            if key:
                headers["Authorization"] = f"Bearer {key}"
            connect = min(10.0, self.config.timeout)
            connections = max(2, self.config.concurrency * 2)
            parsed = urlsplit(self.base_url)
            host = (parsed.hostname or "").lower()
            loopback = host in ("localhost", "127.0.0.1", "::1") or host.startswith("127.")
            if loopback and parsed.scheme == "http" and not parsed.username:
                # plain HTTP to this machine: our own small client, without httpx's import
                # and set-up (see transport.py); no proxy applies to loopback anyway
                self._client = LocalClient(host, parsed.port or 80, headers=headers, timeout=self.config.timeout,
                                           connect_timeout=connect, max_connections=connections)
            else:
                import httpx

                # Proxies from the environment apply to remote servers, never to a loopback one
                # (a local Ollama behind a forgotten HTTP_PROXY is a classic "connection refused").
                self._client = httpx.AsyncClient(headers=headers,
                                                 timeout=httpx.Timeout(self.config.timeout, connect=connect),
                                                 limits=httpx.Limits(max_connections=connections),
                                                 trust_env=not loopback)
        return self._client

    async def _send(self, method: str, url: str, payload: Any) -> Any:
        """One HTTP exchange on this provider's transport; failures as `Transport*` errors."""
        client = self._get_client()
        if isinstance(client, LocalClient):
            return await client.request(method, url, json=payload)
        import httpx

        try:
            return await client.request(method, url, json=payload)
        except httpx.ConnectError as exc:
            raise TransportConnectError(str(exc)) from None
        except httpx.TimeoutException:
            raise TransportTimeout() from None
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            raise TransportDropped(str(exc) or type(exc).__name__) from None
        except httpx.HTTPError as exc:
            raise TransportError(str(exc)) from None

    async def send_paced(self, texts: list[str], send: Callable[[list[str]], Awaitable[np.ndarray]]) -> np.ndarray:
        """Embed `texts` with `send(part)` in requests the provider can take right now.

        Parts are at most the pacing's batch cap; a part that times out is split in
        two and each half sent (one after the other: the server is struggling)
        instead of being sent whole again. `send` must pass `texts=len(part)` to
        `request_json`.
        """
        limit = self.pacing.batch_limit
        if limit is not None and len(texts) > limit:
            parts = [texts[i : i + limit] for i in range(0, len(texts), limit)]
            return np.concatenate(await asyncio.gather(*(self.send_paced(p, send) for p in parts)))
        try:
            return await send(texts)
        except _Overloaded:
            half = len(texts) // 2
            first = await self.send_paced(texts[:half], send)
            return np.concatenate([first, await self.send_paced(texts[half:], send)])

    async def request_json(self, method: str, url: str, payload: Any = None, *,
                           model: str | None = None, not_found_hint: str | None = None,
                           texts: int = 1) -> Any:
        """Send one request (with retries) and return the decoded JSON body.

        `not_found_hint` is appended to a 404's ModelNotFoundError (e.g. "run
        `ollama pull m`"). Every error message has credentials in URLs redacted: it is
        shown to users and stored as an item's error. `texts`: how many texts the
        request carries; one of several that times out raises `_Overloaded` for
        `send_paced` to split, instead of being retried whole.
        """
        try:
            return await self._request_json(method, url, payload, model=model, not_found_hint=not_found_hint,
                                            texts=texts)
        except ProviderError as exc:
            exc.args = (redact_secrets(str(exc)),)
            raise

    async def _request_json(self, method: str, url: str, payload: Any, *,
                            model: str | None, not_found_hint: str | None, texts: int) -> Any:
        attempts = self.config.max_retries + 1
        last: str = ""
        last_status: int | None = None
        last_detail = ""
        tried = 0
        for attempt in range(attempts):
            tried = attempt + 1
            retry_after: float | None = None
            pacing = self.pacing
            await pacing.acquire()
            try:
                try:
                    resp = await self._send(method, url, payload)
                finally:
                    pacing.release()
            except TransportConnectError as exc:
                raise ProviderUnavailableError(
                    f"Cannot reach the {self.label} at {self.shown_url} ({_excerpt(str(exc)) or 'connection refused'}). "
                    f"Start the server, or {self._fix_url}."
                ) from None
            except TransportTimeout:
                last, last_status = f"timed out after {self.config.timeout:g}s", None
                pacing.overloaded(texts)
                if texts > 1:
                    raise _Overloaded from None
            except TransportDropped as exc:
                last, last_status = f"connection dropped ({_excerpt(str(exc)) or type(exc).__name__})", None
            except TransportError as exc:
                raise ProviderError(f"The {self.label} request to {url} failed: {_excerpt(str(exc))}") from None
            else:
                if resp.status_code < 300:
                    pacing.succeeded(texts)
                    try:
                        return resp.json()
                    except (ValueError, UnicodeDecodeError):
                        raise EmbeddingShapeError(
                            f"The {self.label} at {url} answered a response of the wrong shape (not JSON): "
                            f"{_excerpt(resp.text)!r}. Check that base_url points at a {self.config.kind} server."
                        ) from None
                detail = error_detail(resp)
                if resp.status_code in _RETRY_STATUSES:
                    last = f"HTTP {resp.status_code}: {detail}"
                    last_status, last_detail = resp.status_code, detail
                    retry_after = _retry_after(resp)
                    if resp.status_code in _BUSY_STATUSES:
                        pacing.overloaded(texts)
                else:
                    raise self._status_error(resp.status_code, detail, url, model, not_found_hint)
            if attempt + 1 < attempts:
                if not pacing.take_retry():
                    last += (f" (no retry: the {self.label} has failed too often lately; "
                             "ktui stops re-sending until requests succeed again)")
                    break
                await asyncio.sleep(self._backoff(attempt, retry_after))
        if last_status is not None and last_status >= 500:
            # the server's own failure: its message is the cause, not our load on it
            raise ProviderError(
                f"The {self.label} at {url}: the server failed: {last_detail} "
                f"(HTTP {last_status}, {tried} attempt(s)). Next: check the server's log.", status=last_status)
        hint = (
            f"raise providers.{self.config.name}.timeout"
            if last.startswith("timed out")
            else f"lower providers.{self.config.name}.concurrency or batch_size, or try again later"
        )
        err_cls = ProviderUnavailableError if last.startswith(("timed out", "connection")) else ProviderError
        raise err_cls(f"The {self.label} at {url} failed after {tried} attempt(s): {last}. Next: {hint}.")

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        delay: float = min(MAX_RETRY_DELAY, self.retry_base_delay * (2 ** attempt))
        delay *= random.uniform(0.75, 1.25)
        if retry_after is not None:
            delay = max(delay, min(retry_after, MAX_RETRY_DELAY))
        return delay

    def _status_error(self, status: int, detail: str, url: str, model: str | None,
                      not_found_hint: str | None) -> ProviderError:
        lowered = detail.lower()
        if status == 404 and model and "model" not in lowered and model.lower() not in lowered:
            # a 404 that says nothing about the model: the endpoint itself is missing (a
            # server without /api/embed answers 404 for every model) — pulling won't help
            return ProviderError(
                f"The {self.label} at {self.shown_url} has no endpoint {url} (HTTP 404: {detail}); "
                f"it answers 404 whatever the model. Next: check that it is a {self.config.kind} server "
                f"(the kind of providers.{self.config.name}) and that base_url is right.", status=status)
        if status == 404 or (status == 400 and model and "not found" in lowered and "model" in lowered):
            if model:
                hint = not_found_hint or "check the model name (`ktui models`) and the provider's base_url"
                return ModelNotFoundError(
                    f"The {self.label} at {self.shown_url} does not know model '{model}' (HTTP {status}: {detail}). "
                    f"Next: {hint}.", status=status
                )
            return ProviderError(f"The {self.label} has no endpoint {url} (HTTP 404). Check its base_url.", status=status)
        if status in (401, 403):
            env = self.config.api_key_env
            fix = (f"check the API key in ${env}" if env
                   else f"set providers.{self.config.name}.api_key_env to the variable holding your key")
            return ProviderError(f"The {self.label} refused the request (HTTP {status}: {detail}). Next: {fix}.",
                                 status=status)
        return ProviderError(f"The {self.label} rejected the request to {url} (HTTP {status}: {detail}).",
                             status=status)

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()


_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@")
_SECRET_QUERY = re.compile(r"(?i)([?&](?:api[_-]?key|key|token|access_token|password|secret)=)[^&\s#]+")


def redact_secrets(text: str) -> str:
    """Credentials a URL may carry (``http://user:pass@host``, ``?api_key=…``) replaced
    by ``***``, so that they reach neither a screen nor the database."""
    return _SECRET_QUERY.sub(r"\1***", _USERINFO.sub(r"\1***@", text))


def _retry_after(resp: Any) -> float | None:
    raw = resp.headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        return None
