"""The settings' types: one frozen dataclass per table of the settings file, with its defaults.

`ktui.core.config` loads them (file + environment), `ktui.core.config_parse` validates a
decoded table into them; docs/configuration.md documents every field.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import platformdirs

from ktui.core.models import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE
from ktui.core.store_memory import BUILD_MEMORY

APP_NAME = "ktui"
DEFAULT_EMBEDDING_MODEL = "builtin::wordllama"
PROVIDER_KINDS = ("builtin", "ollama", "openai", "rerank", "tei-rerank")
DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"
LANGUAGE_CODE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,40}$")  # a Tesseract language: eng, chi_sim, deu


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    """One named provider. `kind` decides the protocol:

    * `builtin`   — the offline WordLlama model (always present as "builtin");
    * `ollama`    — Ollama's /api/embed, /api/tags, /api/show;
    * `openai`    — any OpenAI-compatible /v1/embeddings;
    * `rerank`    — a /v1/rerank server (Jina, Cohere-compatible, OpenAI-compatible);
    * `tei-rerank`— Hugging Face TEI's /rerank.
    """

    name: str
    kind: str
    base_url: str | None = None
    api_key_env: str | None = None  # name of the environment variable holding the key
    models: tuple[str, ...] = ()  # models to list when the server cannot list them
    dimensions: int | None = None  # sent to OpenAI-compatible servers only when set
    batch_size: int | None = None  # overrides EmbeddingSettings.batch_size
    concurrency: int = 2  # concurrent requests to this provider
    timeout: float = 60.0  # seconds per request
    max_retries: int = 3  # on 429, 5xx and timeouts, with exponential backoff
    origin: str | None = None  # where the provider came from when not the settings file ("OLLAMA_HOST")

    @property
    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None


@dataclass(frozen=True, slots=True)
class IngestSettings:
    max_file_bytes: int = 50 * 1024 * 1024
    max_body_bytes: int = 20 * 1024 * 1024  # a fetched URL's body
    include: tuple[str, ...] = ()  # glob patterns a directory file must match (empty = all)
    exclude: tuple[str, ...] = ()  # extra glob patterns skipped on directory walks
    max_sitemap_urls: int = 10_000
    max_sitemap_depth: int = 3  # nested sitemap indexes followed
    fetch_concurrency: int = 4  # shared limit of concurrent URL fetches
    fetch_timeout: float = 30.0
    max_redirects: int = 5
    parse_workers: int = 1  # processes that read and chunk files (0 = threads in the main process)
    parse_timeout: float = 300.0  # seconds one file may take to read and chunk before it fails
    parse_memory_mb: int = 2048  # address space of a parse worker (RLIMIT_AS); past it the file fails
    # read the next queued files ahead (and embed them into the cache in provider-sized
    # batches) while the running ones embed, and group the phase writes of tasks that move on
    # together. On by default: on 2,000 small files it was 1.49x (1.42..1.49) on the built-in
    # model, and through a real CPU-bound server the same speed with 19x fewer requests;
    # without it a request carries only what the `concurrency` running files ask for, one
    # text per request for small files (issue 17, docs/benchmarks.md).
    pipelining: bool = True


@dataclass(frozen=True, slots=True)
class OcrSettings:
    """`[ocr]`: recognising scanned PDF pages and images (docs/configuration.md). A base's own
    OCR settings, when set, win over `enabled`, `languages` and `max_pages`."""

    enabled: bool = True  # images and PDF pages without a text layer are recognised
    languages: tuple[str, ...] = ("eng",)  # Tesseract language codes, e.g. ["eng", "deu"]
    max_pages: int = 500  # pages recognised per file; a file needing more fails
    max_pixels: int = 90_000_000  # per image, image frame or rendered page
    page_timeout: float = 120.0  # seconds for one page
    render_dpi: int = 300  # PDF pages without a scanned image inside are rendered at this
    tesseract: str = "tesseract"  # the Tesseract program: a name on PATH or a path
    cache_entries: int = 200_000  # recognised pages kept in ocr-cache.sqlite (0 = no cache)


@dataclass(frozen=True, slots=True)
class EmbeddingSettings:
    batch_size: int = 64
    memory_cache_entries: int = 20_000
    persistent_cache_entries: int = 500_000  # 0 disables the on-disk cache


@dataclass(frozen=True, slots=True)
class ModelOverride:
    """`[models."provider::model"]` in the settings file: what to change in a model's profile."""

    query_prefix: str | None = None
    document_prefix: str | None = None
    window_tokens: int | None = None
    search_mode: str | None = None
    hybrid_alpha: float | None = None


