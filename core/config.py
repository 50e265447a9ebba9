"""Settings: a TOML file plus environment overrides, typed and validated.

Where things live:
  * settings file: `$KTUI_CONFIG`, else `<platformdirs user config dir>/ktui/config.toml`
    (a missing file means "all defaults");
  * data directory: `$KTUI_HOME`, else the file's `data_dir`, else the platformdirs
    user data dir.

Every key of the file is documented in docs/configuration.md. A malformed file or
a value of the wrong type raises `ConfigError` naming the file and the key, so the
user knows exactly what to fix.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import platformdirs

from ktui.core.errors import ConfigError
from ktui.core.models import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE

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
    # read the next queued files ahead (and embed them into the cache) while the running ones
    # embed, and group the phase writes of tasks that move on together; off by default: issue
    # 14 measured no gain beyond the noise on the built-in model (docs/benchmarks.md)
    pipelining: bool = False


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


def default_config_path() -> Path:
    env = os.environ.get("KTUI_CONFIG")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME))


def load_settings(
    config_file: Path | str | None = None,
    data_dir: Path | str | None = None,
    *,
    env: dict[str, str] | None = None,
) -> Settings:
    """Read the settings file (if any) and apply environment overrides.

    Precedence for the data directory: argument > $KTUI_HOME > file > platform default.
    """
    env = dict(os.environ) if env is None else env
    path = Path(config_file).expanduser() if config_file else None
    if path is None:
        # `env` is authoritative: default_config_path() would consult os.environ again
        path = (
            Path(env["KTUI_CONFIG"]).expanduser()
            if env.get("KTUI_CONFIG")
            else Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"
        )
        explicit = bool(env.get("KTUI_CONFIG"))
    else:
        explicit = True
    raw: dict[str, Any] = {}
    if path.exists():
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"Settings file is not valid TOML: {exc}", file=str(path)) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"Settings file cannot be read: {exc}", file=str(path)) from None
    elif explicit:
        raise ConfigError("Settings file does not exist", file=str(path))
    settings = parse_settings(raw, file=str(path) if path.exists() else None)
    resolved_dir = (
        Path(data_dir).expanduser()
        if data_dir
        else Path(env["KTUI_HOME"]).expanduser()
        if env.get("KTUI_HOME")
        else settings.data_dir
    )
    if not data_dir and not env.get("KTUI_HOME") and raw.get("data_dir") and not resolved_dir.is_absolute():
        resolved_dir = path.parent / resolved_dir  # relative to the settings file, not to wherever ktui runs
    return replace(settings, data_dir=resolved_dir, config_file=path if path.exists() else None)


# --- parsing --------------------------------------------------------------

_TOP_KEYS = {
    "data_dir",
    "models",
    "default_embedding_model",
    "chunk_size",
    "chunk_overlap",
    "concurrency",
    "auto_ollama",
    "ingest",
    "ocr",
    "embeddings",
    "providers",
    "keymap",
    "theme",
    "serve_token",
}


def parse_settings(raw: dict[str, Any], *, file: str | None = None) -> Settings:
    """Turn a decoded TOML table into Settings, naming the key of any bad value."""
    p = _Parser(file)
    unknown = set(raw) - _TOP_KEYS
    if unknown:
        raise ConfigError(f"Unknown setting '{sorted(unknown)[0]}'", file=file, key=sorted(unknown)[0])
    data_dir = p.string(raw, "data_dir", None)
    model = p.string(raw, "default_embedding_model", DEFAULT_EMBEDDING_MODEL)
    if "::" not in model:
        raise ConfigError("must look like 'provider::model'", file=file, key="default_embedding_model")
    chunk_size = p.integer(raw, "chunk_size", DEFAULT_CHUNK_SIZE, minimum=16, maximum=100_000)
    chunk_overlap = p.integer(raw, "chunk_overlap", min(DEFAULT_CHUNK_OVERLAP, chunk_size - 1), minimum=0)
    if chunk_overlap >= chunk_size:
        raise ConfigError("must be smaller than chunk_size", file=file, key="chunk_overlap")
    concurrency = p.integer(raw, "concurrency", 5, minimum=1, maximum=64)
    auto_ollama = p.boolean(raw, "auto_ollama", True)
    theme = p.string(raw, "theme", None)
    serve_token = p.string(raw, "serve_token", None)
    if serve_token is not None and not serve_token.strip():
        raise ConfigError("must not be empty (leave it out for no token)", file=file, key="serve_token")

    ingest = p.section(raw, "ingest", IngestSettings, {
        "max_file_bytes": ("int", 1),
        "max_body_bytes": ("int", 1),
        "include": ("globs", None),
        "exclude": ("globs", None),
        "max_sitemap_urls": ("int", 1),
        "max_sitemap_depth": ("int", 0),
        "fetch_concurrency": ("int", 1),
        "fetch_timeout": ("float", 0.1),
        "max_redirects": ("int", 0),
        "parse_workers": ("int", 0),
        "parse_timeout": ("float", 1.0),
        "parse_memory_mb": ("int", 256),
        "pipelining": ("bool", None),
    })
    ocr = p.section(raw, "ocr", OcrSettings, {
        "enabled": ("bool", None),
        "languages": ("languages", None),
        "max_pages": ("int", 1),
        "max_pixels": ("int", 1_000_000),
        "page_timeout": ("float", 1.0),
        "render_dpi": ("int", 72),
        "tesseract": ("string", None),
        "cache_entries": ("int", 0),
    })
    embeddings = p.section(raw, "embeddings", EmbeddingSettings, {
        "batch_size": ("int", 1),
        "memory_cache_entries": ("int", 0),
        "persistent_cache_entries": ("int", 0),
    })

    providers: dict[str, ProviderConfig] = {}
    table = raw.get("providers", {})
    if not isinstance(table, dict):
        raise ConfigError("must be a table of named providers", file=file, key="providers")
    for name, spec in table.items():
        providers[name] = p.provider(name, spec)

    keymap_raw = raw.get("keymap", {})
    if not isinstance(keymap_raw, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in keymap_raw.items()
    ):
        raise ConfigError("must map binding ids to key strings", file=file, key="keymap")

    models_raw = raw.get("models", {})
    if not isinstance(models_raw, dict):
        raise ConfigError("must be a table of model ids", file=file, key="models")
    models = {name: p.model_override(name, spec) for name, spec in models_raw.items()}

    return Settings(
        data_dir=Path(data_dir).expanduser() if data_dir else default_data_dir(),
        default_embedding_model=model,
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        concurrency=concurrency,
        auto_ollama=auto_ollama,
        ingest=ingest,
        ocr=ocr,
        embeddings=embeddings,
        providers=providers,
        keymap=dict(keymap_raw),
        theme=theme,
        serve_token=serve_token,
        models=models,
    )


class _Parser:
    def __init__(self, file: str | None):
        self.file = file

    def fail(self, key: str, message: str) -> ConfigError:
        return ConfigError(message, file=self.file, key=key)

    def string(self, raw: dict[str, Any], key: str, default: str | None, *, prefix: str = "") -> Any:
        if key not in raw:
            return default
        value = raw[key]
        if not isinstance(value, str) or not value.strip():
            raise self.fail(prefix + key, "must be a non-empty string")
        return value.strip()

    def integer(self, raw: dict[str, Any], key: str, default: int, *, minimum: int | None = None,
                maximum: int | None = None, prefix: str = "") -> int:
        if key not in raw:
            return default
        value = raw[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(prefix + key, "must be an integer")
        if minimum is not None and value < minimum:
            raise self.fail(prefix + key, f"must be at least {minimum}")
        if maximum is not None and value > maximum:
            raise self.fail(prefix + key, f"must be at most {maximum}")
        return value

    def number(self, raw: dict[str, Any], key: str, default: float, *, minimum: float, prefix: str = "") -> float:
        if key not in raw:
            return default
        value = raw[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(prefix + key, "must be a finite number")
        if value < minimum:
            raise self.fail(prefix + key, f"must be at least {minimum}")
        return float(value)

    def boolean(self, raw: dict[str, Any], key: str, default: bool, *, prefix: str = "") -> bool:
        if key not in raw:
            return default
        if not isinstance(raw[key], bool):
            raise self.fail(prefix + key, "must be true or false")
        return bool(raw[key])

    def model_override(self, name: str, spec: Any) -> ModelOverride:
        key = f"models.{name}"
        if "::" not in name:
            raise self.fail(key, "must be a model id like 'ollama::nomic-embed-text'")
        if not isinstance(spec, dict):
            raise self.fail(key, "must be a table")
        allowed = {"query_prefix", "document_prefix", "window_tokens", "search_mode", "hybrid_alpha"}
        unknown = sorted(set(spec) - allowed)
        if unknown:
            raise self.fail(f"{key}.{unknown[0]}", f"unknown model setting (known: {', '.join(sorted(allowed))})")
        for prefix_key in ("query_prefix", "document_prefix"):
            if prefix_key in spec and not isinstance(spec[prefix_key], str):
                raise self.fail(f"{key}.{prefix_key}", "must be a string (\"\" for none)")
        mode = spec.get("search_mode")
        if mode is not None and mode not in ("default", "bm25", "hybrid"):
            raise self.fail(f"{key}.search_mode", "must be one of default, bm25, hybrid")
        alpha = spec.get("hybrid_alpha")
        if alpha is not None:
            alpha = self.number(spec, "hybrid_alpha", 0.5, minimum=0.0, prefix=key + ".")
            if alpha > 1.0:
                raise self.fail(f"{key}.hybrid_alpha", "must be at most 1")
        window = None
        if "window_tokens" in spec:
            window = self.integer(spec, "window_tokens", 0, minimum=16, maximum=1_000_000, prefix=key + ".")
        return ModelOverride(spec.get("query_prefix"), spec.get("document_prefix"), window, mode, alpha)

    def strings(self, raw: dict[str, Any], key: str, *, prefix: str = "") -> tuple[str, ...]:
        value = raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise self.fail(prefix + key, "must be a list of non-empty strings")
        return tuple(v.strip() for v in value)

    def languages(self, raw: dict[str, Any], key: str, *, prefix: str = "") -> tuple[str, ...]:
        value = raw.get(key)
        if isinstance(value, str):
            value = value.replace("+", " ").split()
        if not isinstance(value, list) or not value:
            raise self.fail(prefix + key, "must be a non-empty list of language codes, e.g. [\"eng\", \"deu\"]")
        for lang in value:
            if not isinstance(lang, str) or not LANGUAGE_CODE.match(lang):
                raise self.fail(prefix + key, f"{lang!r} is not a Tesseract language code (letters, digits, _)")
        return tuple(dict.fromkeys(value))

    def section(self, raw: dict[str, Any], name: str, cls: type, spec: dict[str, tuple[str, Any]]) -> Any:
        table = raw.get(name, {})
        if not isinstance(table, dict):
            raise self.fail(name, "must be a table")
        unknown = set(table) - set(spec)
        if unknown:
            key = sorted(unknown)[0]
            raise self.fail(f"{name}.{key}", "unknown setting")
        defaults = cls()
        values: dict[str, Any] = {}
        prefix = f"{name}."
        for key, (kind, minimum) in spec.items():
            default = getattr(defaults, key)
            if kind == "int":
                values[key] = self.integer(table, key, default, minimum=minimum, prefix=prefix)
            elif kind == "float":
                values[key] = self.number(table, key, default, minimum=minimum, prefix=prefix)
            elif kind == "globs":
                values[key] = self.strings(table, key, prefix=prefix) if key in table else default
            elif kind == "bool":
                values[key] = self.boolean(table, key, default, prefix=prefix)
            elif kind == "string":
                values[key] = self.string(table, key, default, prefix=prefix)
            elif kind == "languages":
                values[key] = self.languages(table, key, prefix=prefix) if key in table else default
        return cls(**values)

    def provider(self, name: str, spec: Any) -> ProviderConfig:
        key = f"providers.{name}"
        if not isinstance(spec, dict):
            raise self.fail(key, "must be a table")
        if not name or "::" in name or name != name.strip():
            raise self.fail(key, "provider names must be non-empty and must not contain '::'")
        allowed = {f.name for f in fields(ProviderConfig)} - {"name"}
        unknown = set(spec) - allowed
        if unknown:
            raise self.fail(f"{key}.{sorted(unknown)[0]}", "unknown provider setting")
        kind = spec.get("kind")
        if kind not in PROVIDER_KINDS:
            raise self.fail(f"{key}.kind", f"must be one of {', '.join(PROVIDER_KINDS)}")
        if name == "builtin" and kind != "builtin":
            # it would replace the offline model behind the default 'builtin::wordllama'
            raise self.fail(f"{key}.kind", "the name 'builtin' is reserved for the built-in model")
        prefix = key + "."
        base_url = self.string(spec, "base_url", None, prefix=prefix)
        if kind != "builtin" and base_url is None:
            if kind == "ollama":
                base_url = DEFAULT_OLLAMA_URL
            else:
                raise self.fail(prefix + "base_url", f"is required for a '{kind}' provider")
        if base_url is not None:
            if not base_url.startswith(("http://", "https://")):
                raise self.fail(prefix + "base_url", "must start with http:// or https://")
        dims = spec.get("dimensions")
        if dims is not None:
            dims = self.integer(spec, "dimensions", 0, minimum=1, prefix=prefix)
        batch = spec.get("batch_size")
        if batch is not None:
            batch = self.integer(spec, "batch_size", 0, minimum=1, prefix=prefix)
        return ProviderConfig(
            name=name,
            kind=kind,
            base_url=base_url.rstrip("/") if base_url else None,
            api_key_env=self.string(spec, "api_key_env", None, prefix=prefix),
            models=self.strings(spec, "models", prefix=prefix) if "models" in spec else (),
            dimensions=dims,
            batch_size=batch,
            concurrency=self.integer(spec, "concurrency", 2, minimum=1, maximum=64, prefix=prefix),
            timeout=self.number(spec, "timeout", 60.0, minimum=0.1, prefix=prefix),
            max_retries=self.integer(spec, "max_retries", 3, minimum=0, maximum=10, prefix=prefix),
        )
