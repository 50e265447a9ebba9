"""Fixtures for the TUI tests: a real KnowledgeService on tmp_path, a deterministic
embedding server (tests/support/embedding_server.py) configured as the "fake"
provider, and helpers to wait for the app's state without sleeping blindly."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ktui.core.config import ProviderConfig, Settings
from tests.support.embedding_server import EmbeddingServerHandle, start_embedding_server

MODEL = "fake::any"
DIMS = 32


@pytest.fixture
def embedding_server() -> Iterator[EmbeddingServerHandle]:
    handle = start_embedding_server(DIMS)
    try:
        yield handle
    finally:
        handle.stop()


def make_settings(data_dir: Path, server: EmbeddingServerHandle, **kw) -> Settings:
    return Settings(
        data_dir=data_dir,
        providers={"fake": ProviderConfig(name="fake", kind="openai", base_url=server.openai_url,
                                          models=("any",), max_retries=0)},
        auto_ollama=False,
        default_embedding_model=MODEL,
        chunk_size=64,
        chunk_overlap=8,
        **kw,
    )


@pytest.fixture
def settings(tmp_path: Path, embedding_server: EmbeddingServerHandle) -> Settings:
    return make_settings(tmp_path / "data", embedding_server)


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    """A small folder of real Markdown files."""
    root = tmp_path / "docs"
    (root / "guide").mkdir(parents=True)
    (root / "alpha.md").write_text("# Alpha\n\nApples grow on apple trees in the orchard.\n", encoding="utf-8")
    (root / "beta.md").write_text("# Beta\n\nBananas ripen in the warm sun of the tropics.\n", encoding="utf-8")
    (root / "guide" / "gamma.md").write_text("# Gamma\n\nCherries are small red stone fruits.\n", encoding="utf-8")
    return root


async def until(predicate: Callable[[], bool], pilot, timeout: float | None = None, what: str = "condition") -> None:
    """Pause the pilot until `predicate()` holds (the app keeps running meanwhile).

    No deadline by default: how long indexing takes depends on the machine's load, and
    pytest-timeout bounds every test; pass `timeout` only where a wait must fail fast."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not predicate():
        if deadline is not None and time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.02)
    await pilot.pause()


def run(coro):
    return asyncio.get_event_loop().run_until_complete(coro)
