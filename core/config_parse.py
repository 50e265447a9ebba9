"""Validating a decoded settings table into `Settings`, naming the key of any bad value.

Every error is a `ConfigError` carrying the file and the dotted key (`ingest.fetch_timeout`),
so the user knows exactly what to fix.
"""

from __future__ import annotations

import math
from dataclasses import fields
from pathlib import Path
from typing import Any

from ktui.core.config_types import (
    DEFAULT_EMBEDDING_MODEL,
    DEFAULT_OLLAMA_URL,
    LANGUAGE_CODE,
    LEASE_TTL,
    MAX_LEASE_TTL,
    MIN_LEASE_TTL,
    PROVIDER_KINDS,
    EmbeddingSettings,
    IngestSettings,
    ModelOverride,
    OcrSettings,
    ProviderConfig,
    Settings,
    StoreSettings,
    default_data_dir,
)
from ktui.core.errors import ConfigError
from ktui.core.models import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE

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
    "store",
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

    store = p.store(raw.get("store", {}))

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
        store=store,
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

    def store(self, table: Any) -> StoreSettings:
        from ktui.core.store_memory import BUILD_MEMORY, MemorySizeError, check_build_memory
        from ktui.core.store_url import DEFAULT_SCHEMA, StoreUrlError, check_schema, check_store_url

        if not isinstance(table, dict):
            raise self.fail("store", "must be a table")
        unknown = sorted(set(table) - {"url", "schema", "lease_ttl", "build_memory"})
        if unknown:
            raise self.fail(f"store.{unknown[0]}", "unknown setting (known: build_memory, lease_ttl, schema, url)")
        try:
            url = check_store_url(table["url"]) if "url" in table else None
        except StoreUrlError as exc:
            raise self.fail("store.url", str(exc)) from None
        try:
            schema = check_schema(table.get("schema", DEFAULT_SCHEMA))
        except StoreUrlError as exc:
            raise self.fail("store.schema", str(exc)) from None
        lease_ttl = self.number(table, "lease_ttl", LEASE_TTL, minimum=MIN_LEASE_TTL, prefix="store.")
        if lease_ttl > MAX_LEASE_TTL:
            raise self.fail("store.lease_ttl", f"must be at most {MAX_LEASE_TTL:g}")
        try:
            build_memory = check_build_memory(table.get("build_memory", BUILD_MEMORY))
        except MemorySizeError as exc:
            raise self.fail("store.build_memory", str(exc)) from None
        return StoreSettings(url=url, schema=schema, lease_ttl=lease_ttl, build_memory=build_memory)

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
