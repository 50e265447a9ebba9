"""Rerank providers: the `/v1/rerank` shape (Jina, Cohere-compatible, OpenAI-compatible
servers such as vLLM / LocalAI / Infinity) and Hugging Face TEI's native `/rerank`.

Both return `(document index, score)` pairs, best first. The endpoint URL is built
the same whether the configured base URL ends in `/`, `/v1`, or neither.
"""

from __future__ import annotations

from ktui.core.config import ProviderConfig
from ktui.core.embeddings.base import RerankProvider, is_finite_number
from ktui.core.embeddings.http import ProviderHttp, versioned_url
from ktui.core.errors import EmbeddingShapeError


def tei_rerank_url(base: str) -> str:
    """TEI serves `/rerank` at its root; a `/v1` suffix on the base is dropped."""
    b = base.rstrip("/")
    if b.endswith("/rerank"):
        return b
    b = b.removesuffix("/v1")
    return f"{b}/rerank"


def _pairs(results: object, n_docs: int, where: str, score_key: str) -> list[tuple[int, float]]:
    if not isinstance(results, list):
        raise EmbeddingShapeError(f"{where} answered a response of the wrong shape (no results list).")
    out: list[tuple[int, float]] = []
    seen: set[int] = set()
    for r in results:
        if not isinstance(r, dict):
            raise EmbeddingShapeError(f"{where} answered a response of the wrong shape (a result is not an object).")
        index, score = r.get("index"), r.get(score_key)
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n_docs or index in seen:
            raise EmbeddingShapeError(f"{where} answered an invalid document index {index!r} for {n_docs} documents.")
        if not is_finite_number(score) or not isinstance(score, (int, float)):
            raise EmbeddingShapeError(f"{where} answered a non-numeric {score_key} {score!r}.")
        seen.add(index)
        out.append((index, float(score)))
    out.sort(key=lambda p: (-p[1], p[0]))
    return out


class V1RerankProvider(RerankProvider):
    """`POST /v1/rerank {model, query, documents, top_n}` -> `{results: [{index, relevance_score}]}`."""

    def __init__(self, config: ProviderConfig, *, retry_base_delay: float | None = None):
        super().__init__(config)
        self.http = ProviderHttp(config, retry_base_delay=retry_base_delay)
        self.url = versioned_url(self.http.base_url, "rerank")

    async def rerank(self, model: str, query: str, documents: list[str],
                     top_n: int | None = None) -> list[tuple[int, float]]:
        if not documents:
            return []
        payload: dict[str, object] = {"model": model, "query": query, "documents": documents}
        if top_n is not None:
            payload["top_n"] = top_n
        body = await self.http.request_json("POST", self.url, payload, model=model)
        results = body.get("results", body.get("data")) if isinstance(body, dict) else None
        pairs = _pairs(results, len(documents), f"Rerank model '{model}' at {self.http.base_url}", "relevance_score")
        return pairs[:top_n] if top_n is not None else pairs

    async def aclose(self) -> None:
        await self.http.aclose()


class TeiRerankProvider(RerankProvider):
    """`POST /rerank {query, texts}` -> `[{index, score}]` (TEI serves one model; `model` is informative)."""

    def __init__(self, config: ProviderConfig, *, retry_base_delay: float | None = None):
        super().__init__(config)
        self.http = ProviderHttp(config, retry_base_delay=retry_base_delay)
        self.url = tei_rerank_url(self.http.base_url)

    async def rerank(self, model: str, query: str, documents: list[str],
                     top_n: int | None = None) -> list[tuple[int, float]]:
        if not documents:
            return []
        body = await self.http.request_json("POST", self.url, {"query": query, "texts": documents, "truncate": True})
        pairs = _pairs(body, len(documents), f"TEI rerank at {self.http.base_url}", "score")
        return pairs[:top_n] if top_n is not None else pairs

    async def aclose(self) -> None:
        await self.http.aclose()
