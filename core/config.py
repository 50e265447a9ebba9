"""Settings: a TOML file plus environment overrides, typed and validated.

Where things live:
  * settings file: `$KTUI_CONFIG`, else `<platformdirs user config dir>/ktui/config.toml`
    (a missing file means "all defaults");
  * data directory: `$KTUI_HOME`, else the file's `data_dir`, else the platformdirs
    user data dir.

Every key of the file is documented in docs/configuration.md. A malformed file or
a value of the wrong type raises `ConfigError` naming the file and the key, so the
user knows exactly what to fix.

This module finds and reads the file; the types are in `config_types.py` and the
validation in `config_parse.py` (both re-exported here, the import path everyone uses).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

import platformdirs

from ktui.core.config_parse import parse_settings
from ktui.core.config_types import (
    APP_NAME,
    DEFAULT_EMBEDDING_MODEL,
    DEFAULT_OLLAMA_URL,
    LANGUAGE_CODE,
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

__all__ = [
    "APP_NAME", "DEFAULT_EMBEDDING_MODEL", "DEFAULT_OLLAMA_URL", "LANGUAGE_CODE", "PROVIDER_KINDS",
    "EmbeddingSettings", "IngestSettings", "ModelOverride", "OcrSettings", "ProviderConfig", "Settings",
    "StoreSettings", "default_config_path", "default_data_dir", "load_settings", "parse_settings",
]


def default_config_path() -> Path:
    env = os.environ.get("KTUI_CONFIG")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"


def load_settings(
    config_file: Path | str | None = None,
    data_dir: Path | str | None = None,
    *,
    env: dict[str, str] | None = None,
    store_url: str | None = None,
) -> Settings:
    """Read the settings file (if any) and apply environment overrides.

    Precedence for the data directory: argument > $KTUI_HOME > file > platform default;
    for the store URL: `store_url` (the CLI's --store) > $KTUI_STORE > `[store] url`.
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
    store = settings.store
    for origin, value in (("--store", store_url), ("KTUI_STORE", env.get("KTUI_STORE"))):
        if value is not None:
            store = replace(store, url=_store_url(value, origin), origin=origin)
            break
    return replace(settings, data_dir=resolved_dir, config_file=path if path.exists() else None, store=store)


def _store_url(value: str, origin: str) -> str:
    from ktui.core.store_url import StoreUrlError, check_store_url

    try:
        return check_store_url(value)
    except StoreUrlError as exc:
        raise ConfigError(str(exc), key=origin) from None
