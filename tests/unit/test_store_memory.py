"""`[store] build_memory` (core/store_memory.py): a PostgreSQL memory size read by a strict
pattern and rebuilt from its digits and unit, so no text of the user's reaches the
``SET maintenance_work_mem`` of an HNSW build; out-of-bounds and malformed values stop
ktui with an error naming the field."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ktui.core.config import load_settings
from ktui.core.errors import ConfigError
from ktui.core.store_memory import (
    MAX_BUILD_MEMORY_KB,
    MIN_BUILD_MEMORY_KB,
    MemorySizeError,
    check_build_memory,
    parse_memory,
)

CANONICAL = re.compile(r"[0-9]+(kB|MB|GB|TB)", re.ASCII)
UNITS = {"kB": 1, "MB": 1024, "GB": 1024**2, "TB": 1024**3}


def write(tmp_path, text):
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_default_and_postgresql_spellings_are_accepted(tmp_path):
    assert load_settings(write(tmp_path, ""), env={}).store.build_memory == "512MB"
    for given_, kept in (("4GB", "4GB"), ("262144kB", "262144kB"), ("64MB", "64MB"), ("64GB", "64GB"),
                         ("1 gb", "1GB"), ("2048mb", "2048MB")):
        path = write(tmp_path, f'[store]\nbuild_memory = "{given_}"\n')
        assert load_settings(path, env={}).store.build_memory == kept
    env = {"KTUI_STORE": "postgresql://env@h/db"}  # a URL from elsewhere keeps the file's value
    assert load_settings(write(tmp_path, '[store]\nbuild_memory = "4GB"\n'), env=env).store.build_memory == "4GB"
    assert "build_memory='4GB'" in repr(load_settings(write(tmp_path, '[store]\nbuild_memory = "4GB"\n'), env={}))


@pytest.mark.parametrize(("raw", "says"), [
    ('"63MB"', "at least 64MB"), ('"65535kB"', "at least 64MB"), ('"0GB"', "at least 64MB"),
    ('"65GB"', "at most 64GB"), ('"1TB"', "at most 64GB"), ('"67108865kB"', "at most 64GB"),
    ("4096", "string with a unit"), ("true", "string with a unit"), ('["4GB"]', "string with a unit"),
    ('"4096"', "one of the units"), ('"4 GiB"', "one of the units"), ('"1.5GB"', "one of the units"),
    ('"-1GB"', "one of the units"), ('""', "one of the units"), ('" 4GB"', "one of the units"),
    ('"4GB\'; DROP TABLE item_lease; --"', "one of the units"), ('"４GB"', "one of the units"),
])
def test_a_bad_value_is_refused_naming_the_field(tmp_path, raw, says):
    with pytest.raises(ConfigError, match="store.build_memory") as caught:
        load_settings(write(tmp_path, f"[store]\nbuild_memory = {raw}\n"), env={})
    assert says in str(caught.value)
    assert "DROP" not in str(caught.value)  # the message never repeats what was refused


@given(st.integers(0, 10**12 - 1), st.sampled_from(sorted(UNITS)), st.booleans(), st.booleans())
def test_a_well_formed_size_is_rebuilt_from_its_number_and_unit(number, unit, shout, spaced):
    text = f"{number}{' ' if spaced else ''}{unit.upper() if shout else unit}"
    assert parse_memory(text) == (number * UNITS[unit], f"{number}{unit}")


hostile = st.one_of(
    st.text(),
    st.builds(lambda good, tail: good + tail, st.sampled_from(["512MB", "4GB", "262144kB", "64"]), st.text(min_size=1)),
    st.builds(lambda head, good: head + good, st.text(min_size=1), st.sampled_from(["512MB", "4GB"])),
)


@given(hostile)
def test_no_hostile_string_comes_out_as_anything_but_digits_and_a_unit(value):
    """Whatever the string, it is refused or what comes out (and is sent as the SQL literal)
    is ASCII digits and a canonical unit, inside the bounds when checked as a setting."""
    try:
        kb, text = parse_memory(value)
    except MemorySizeError:
        return
    assert CANONICAL.fullmatch(text) and kb == int(text[:-2]) * UNITS[text[-2:]]
    try:
        checked = check_build_memory(value)
    except MemorySizeError as exc:
        assert "at least" in str(exc) or "at most" in str(exc)
        return
    assert checked == text and MIN_BUILD_MEMORY_KB <= kb <= MAX_BUILD_MEMORY_KB


@given(hostile)
def test_the_store_tuning_refuses_what_the_pattern_refuses(value):
    pytest.importorskip("psycopg")
    from psycopg import sql

    from ktui.core.store.postgres import PgTuning

    try:
        _, text = parse_memory(value)
    except MemorySizeError:
        with pytest.raises(ValueError, match="unit"):
            PgTuning(build_memory=value)
        return
    PgTuning(build_memory=value)
    assert sql.Literal(text).as_string(None) == f"'{text}'"  # one quoted token, nothing around it
