"""Any OpenAI-compatible `/v1/embeddings` server (OpenAI, vLLM, LM Studio, llama.cpp, TEI's
OpenAI route, LiteLLM, ...).

`dimensions` is sent only when the user configured it (`providers.NAME.dimensions`):
many compatible servers reject the field. The API key comes from the environment
variable named by `api_key_env`, never from the settings file itself.

Vectors are asked for as `encoding_format: "base64"` (float32 bytes), as the
official OpenAI client does. Parsing JSON floats costs the client about 1.5 s per
10,000 vectors of 384 dimensions, ten times the base64 cost (and the answer is four
times bigger); it was the largest single cost of indexing through a fast local server. A server that ignores the field and sends lists of
numbers is read as is; one that refuses it (HTTP 400 or 422) gets the request again
with `"float"`, and the provider asks that server for floats from then on.
"""

from __future__ import annotations

import numpy as np

from ktui.core.config import ProviderConfig
from ktui.core.embeddings.base import EmbeddingProvider, model_id, to_matrix
from ktui.core.embeddings.http import ProviderHttp, versioned_url
from ktui.core.errors import EmbeddingShapeError, ModelNotFoundError, ProviderError
from ktui.core.models import EmbeddingModelInfo


class OpenAIProvider(EmbeddingProvider):
    def __init__(self, config: ProviderConfig, *, retry_base_delay: float | None = None):
        super().__init__(config)
        self.http = ProviderHttp(config, retry_base_delay=retry_base_delay)
        self.embeddings_url = versioned_url(self.http.base_url, "embeddings")
        self.models_url = versioned_url(self.http.base_url, "models")
        self.floats_only = False  # set when this server refused base64

    async def embed(self, model: str, texts: list[str]) -> np.ndarray:
        """Vectors for `texts`, in as many requests as the provider's pacing allows."""
        return await self.http.send_paced(texts, lambda part: self._embed_once(model, part))

    async def _embed_once(self, model: str, texts: list[str]) -> np.ndarray:
        if self.floats_only:
            body = await self._request(model, texts, "float")
        else:
            try:
                body = await self._request(model, texts, "base64")
            except ProviderError as exc:
                if exc.status not in (400, 422) or isinstance(exc, ModelNotFoundError):
                    raise
                body = await self._request(model, texts, "float")
                self.floats_only = True  # only once floats worked: the 400 may have been about something else
        self.note_reported_model(model, body)
        where = f"OpenAI-compatible model '{model}' at {self.http.shown_url}"
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise EmbeddingShapeError(
                f"{where} answered a response of the wrong shape (no 'data' list). "
                "Check that base_url points at an OpenAI-compatible server."
            )
        rows: list[object] = [None] * len(data)
        for pos, entry in enumerate(data):
            if not isinstance(entry, dict) or "embedding" not in entry:
                raise EmbeddingShapeError(f"{where} answered a response of the wrong shape (data[{pos}] has no embedding).")
            index = entry.get("index", pos)
            if not isinstance(index, int) or not 0 <= index < len(data) or rows[index] is not None:
                raise EmbeddingShapeError(f"{where} answered a response of the wrong shape (bad index {index!r}).")
            rows[index] = entry["embedding"]
        return to_matrix(rows, len(texts), where)

    async def _request(self, model: str, texts: list[str], encoding_format: str) -> object:
        payload: dict[str, object] = {"model": model, "input": texts, "encoding_format": encoding_format}
        if self.config.dimensions is not None:
            payload["dimensions"] = self.config.dimensions
        return await self.http.request_json("POST", self.embeddings_url, payload, model=model, texts=len(texts))

    async def list_models(self) -> list[EmbeddingModelInfo]:
        """The configured `models` if any (no request), else the server's `/v1/models`."""
        if self.config.models:
            names = list(self.config.models)
        else:
            body = await self.http.request_json("GET", self.models_url)
            data = body.get("data") if isinstance(body, dict) else None
            if not isinstance(data, list):
                raise ProviderError(
                    f"The server at {self.http.base_url} cannot list its models; "
                    f"list them in providers.{self.name}.models"
                )
            names = [d["id"] for d in data if isinstance(d, dict) and isinstance(d.get("id"), str)]
        return [EmbeddingModelInfo(model_id(self.name, n), self.name, n, self.config.dimensions) for n in names]

    async def aclose(self) -> None:
        await self.http.aclose()