LEASE_TTL = 30.0  # `[store] lease_ttl` default, seconds
MIN_LEASE_TTL = 3.0  # a renewal every second at the least: below it a busy machine's beats run late
MAX_LEASE_TTL = 3600.0  # an hour: beyond it a dead machine's items would wait longer than anyone would


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """`[store]`: where the catalogue and the chunks live (docs/postgres.md). No `url`: SQLite
    files in the data directory. A `postgresql://` URL: that database, in `schema` (one schema
    is one shared data directory; the local data directory keeps settings, logs and caches).
    The URL may hold a password: it is never shown (`where` and repr are redacted)."""

    url: str | None = field(default=None, repr=False)
    schema: str = "ktui"
    # seconds an item's lease lives without a renewal (renewed every third of it): how long
    # a killed or cut-off process's items wait before another process picks them up
    lease_ttl: float = LEASE_TTL
    # maintenance_work_mem while an HNSW index is built (core/store_memory.py: checked, canonical)
    build_memory: str = BUILD_MEMORY
    origin: str | None = None  # where the URL came from when not the settings file ("KTUI_STORE", "--store")

    @property
    def postgres(self) -> bool:
        return self.url is not None

    @property
    def where(self) -> str:
        """The store named without secrets: `postgresql://user@host:port/db (schema s)`, or `sqlite`."""
        if self.url is None:
            return "sqlite"
        from ktui.core.store_url import redact_store_url

        return f"{redact_store_url(self.url)} (schema {self.schema})"

    def __repr__(self) -> str:
        return (f"StoreSettings(where={self.where!r}, lease_ttl={self.lease_ttl!r}, "
                f"build_memory={self.build_memory!r}, origin={self.origin!r})")


@dataclass(frozen=True, slots=True)
class Settings:
    data_dir: Path
    config_file: Path | None = None
    default_embedding_model: str = DEFAULT_EMBEDDING_MODEL
    chunk_size: int = DEFAULT_CHUNK_SIZE
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP
    concurrency: int = 5
    auto_ollama: bool = True  # add an "ollama" provider at $OLLAMA_HOST / localhost
    ingest: IngestSettings = field(default_factory=IngestSettings)
    ocr: OcrSettings = field(default_factory=OcrSettings)
    embeddings: EmbeddingSettings = field(default_factory=EmbeddingSettings)
    providers: dict[str, ProviderConfig] = field(default_factory=dict)
    keymap: dict[str, str] = field(default_factory=dict)
    theme: str | None = None
    serve_token: str | None = None  # `ktui serve`: bearer token (required to bind beyond 127.0.0.1)
    models: dict[str, ModelOverride] = field(default_factory=dict)
    store: StoreSettings = field(default_factory=StoreSettings)

    def provider(self, name: str) -> ProviderConfig | None:
        return self.effective_providers().get(name)

    def effective_providers(self) -> dict[str, ProviderConfig]:
        """Configured providers plus the implicit ones (builtin, and ollama when enabled)."""
        out = {"builtin": ProviderConfig(name="builtin", kind="builtin")}
        if self.auto_ollama and "ollama" not in self.providers:
            env_url = os.environ.get("OLLAMA_HOST", "").strip()
            out["ollama"] = ProviderConfig(name="ollama", kind="ollama", base_url=_normalise_host(env_url or DEFAULT_OLLAMA_URL),
                                           origin="OLLAMA_HOST" if env_url else None)
        out.update(self.providers)
        return out

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    @classmethod
    def defaults(cls, data_dir: Path | str) -> Settings:
        return cls(data_dir=Path(data_dir))


def _normalise_host(url: str) -> str:
    """Read OLLAMA_HOST the way Ollama itself does: `host`, `host:port`, `:port` or a URL.

    Without a scheme the port defaults to Ollama's 11434 (`OLLAMA_HOST=0.0.0.0` is
    the common server setting) and an empty host means 127.0.0.1; a full
    `http(s)://` URL is taken as written.
    """
    url = url.strip()
    if not url:
        return DEFAULT_OLLAMA_URL
    if "://" in url:
        return url.rstrip("/")
    hostport, slash, path = url.partition("/")
    try:
        parts = urlsplit("http://" + hostport)
        host, port = parts.hostname or "127.0.0.1", parts.port or 11434
    except ValueError:  # not host[:port]; let the HTTP client report it
        return ("http://" + url).rstrip("/")
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}{slash}{path}".rstrip("/")


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME))
