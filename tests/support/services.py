"""Open a real KnowledgeService in a temporary directory with a deterministic embedder.

The embedder is tests/support/embedding_server.py: a real OpenAI-compatible HTTP
server on 127.0.0.1 whose vectors are hashed bags of words, so search results are
meaningful and repeatable. Model id: "fake::deterministic".
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from ktui.core.config import EmbeddingSettings, ProviderConfig, Settings
from ktui.core.service import KnowledgeService

FAKE_MODEL = "fake::deterministic"


def fake_settings(data_dir: Path, server_url: str, **overrides: Any) -> Settings:
    provider = ProviderConfig(
        name="fake",
        kind="openai",
        base_url=server_url + "/v1",
        max_retries=overrides.pop("max_retries", 1),
        timeout=overrides.pop("timeout", 10.0),
        concurrency=overrides.pop("provider_concurrency", 2),
    )
    settings = Settings(
        data_dir=data_dir,
        default_embedding_model=FAKE_MODEL,
        auto_ollama=False,
        providers={"fake": provider},
        embeddings=overrides.pop("embeddings", EmbeddingSettings()),
    )
    return settings.with_(**overrides)


@asynccontextmanager
async def open_service(data_dir: Path, server_url: str, **overrides: Any) -> AsyncIterator[KnowledgeService]:
    ks = await KnowledgeService.open(settings=fake_settings(data_dir, server_url, **overrides))
    try:
        yield ks
    finally:
        await ks.close()


def write_files(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root
