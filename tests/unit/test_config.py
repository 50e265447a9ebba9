"""core.config: the TOML settings file, environment overrides, provider tables, and
errors that name the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktui.core.config import (
    DEFAULT_EMBEDDING_MODEL,
    DEFAULT_OLLAMA_URL,
    Settings,
    default_config_path,
    load_settings,
    parse_settings,
)
from ktui.core.errors import ConfigError


def write(tmp_path: Path, text: str, name: str = "config.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_a_file(tmp_path):
    s = load_settings(env={})
    assert s.chunk_size == 1024
    assert s.chunk_overlap == 200
    assert s.concurrency == 5
    assert s.default_embedding_model == DEFAULT_EMBEDDING_MODEL == "builtin::wordllama"
    assert s.config_file is None
    assert s.providers == {}
    assert set(s.effective_providers()) == {"builtin", "ollama"}


def test_full_file_is_parsed(tmp_path):
    path = write(
        tmp_path,
        """
data_dir = "~/kb"
default_embedding_model = "local::nomic"
chunk_size = 512
chunk_overlap = 64
concurrency = 3
auto_ollama = false
theme = "nord"

[ingest]
max_file_bytes = 1000
include = ["*.md", " *.txt "]
fetch_timeout = 2.5

[embeddings]
batch_size = 8

[providers.local]
kind = "openai"
base_url = "http://127.0.0.1:9999/v1/"
api_key_env = "LOCAL_KEY"
models = ["nomic"]
dimensions = 256
timeout = 5

[providers.jina]
kind = "rerank"
base_url = "https://api.jina.ai"

