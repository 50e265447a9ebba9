"""Ollama: `POST /api/embed` (batched, `truncate: true`), `/api/tags`, `/api/show`.

`truncate: true` makes Ollama cut over-long inputs to the model's context instead
of failing the whole batch with a 500.
"""

from __future__ import annotations

import asyncio

import numpy as np

from ktui.core.config import ProviderConfig
from ktui.core.embeddings.base import EmbeddingProvider, model_id, to_matrix
from ktui.core.embeddings.http import ProviderHttp, join_url
from ktui.core.errors import EmbeddingShapeError, ProviderError
from ktui.core.models import EmbeddingModelInfo


class OllamaProvider(EmbeddingProvider):
    def __init__(self, config: ProviderConfig, *, retry_base_delay: float | None = None):
        super().__init__(config)
        self.http = ProviderHttp(config, retry_base_delay=retry_base_delay)

    def _pull_hint(self, model: str) -> str:
        return f"run `ollama pull {model}` on the machine serving {self.http.shown_url}"

    async def embed(self, model: str, texts: list[str]) -> np.ndarray:
        """Vectors for `texts`, in as many requests as the provider's pacing allows."""
        return await self.http.send_paced(texts, lambda part: self._embed_once(model, part))

    async def _embed_once(self, model: str, texts: list[str]) -> np.ndarray:
        body = await self.http.request_json(
            "POST",
            join_url(self.http.base_url, "/api/embed"),
            {"model": model, "input": texts, "truncate": True},
            model=model,
            not_found_hint=self._pull_hint(model),
            texts=len(texts),
        )
        self.note_reported_model(model, body)
        where = f"Ollama model '{model}' at {self.http.shown_url}"
        if not isinstance(body, dict) or "embeddings" not in body:
            raise EmbeddingShapeError(
                f"{where} answered a response of the wrong shape (no 'embeddings' list). "
                "Ollama 0.3.4 or newer is required for /api/embed."
            )
        return to_matrix(body["embeddings"], len(texts), where)

    async def list_models(self) -> list[EmbeddingModelInfo]:
        body = await self.http.request_json("GET", join_url(self.http.base_url, "/api/tags"))
        if not isinstance(body, dict) or not isinstance(body.get("models"), list):
            raise ProviderError(f"Ollama at {self.http.shown_url} answered /api/tags without a 'models' list.")
        listed = [m.get("name") or m.get("model") for m in body["models"] if isinstance(m, dict)]
        names: list[str] = [n for n in listed if isinstance(n, str) and n]
        shown = await asyncio.gather(*(self._show(n) for n in names), return_exceptions=True)
        out: list[EmbeddingModelInfo] = []
        for name, info in zip(names, shown, strict=True):
            dims, is_embedding = (None, None) if isinstance(info, BaseException) else info
            if is_embedding is not False:
                note = "capabilities unknown" if is_embedding is None else None
                out.append(EmbeddingModelInfo(model_id(self.name, name), self.name, name, dims, note))
        return out

    async def _show(self, model: str) -> tuple[int | None, bool | None]:
        """(embedding width, is an embedding model) from /api/show.

        Newer Ollama lists `capabilities`; a model without "embedding" there is a
        chat model and is left out of the listing. A server that lists none (older
        Ollama, Ollama-API proxies): None — listed, marked "capabilities unknown".
        """
        body = await self.http.request_json(
            "POST", join_url(self.http.base_url, "/api/show"), {"model": model}, model=model,
            not_found_hint=self._pull_hint(model),
        )
        return _embedding_length(body), _is_embedding_model(body)

    async def show_dimensions(self, model: str) -> int | None:
        """The width Ollama reports for `model` (`model_info.<arch>.embedding_length`)."""
        dims, _ = await self._show(model)
        return dims

    async def aclose(self) -> None:
        await self.http.aclose()


def _embedding_length(body: object) -> int | None:
    if not isinstance(body, dict):
        return None
    info = body.get("model_info")
    if not isinstance(info, dict):
        return None
    for key, value in info.items():
        if key.endswith(".embedding_length") and isinstance(value, int) and value > 0:
            return value
    return None


def _is_embedding_model(body: object) -> bool | None:
    if isinstance(body, dict) and isinstance(body.get("capabilities"), list) and body["capabilities"]:
        return "embedding" in body["capabilities"]
    return None  # not said
