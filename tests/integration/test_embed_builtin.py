"""The built-in WordLlama model, for real: offline loading, equivalence with WordLlama, service use."""

from __future__ import annotations

import asyncio
import logging
import socket
import subprocess
import sys
import threading

import numpy as np
import pytest

from ktui.core.config import Settings
from ktui.core.embeddings import EmbeddingService, builtin
from ktui.core.errors import ModelNotFoundError


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a network connection fails the test loudly."""
    attempts: list[object] = []

    def blocked(*args, **kwargs):
        attempts.append(args)
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", blocked)
    monkeypatch.setattr(socket.socket, "connect_ex", blocked)
    monkeypatch.setattr(socket, "create_connection", blocked)
    monkeypatch.setattr(socket, "getaddrinfo", blocked)
    return attempts


async def test_loads_and_embeds_without_network(no_network, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(builtin, "_model", None)  # force a fresh load inside this test
    svc = EmbeddingService(Settings(data_dir=tmp_path, auto_ollama=False))
    vecs = await svc.embed("builtin::wordllama", ["the cat sat on the mat", "a kitten rested on a rug", "tax law"])
    assert builtin._model is not None and no_network == []
    assert vecs.shape == (3, 256) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2]  # it is a real semantic model
    assert not (tmp_path / ".cache" / "wordllama").exists()  # no download cache was created
    await svc.aclose()


def test_import_does_not_import_wordllama_package():
    """Importing wordllama runs logging.basicConfig, which would print into the TUI; we avoid it."""
    code = (
        "import sys, logging\n"
        "from ktui.core.embeddings.builtin import load_model\n"
        "v = load_model().embed(['hello'])\n"
        "assert v.shape == (1, 256)\n"
        "assert 'wordllama' not in sys.modules and not logging.getLogger().handlers, sys.modules.keys()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_matches_wordllama_reference_pooling():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        from tokenizers import Tokenizer
        from wordllama.inference import WordLlamaInference
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    model = builtin.load_model()
    tok = Tokenizer.from_file(str(builtin.package_dir() / builtin.TOKENIZER_FILE))
    ref = WordLlamaInference(model.table, tok)
    texts = ["Hello world", "Semantic search over local files", "ünïcödé and emoji 🚀", "x " * 700]
    np.testing.assert_allclose(model.embed(texts), ref.embed(texts, norm=True), atol=1e-5)


def test_packaged_loader_really_is_broken_offline():
    """Documents why we bypass WordLlama.load(): it cannot find the tokenizer it ships."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        from wordllama import WordLlama
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    with pytest.raises(FileNotFoundError, match="[Tt]okenizer"):
        WordLlama.load(disable_download=True, cache_dir="/nonexistent-ktui-cache")


def test_truncated_models_and_empty_text():
    model = builtin.load_model()
    full = model.embed(["matryoshka dimensions"])[0]
    small = model.embed(["matryoshka dimensions"], 64)[0]
    np.testing.assert_allclose(small, full[:64] / np.linalg.norm(full[:64]), atol=1e-5)
    empty = model.embed(["", "ok"])
    assert not empty[0].any() and np.isfinite(empty).all()  # no tokens: a zero row, never NaN
    assert model.embed([]).shape == (0, 256)


def test_load_once_from_many_threads(monkeypatch):
    monkeypatch.setattr(builtin, "_model", None)
    seen: list[object] = []
    threads = [threading.Thread(target=lambda: seen.append(builtin.load_model())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 4 and all(m is seen[0] for m in seen)


async def test_service_models_dims_and_event_loop_stays_free(tmp_path, monkeypatch):
    svc = EmbeddingService(Settings(data_dir=tmp_path, auto_ollama=False))
    assert await svc.detect_dimensions("builtin::wordllama") == 256
    assert await svc.detect_dimensions("builtin::wordllama-128") == 128
    listing = await svc.list_models()
    assert [m.id for m in listing.models] == ["builtin::wordllama", "builtin::wordllama-128", "builtin::wordllama-64"]
    with pytest.raises(ModelNotFoundError, match="builtin::wordllama"):
        await svc.embed("builtin::bert", ["x"])
    # embedding runs in a worker thread: while the model works, the loop runs. Shown
    # without timing anything: the real model call (a spy around it) waits until the
    # event loop has run a callback, which it could never do on the loop's own thread.
    from ktui.core.embeddings.builtin import load_model

    model_class = type(load_model())
    real = model_class.embed
    loop_ran = threading.Event()
    on_loop: list[bool] = []

    def spy(self, texts, dims):
        on_loop.append(threading.current_thread() is threading.main_thread())
        loop.call_soon_threadsafe(loop_ran.set)
        assert loop_ran.wait(30), "the event loop did not run while the model embedded"
        return real(self, texts, dims)

    loop = asyncio.get_running_loop()
    monkeypatch.setattr(model_class, "embed", spy)
    out = await svc.embed("builtin::wordllama", [f"text number {i} " * 300 for i in range(30)])
    assert out.shape == (30, 256) and on_loop == [False]
    await svc.aclose()
