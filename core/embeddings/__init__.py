"""Embedding providers (builtin WordLlama, Ollama, OpenAI-compatible), the content-keyed
cache, and rerank providers, all behind `EmbeddingService`. See docs/embeddings.md."""

from ktui.core.embeddings.builtin import BUILTIN_MODELS, DEFAULT_MODEL
from ktui.core.embeddings.cache import EmbeddingCache, cache_key
from ktui.core.embeddings.registry import EmbeddingService

__all__ = ["BUILTIN_MODELS", "DEFAULT_MODEL", "EmbeddingCache", "EmbeddingService", "cache_key"]
