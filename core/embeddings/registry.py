"""`EmbeddingService`: the one object the rest of ktui embeds and reranks through.

It resolves `provider::model` ids through `ProviderPool` (`providers.py`: one provider
instance, connection pool and concurrency limit per provider name), puts the
content-keyed cache in front of every provider, and has `VectorFetcher` (`fetching.py`)
send the misses in batches of `batch_size`, reporting progress after each batch.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Self

import numpy as np

from ktui.core.config import ProviderConfig, Settings
from ktui.core.embeddings.base import check_width
from ktui.core.embeddings.cache import EmbeddingCache, cache_key
from ktui.core.embeddings.fetching import ProgressFn, VectorFetcher, sendable
from ktui.core.embeddings.profiles import profile_for
from ktui.core.embeddings.providers import EMBEDDING_KINDS, RERANK_KINDS, ProviderPool
from ktui.core.errors import EmbeddingShapeError, ProviderError, ValidationError
from ktui.core.models import EmbeddingModelInfo, ModelListing, ModelProfile

log = logging.getLogger(__name__)

CACHE_FILE = "embedding-cache.sqlite"
PROBE_TEXT = "ktui dimension probe: the quick brown fox jumps over the lazy dog"
_HASH_OFF_LOOP_CHARS = 1_000_000


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
        self.pool = ProviderPool(self.providers, retry_base_delay=retry_base_delay)
        self.fetcher = VectorFetcher(self.cache, self._batch_size)

    # --- ids and providers --------------------------------------------------

    def parse_model_id(self, model_id: str) -> tuple[ProviderConfig, str]:
        """Split `provider::model` and find the provider; ValidationError if malformed or unknown."""
        return self.pool.parse_model_id(model_id)

    def has_model_provider(self, model_id: str) -> bool:
        """True when `model_id` is well-formed and its provider is configured here."""
        return self.pool.has_model_provider(model_id)

    def check_rerank_model(self, model_id: Any) -> None:
        """Refuse a well-formed rerank model id that this configuration cannot serve."""
        self.pool.check_rerank_model(model_id)

    def model_notice(self, model_id: str) -> str | None:
        """What the server said about the model, when it was not the model asked for."""
        return self.pool.model_notice(model_id)

    def slow_providers(self) -> tuple[str, ...]:
        """A line for each provider being paced down right now (timeouts, "too busy")."""
        return self.pool.slow_providers()

    def _batch_size(self, config: ProviderConfig) -> int:
        return max(1, config.batch_size or self.settings.embeddings.batch_size)

    # --- embedding ----------------------------------------------------------

    @property
    def fetching(self) -> int:
        """Texts being fetched from a provider right now (a figure for tests and benchmarks)."""
        return self.fetcher.fetching

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
        provider = self.pool.embedder(config)
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
            done = await self.fetcher.fetch(config, model, provider, missing, found, pending_count, done, total,
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
        matrix = await self.pool.embedder(config).embed(model, [PROBE_TEXT])
        if matrix.ndim != 2 or matrix.shape[0] != 1 or matrix.shape[1] < 1:
            raise EmbeddingShapeError(f"Model '{model_id}' answered no usable vector for a probe text.")
        return int(matrix.shape[1])

    async def list_models(self) -> ModelListing:
        """Models of every embedding provider; a failing provider lands in `.errors`, never raises."""
        configs = [c for c in self.providers.values() if c.kind in EMBEDDING_KINDS]

        async def one(config: ProviderConfig) -> list[EmbeddingModelInfo]:
            return await self.pool.embedder(config).list_models()

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
        return await self.pool.reranker(config).rerank(model, sendable(query), [sendable(d) for d in documents], top_n)

    # --- lifecycle ----------------------------------------------------------

    async def aclose(self) -> None:
        """Close connection pools and the cache file. Safe to call twice."""
        await self.pool.aclose()
        await self.cache.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


__all__ = ["EMBEDDING_KINDS", "RERANK_KINDS", "EmbeddingService", "ProviderError", "sendable"]