[keymap]
"search.focus" = "ctrl+f"
""",
    )
    s = load_settings(path, env={"HOME": str(tmp_path)})
    assert s.config_file == path
    assert s.data_dir == Path("~/kb").expanduser()
    assert (s.chunk_size, s.chunk_overlap, s.concurrency, s.auto_ollama, s.theme) == (512, 64, 3, False, "nord")
    assert s.default_embedding_model == "local::nomic"
    assert s.ingest.max_file_bytes == 1000 and s.ingest.include == ("*.md", "*.txt") and s.ingest.fetch_timeout == 2.5
    assert s.ingest.max_redirects == 5  # untouched keys keep their defaults
    assert s.embeddings.batch_size == 8
    local = s.providers["local"]
    assert (local.kind, local.base_url, local.models, local.dimensions, local.timeout) == (
        "openai", "http://127.0.0.1:9999/v1", ("nomic",), 256, 5.0)
    assert s.providers["jina"].kind == "rerank"
    assert set(s.effective_providers()) == {"builtin", "local", "jina"}  # auto_ollama off
    assert s.keymap == {"search.focus": "ctrl+f"}


def test_chunk_overlap_default_follows_a_small_chunk_size(tmp_path):
    s = load_settings(write(tmp_path, "chunk_size = 100\n"), env={})
    assert s.chunk_overlap == 99


def test_provider_api_key_comes_from_the_named_variable(tmp_path, monkeypatch):
    s = load_settings(write(tmp_path, '[providers.o]\nkind = "openai"\nbase_url = "http://x"\napi_key_env = "MY_KEY"\n'), env={})
    monkeypatch.delenv("MY_KEY", raising=False)
    assert s.providers["o"].api_key is None
    monkeypatch.setenv("MY_KEY", "sk-123")
    assert s.providers["o"].api_key == "sk-123"


def test_ollama_provider_without_base_url_uses_the_default(tmp_path):
    s = load_settings(write(tmp_path, '[providers.big]\nkind = "ollama"\n'), env={})
    assert s.providers["big"].base_url == DEFAULT_OLLAMA_URL


# --- environment ---------------------------------------------------------------


def test_ktui_config_names_the_file(tmp_path):
    path = write(tmp_path, "concurrency = 9\n", "custom.toml")
    s = load_settings(env={"KTUI_CONFIG": str(path)})
    assert s.concurrency == 9 and s.config_file == path


def test_ktui_config_pointing_nowhere_is_an_error(tmp_path):
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match="does not exist") as exc:
        load_settings(env={"KTUI_CONFIG": str(missing)})
    assert exc.value.file == str(missing)
    with pytest.raises(ConfigError):
        load_settings(missing, env={})


def test_default_config_path_follows_ktui_config_then_platform_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KTUI_CONFIG", str(tmp_path / "c.toml"))
    assert default_config_path() == tmp_path / "c.toml"
    monkeypatch.delenv("KTUI_CONFIG")
    assert default_config_path() == tmp_path / "xdg-config" / "ktui" / "config.toml"  # conftest's XDG_CONFIG_HOME


def test_platform_config_file_is_read_when_present(tmp_path):
    folder = tmp_path / "xdg-config" / "ktui"
    folder.mkdir(parents=True)
    path = write(folder, "concurrency = 7\n")
    s = load_settings(env={})
    assert (s.concurrency, s.config_file) == (7, path)


def test_data_dir_precedence(tmp_path):
    path = write(tmp_path, f'data_dir = "{tmp_path / "from-file"}"\n')
    assert load_settings(path, env={}).data_dir == tmp_path / "from-file"
    assert load_settings(path, env={"KTUI_HOME": str(tmp_path / "env")}).data_dir == tmp_path / "env"
    assert load_settings(path, tmp_path / "arg", env={"KTUI_HOME": str(tmp_path / "env")}).data_dir == tmp_path / "arg"
    assert load_settings(env={}).data_dir == tmp_path / "xdg-data" / "ktui"


def test_ktui_home_from_the_process_environment(tmp_path):
    assert load_settings().data_dir == tmp_path / "ktui-home"  # set by conftest


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "http://127.0.0.1:11434"),
        ("", "http://127.0.0.1:11434"),
        ("   ", "http://127.0.0.1:11434"),
        ("gpu-box:11500", "http://gpu-box:11500"),
        ("gpu-box", "http://gpu-box:11434"),
        ("0.0.0.0", "http://0.0.0.0:11434"),
        (":9000", "http://127.0.0.1:9000"),
        ("[::1]", "http://[::1]:11434"),
        ("http://gpu-box:11500/", "http://gpu-box:11500"),
        ("https://ollama.example.com", "https://ollama.example.com"),
        ("http://proxy.lan/ollama", "http://proxy.lan/ollama"),
    ],
)
def test_ollama_host_with_and_without_scheme(monkeypatch, value, expected):
    if value is not None:
        monkeypatch.setenv("OLLAMA_HOST", value)
    assert Settings.defaults("/tmp/x").provider("ollama").base_url == expected


def test_a_configured_ollama_provider_wins_over_the_automatic_one(tmp_path, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", "elsewhere:1")
    s = load_settings(write(tmp_path, '[providers.ollama]\nkind = "ollama"\nbase_url = "http://mine:2"\n'), env={})
    assert s.provider("ollama").base_url == "http://mine:2"


# --- malformed files -------------------------------------------------------------


def test_invalid_toml_names_the_file_and_line(tmp_path):
    path = write(tmp_path, "chunk_size = = 3\n")
    with pytest.raises(ConfigError, match="not valid TOML") as exc:
        load_settings(path, env={})
    assert exc.value.file == str(path)
    assert str(path) in str(exc.value) and "line 1" in str(exc.value)


def test_unreadable_file_is_a_config_error(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_bytes(b"theme = \"\xff\xfe\"\n")
    with pytest.raises(ConfigError, match="cannot be read") as exc:
        load_settings(path, env={})
    assert exc.value.file == str(path)
    folder = tmp_path / "dir.toml"
    folder.mkdir()
    with pytest.raises(ConfigError):
        load_settings(folder, env={})


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("colour = 'blue'\n", "colour"),
        ("chunk_size = '1024'\n", "chunk_size"),
        ("chunk_size = 10\n", "chunk_size"),
        ("chunk_size = 1_000_000\n", "chunk_size"),
        ("chunk_size = 1024.0\n", "chunk_size"),
        ("chunk_size = true\n", "chunk_size"),
        ("chunk_overlap = 2000\n", "chunk_overlap"),
        ("chunk_overlap = -1\n", "chunk_overlap"),
        ("concurrency = 0\n", "concurrency"),
        ("concurrency = 65\n", "concurrency"),
        ("auto_ollama = 'yes'\n", "auto_ollama"),
        ("data_dir = ''\n", "data_dir"),
        ("data_dir = 3\n", "data_dir"),
        ("theme = []\n", "theme"),
        ("default_embedding_model = 'wordllama'\n", "default_embedding_model"),
        ("ingest = 3\n", "ingest"),
        ("[ingest]\nmax_file_bytes = 0\n", "ingest.max_file_bytes"),
        ("[ingest]\nfetch_timeout = nan\n", "ingest.fetch_timeout"),
        ("[ingest]\nfetch_timeout = inf\n", "ingest.fetch_timeout"),
        ("[ingest]\nfetch_timeout = 0.0\n", "ingest.fetch_timeout"),
        ("[ingest]\ninclude = '*.md'\n", "ingest.include"),
        ("[ingest]\nexclude = ['']\n", "ingest.exclude"),
        ("[ingest]\nfollow_links = true\n", "ingest.follow_links"),
        ("[embeddings]\nbatch_size = 0\n", "embeddings.batch_size"),
        ("[embeddings]\ncache = 1\n", "embeddings.cache"),
        ("providers = 'ollama'\n", "providers"),
        ("[providers]\nx = 1\n", "providers.x"),
        ("[providers.x]\nkind = 'magic'\n", "providers.x.kind"),
        ("[providers.x]\nbase_url = 'http://h'\n", "providers.x.kind"),
        ("[providers.x]\nkind = 'openai'\n", "providers.x.base_url"),
        ("[providers.x]\nkind = 'openai'\nbase_url = 'ftp://h'\n", "providers.x.base_url"),
        ("[providers.x]\nkind = 'openai'\nbase_url = 'http://h'\ntoken = 'k'\n", "providers.x.token"),
        ("[providers.x]\nkind = 'openai'\nbase_url = 'http://h'\ndimensions = 0\n", "providers.x.dimensions"),
        ("[providers.x]\nkind = 'openai'\nbase_url = 'http://h'\nbatch_size = '8'\n", "providers.x.batch_size"),
        ("[providers.x]\nkind = 'openai'\nbase_url = 'http://h'\nmodels = [1]\n", "providers.x.models"),
        ("[providers.x]\nkind = 'openai'\nbase_url = 'http://h'\ntimeout = -1\n", "providers.x.timeout"),
        ("[providers.x]\nkind = 'openai'\nbase_url = 'http://h'\nmax_retries = 11\n", "providers.x.max_retries"),
        ("[providers.x]\nkind = 'openai'\nbase_url = 'http://h'\nconcurrency = 0\n", "providers.x.concurrency"),
        ("[providers.'a::b']\nkind = 'openai'\nbase_url = 'http://h'\n", "providers.a::b"),
        ("[providers.'']\nkind = 'ollama'\n", "providers."),
        ("[providers.' x']\nkind = 'ollama'\n", "providers. x"),
        ("[providers.builtin]\nkind = 'openai'\nbase_url = 'http://h'\n", "providers.builtin.kind"),
        ("keymap = 'vim'\n", "keymap"),
        ("[keymap]\nquit = ''\n", "keymap"),
        ("[keymap]\nquit = 1\n", "keymap"),
    ],
)
def test_bad_values_name_the_file_and_the_key(tmp_path, text, key):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        load_settings(path, env={})
    assert exc.value.file == str(path)
    assert exc.value.key == key
    assert str(path) in str(exc.value) and f"key '{key}'" in str(exc.value)


def test_parse_settings_without_a_file_still_names_the_key():
    with pytest.raises(ConfigError, match="key 'concurrency'") as exc:
        parse_settings({"concurrency": "many"})
    assert exc.value.file is None


def test_settings_with_replaces_fields(tmp_path):
    s = Settings.defaults(tmp_path)
    t = s.with_(concurrency=2)
    assert (s.concurrency, t.concurrency, t.data_dir) == (5, 2, tmp_path)


def test_the_env_argument_is_authoritative_for_ktui_config(tmp_path, monkeypatch):
    stray = write(tmp_path, "concurrency = 3\n", "stray.toml")
    monkeypatch.setenv("KTUI_CONFIG", str(stray))
    assert load_settings(env={}).concurrency == 5  # not the process's KTUI_CONFIG
    assert load_settings().concurrency == 3  # env=None means the process environment


def test_a_builtin_provider_entry_may_only_restate_the_builtin(tmp_path):
    s = load_settings(write(tmp_path, "[providers.builtin]\nkind = 'builtin'\n"), env={})
    assert s.provider("builtin").kind == "builtin"


def test_a_relative_data_dir_is_relative_to_the_settings_file(tmp_path, monkeypatch):
    from ktui.core.config import load_settings

    conf = tmp_path / "conf" / "ktui.toml"
    conf.parent.mkdir()
    conf.write_text('data_dir = "store"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    settings = load_settings(conf, env={})
    assert settings.data_dir == tmp_path / "conf" / "store"
