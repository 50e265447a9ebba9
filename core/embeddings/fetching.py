"""Fetching the vectors the cache did not have: batches, coalescing, single flight.

`VectorFetcher.fetch` splits the missing texts into batches of the provider's batch size,
sends them through the provider's `Coalescer` (requests share a slot while the provider
is busy), caches each batch as it arrives, and joins a fetch another caller already has
under way for the same text instead of sending it twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np

from ktui.core.config import ProviderConfig
from ktui.core.embeddings.base import EmbeddingProvider, check_width
from ktui.core.embeddings.cache import EmbeddingCache
from ktui.core.embeddings.coalesce import Coalescer
from ktui.core.errors import EmbeddingShapeError

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


class VectorFetcher:
    """The fetches in progress (by cache key) and one coalescer per provider and model."""

    def __init__(self, cache: EmbeddingCache, batch_size: Callable[[ProviderConfig], int]):
        self.cache = cache
        self._batch_size = batch_size
        self._coalescers: dict[tuple[str, str], Coalescer] = {}
        self._in_flight: dict[bytes, asyncio.Future[np.ndarray]] = {}  # cache key -> its fetch in progress

    @property
    def fetching(self) -> int:
        """Texts being fetched from a provider right now."""
        return len(self._in_flight)

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

    async def fetch(self, config: ProviderConfig, model: str, provider: EmbeddingProvider,
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
