"""`builtin::wordllama`: the offline default model, from files inside the wordllama wheel.

WordLlama is a static token-embedding model (Llama-2 tokenizer + a 32000 x 256
float16 table distilled from LLM embeddings): a text's vector is the mean of its
token vectors, L2-normalised. It needs no GPU and no network, and is fast enough
to embed whole knowledge bases on a laptop CPU.

Why we do not call `WordLlama.load()`: the packaged release (0.4.x) looks for its
tokenizer under `wordllama/tokenizer/` while the wheel ships it in
`wordllama/tokenizers/`, and then downloads it from Hugging Face. We read the two
files ourselves: the safetensors weights (`weights/l2_supercat_256.safetensors`)
and the tokenizer config (`tokenizers/l2_supercat_tokenizer_config.json`), found
through the package's own location (`importlib.util.find_spec`, which does not
import wordllama: its import runs `logging.basicConfig`, which would print log
lines into the terminal UI).

Pooling is ours too, for speed: WordLlama pads a batch to its longest text and
gathers a (batch x tokens x 256) float temporary (64 MB for 64 chunks of 1,000
tokens; page faults on fresh memory made that 30x slower than the maths here).
We instead weight each text's *distinct* tokens by their counts
(`counts @ table[unique]`), which is the same mean with a fraction of the memory
traffic. The result equals WordLlama's `embed(norm=True)` (a test checks this).

Models: `wordllama` (256 dims, the default); `wordllama-128` and `wordllama-64` use
the first 128 / 64 dimensions (the weights are Matryoshka-trained, which is what
WordLlama's own `trunc_dim` does) for smaller stores.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ktui.core.config import ProviderConfig
from ktui.core.embeddings.base import EmbeddingProvider, l2_normalise, model_id
from ktui.core.errors import ModelNotFoundError, ProviderError
from ktui.core.models import EmbeddingModelInfo

WEIGHTS_FILE = "weights/l2_supercat_256.safetensors"
TOKENIZER_FILE = "tokenizers/l2_supercat_tokenizer_config.json"
TENSOR_KEY = "embedding.weight"
DEFAULT_MODEL = "wordllama"
BUILTIN_MODELS: dict[str, int] = {"wordllama": 256, "wordllama-128": 128, "wordllama-64": 64}


def package_dir() -> Path:
    """The installed wordllama package folder, without importing it."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise ProviderError("The built-in model needs the 'wordllama' package: pip install wordllama")
    return Path(next(iter(spec.submodule_search_locations)))


@dataclass(frozen=True)
class WordLlamaModel:
    """The loaded table and tokenizer. Thread-safe to call (the tokenizer is Rust, the rest numpy)."""

    table: np.ndarray  # (vocab, 256) float32
    tokenizer: object  # tokenizers.Tokenizer

    @property
    def dims(self) -> int:
        return int(self.table.shape[1])

    def embed(self, texts: list[str], dims: int | None = None) -> np.ndarray:
        """`(len(texts), dims)` float32, unit rows (a text with no tokens gives a zero row)."""
        width = dims or self.dims
        out = np.zeros((len(texts), width), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch(texts, add_special_tokens=False)  # type: ignore[attr-defined]
        vocab = self.table.shape[0]
        table = self.table[:, :width] if width != self.dims else self.table
        for row, enc in enumerate(encodings):
            ids = np.asarray(enc.ids, dtype=np.intp)
            if ids.size == 0:
                continue
            np.clip(ids, 0, vocab - 1, out=ids)
            unique, counts = np.unique(ids, return_counts=True)
            out[row] = (counts.astype(np.float32) @ table[unique]) / ids.size
        return l2_normalise(out)


_model: WordLlamaModel | None = None
_lock = threading.Lock()


def load_model() -> WordLlamaModel:
    """Load the weights and tokenizer once per process (thread-safe, lazy, offline)."""
    global _model
    if _model is not None:
        return _model
    with _lock:
        if _model is None:
            _model = _load()
    return _model


def _load() -> WordLlamaModel:
    root = package_dir()
    weights, tok_file = root / WEIGHTS_FILE, root / TOKENIZER_FILE
    for f in (weights, tok_file):
        if not f.is_file():
            raise ProviderError(
                f"The built-in model file {f} is missing from the installed wordllama package; "
                "reinstall it: pip install --force-reinstall wordllama"
            )
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    try:
        tensors = load_file(str(weights))
        table = np.ascontiguousarray(tensors[TENSOR_KEY], dtype=np.float32)
        tokenizer = Tokenizer.from_file(str(tok_file))
    except Exception as exc:  # corrupt files: say which, and how to fix
        raise ProviderError(f"Cannot load the built-in model from {root}: {exc}. Reinstall wordllama.") from exc
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return WordLlamaModel(table=table, tokenizer=tokenizer)


class BuiltinProvider(EmbeddingProvider):
    """Runs WordLlama in worker threads (`asyncio.to_thread`) so the event loop never stalls."""

    def __init__(self, config: ProviderConfig | None = None):
        super().__init__(config or ProviderConfig(name="builtin", kind="builtin"))
        self._sem: asyncio.Semaphore | None = None

    def _limit(self) -> asyncio.Semaphore:
        # ProviderConfig.concurrency worker threads at most: more would only fight over 2 cores
        if self._sem is None:
            self._sem = asyncio.Semaphore(max(1, self.config.concurrency))
        return self._sem

    def _dims(self, model: str) -> int:
        dims = BUILTIN_MODELS.get(model)
        if dims is None:
            raise ModelNotFoundError(
                f"The built-in provider has no model '{model}'. Available: "
                + ", ".join(model_id(self.name, m) for m in BUILTIN_MODELS)
            )
        return dims

    async def embed(self, model: str, texts: list[str]) -> np.ndarray:
        dims = self._dims(model)
        async with self._limit():
            return await asyncio.to_thread(lambda: load_model().embed(texts, dims))

    async def list_models(self) -> list[EmbeddingModelInfo]:
        return [EmbeddingModelInfo(model_id(self.name, m), self.name, m, d) for m, d in BUILTIN_MODELS.items()]
