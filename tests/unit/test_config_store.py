"""`[store]`: the store URL and schema, their precedence (--store > $KTUI_STORE > file), and
errors that name the field without ever repeating a password."""

from __future__ import annotations

import pytest

from ktui.core.config import load_settings
from ktui.core.errors import ConfigError
from ktui.core.store_url import redact_store_url

SECRET = "s3cr3t-pw"


def write(tmp_path, text):
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_no_store_setting_means_sqlite(tmp_path):
    store = load_settings(write(tmp_path, ""), env={}).store
    assert store.url is None and not store.postgres and store.schema == "ktui" and store.where == "sqlite"


def test_precedence_is_flag_then_environment_then_file(tmp_path):
    path = write(tmp_path, '[store]\nurl = "postgresql://file@h/db"\nschema = "team_docs"\n')
    assert load_settings(path, env={}).store.url == "postgresql://file@h/db"
    assert load_settings(path, env={}).store.schema == "team_docs"
    env = {"KTUI_STORE": "postgres://env@h/db"}
    assert load_settings(path, env=env).store.url == "postgres://env@h/db"
    assert load_settings(path, env=env).store.origin == "KTUI_STORE"
    flagged = load_settings(path, env=env, store_url="postgresql://flag@h/db").store
    assert (flagged.url, flagged.origin, flagged.schema) == ("postgresql://flag@h/db", "--store", "team_docs")


@pytest.mark.parametrize(("url", "says"), [
    ("mysql://u:" + SECRET + "@h/db", "not 'mysql://'"),
    ("sqlite:///tmp/x.db", "not 'sqlite://'"),
    ("h/db", "not no scheme"),
    ("postgresql://u:" + SECRET + "@h:port/db", "not a valid URL"),
    ("postgresql://", "names no server"),
    ("  ", "non-empty"),
])
def test_a_bad_url_is_refused_naming_the_field_and_never_the_password(tmp_path, url, says):
    path = write(tmp_path, f'[store]\nurl = "{url}"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(path, env={})
    assert says in str(caught.value) and "key 'store.url'" in str(caught.value)
    assert SECRET not in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        load_settings(env={"KTUI_STORE": url})
    assert "KTUI_STORE" in str(caught.value) and SECRET not in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        load_settings(env={}, store_url=url)
    assert "--store" in str(caught.value) and SECRET not in str(caught.value)


@pytest.mark.parametrize("schema", ["Team", "1abc", "a-b", "x" * 64, ""])
def test_a_bad_schema_is_refused(tmp_path, schema):
    with pytest.raises(ConfigError, match="store.schema"):
        load_settings(write(tmp_path, f'[store]\nschema = "{schema}"\n'), env={})


def test_unknown_store_keys_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="store.password"):
        load_settings(write(tmp_path, '[store]\npassword = "x"\n'), env={})


def test_the_url_is_never_shown_with_its_secrets(tmp_path):
    url = f"postgresql://bob:{SECRET}@db.example:5433/kb?sslmode=require&password={SECRET}&sslkey=/k/{SECRET}"
    store = load_settings(env={"KTUI_STORE": url}).store
    assert store.where == "postgresql://bob@db.example:5433/kb (schema ktui)"
    assert SECRET not in repr(store) and SECRET not in repr(load_settings(env={"KTUI_STORE": url}))
    assert redact_store_url("postgresql://postgres:@/postgres?host=/tmp/pg") == "postgresql://postgres@[socket /tmp/pg]/postgres"


def test_the_lease_ttl_is_a_store_setting_with_a_floor(tmp_path):
    assert load_settings(write(tmp_path, ""), env={}).store.lease_ttl == 30.0
    assert load_settings(write(tmp_path, "[store]\nlease_ttl = 6\n"), env={}).store.lease_ttl == 6.0
    env = {"KTUI_STORE": "postgresql://env@h/db"}  # the URL from elsewhere keeps the file's TTL
    assert load_settings(write(tmp_path, "[store]\nlease_ttl = 4.5\n"), env=env).store.lease_ttl == 4.5
    for bad, says in (("1", "at least 3"), ("0", "at least 3"), ("7200", "at most 3600"), ('"10"', "finite number")):
        with pytest.raises(ConfigError, match="store.lease_ttl") as caught:
            load_settings(write(tmp_path, f"[store]\nlease_ttl = {bad}\n"), env={})
        assert says in str(caught.value)
