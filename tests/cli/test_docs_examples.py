"""The settings examples of docs/configuration.md are valid settings files.

Each ```toml block is written to a file and loaded with `load_settings`, the
same path `ktui --config FILE` takes, so a typo in the documentation fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ktui.core.config import load_settings

DOCS = Path(__file__).resolve().parents[2] / "docs"
TOML_BLOCK = re.compile(r"```toml\n(.*?)```", re.DOTALL)


def toml_blocks(name: str) -> list[str]:
    return TOML_BLOCK.findall((DOCS / name).read_text(encoding="utf-8"))


def test_configuration_doc_has_examples():
    assert len(toml_blocks("configuration.md")) >= 5


@pytest.mark.parametrize("index", range(len(toml_blocks("configuration.md"))))
def test_configuration_examples_load(index, tmp_path):
    block = toml_blocks("configuration.md")[index]
    path = tmp_path / "config.toml"
    path.write_text(block, encoding="utf-8")
    settings = load_settings(config_file=path, data_dir=tmp_path / "data", env={})
    assert settings.config_file == path
    for name in re.findall(r"^\[providers\.([\w-]+)\]", block, re.MULTILINE):
        assert settings.provider(name) is not None and settings.provider(name).kind in (
            "ollama", "openai", "rerank", "tei-rerank")
    if "default_embedding_model" in block:
        value = re.search(r'^default_embedding_model = "([^"]+)"', block, re.MULTILINE).group(1)
        assert settings.default_embedding_model == value


def test_every_setting_is_documented():
    """A setting added to core/config_types.py without documentation fails this test."""
    from dataclasses import fields

    from ktui.core.config import EmbeddingSettings, IngestSettings, OcrSettings, ProviderConfig
    from ktui.core.config_parse import _TOP_KEYS

    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    names = set(_TOP_KEYS) | {f.name for f in fields(IngestSettings)} | {f.name for f in fields(EmbeddingSettings)}
    names |= {f.name for f in fields(ProviderConfig)} - {"name"}
    names |= {f.name for f in fields(OcrSettings)}
    missing = sorted(n for n in names if not re.search(rf"\b{n}\b", text))
    assert missing == []
