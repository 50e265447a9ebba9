"""Embedding models: how ktui uses one (its profile), how far chunks ran past its window, listings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ktui.core.models.catalogue import DEFAULT_HYBRID_ALPHA, WINDOW_FILL
from ktui.core.models.enums import SearchMode


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """How ktui uses one embedding model (core/embeddings/profiles.py).

    Prefixes are prepended to the text before it is embedded (and before the cache
    key is taken, so changing one never serves vectors of the other); `window_tokens`
    is the model's input window (None = no limit known), `search_mode` /
    `hybrid_alpha` what a new base on this model gets by default.
    """

    model_id: str
    family: str  # "wordllama", "e5", "nomic-embed-text", ... or "unknown"
    query_prefix: str = ""
    document_prefix: str = ""
    window_tokens: int | None = None
    search_mode: SearchMode = SearchMode.HYBRID
    hybrid_alpha: float | None = DEFAULT_HYBRID_ALPHA
    overridden: bool = False  # True when the settings file changed any of it

    def fitting_chunk_size(self) -> int | None:
        """The longest chunk a new base on this model gets (None: no window known): the
        window less headroom, because the model's tokenizer counts a few more tokens for
        the same text than the chunker's estimate does."""
        if self.window_tokens is None:
            return None
        return max(16, int(self.window_tokens * WINDOW_FILL))

    def chunk_exceeds_window(self, tokens: int) -> bool:
        return self.window_tokens is not None and tokens > self.window_tokens

    def window_warning(self, chunk_size: int | None) -> str | None:
        """What to tell the user when chunks of `chunk_size` tokens do not fit the window."""
        if chunk_size is None or not self.chunk_exceeds_window(chunk_size):
            return None
        lost = 1 - (self.window_tokens or 0) / chunk_size
        return (
            f"chunks of up to {chunk_size} tokens exceed the {self.window_tokens}-token input window of "
            f"{self.model_id}: the model cuts them, so up to {lost:.0%} of a long chunk is never embedded; "
            f"use a chunk size of at most {self.window_tokens}"
        )


@dataclass(frozen=True, slots=True)
class WindowOverflow:
    """How far an item's chunks run past its model's input window, recorded at indexing.

    Stored as a plain dict (`as_dict`) in the leaf's data under `window_overflow`
    (None there when every chunk fits or the window is unknown). Token counts are the
    chunker's estimate (core/ingest/tokens.py), the same count that sizes chunks.

    * `window_tokens`: the model's window when the item was indexed;
    * `chunks` / `over`: the item's chunks, and how many of them exceed the window;
    * `longest`: the longest chunk, in tokens;
    * `cut_share`: the share of the item's tokens past the window (never embedded), 0..1.
    """

    window_tokens: int
    chunks: int
    over: int
    longest: int
    cut_share: float

    def as_dict(self) -> dict[str, Any]:
        return {"window_tokens": self.window_tokens, "chunks": self.chunks, "over": self.over,
                "longest": self.longest, "cut_share": self.cut_share}

    @classmethod
    def from_dict(cls, raw: Any) -> WindowOverflow | None:
        """The record read back from item data (None when absent or not a record of this shape)."""
        if not isinstance(raw, dict):
            return None
        try:
            return cls(int(raw["window_tokens"]), int(raw["chunks"]), int(raw["over"]), int(raw["longest"]),
                       float(raw["cut_share"]))
        except (KeyError, TypeError, ValueError):
            return None

    def describe(self) -> str:
        """One line for a person: "3 of 5 chunks exceed the 256-token window (up to 1024 tokens; 41% not embedded)"."""
        verb = "exceeds" if self.over == 1 else "exceed"
        return (f"{self.over} of {self.chunks} chunk{'s' if self.chunks != 1 else ''} {verb} the "
                f"{self.window_tokens}-token window of the embedding model (up to {self.longest} tokens; "
                f"{self.cut_share:.0%} of the text is cut off before embedding)")


@dataclass(frozen=True, slots=True)
class EmbeddingModelInfo:
    id: str  # provider::model
    provider: str
    model: str
    dimensions: int | None = None
    # None, or what is not known about the model, e.g. "capabilities unknown" (an
    # Ollama-API server whose /api/show lists no capabilities: it may not embed)
    note: str | None = None


@dataclass(frozen=True, slots=True)
class ModelListing:
    """Models from every configured provider; providers that failed are listed with why."""

    models: list[EmbeddingModelInfo]
    errors: dict[str, str] = field(default_factory=dict)
