"""The TUI query box's scope and filter words (tui/search_query.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ktui.tui.search_query import parse_query


def test_words_scope_and_filters_are_told_apart() -> None:
    parsed = parse_query('kites in:all type:file,url under:"/a b/c" after:2026-11-01 strings')
    assert parsed.text == "kites strings"
    assert parsed.every_base and parsed.several
    assert parsed.types == ("file", "url") and parsed.under == "/a b/c" and parsed.after == "2026-11-01"
    assert parsed.filters() == {"item_types": ["file", "url"], "source_prefix": "/a b/c",
                                "modified_after": "2026-11-01"}
    assert parsed.describe() == "in all bases · type file, url · under /a b/c · after 2026-11-01"


def test_plain_queries_are_untouched_and_bad_words_are_named() -> None:
    plain = parse_query("what is in:side? email:me@x [link]")
    assert plain.text == "what is email:me@x [link]" and plain.bases == ("side?",)
    assert parse_query("kites").filters() is None and not parse_query("kites").several
    bad = parse_query("kites type:video under:")
    assert bad.problems[0].startswith("type:video is not one of")
    assert bad.text == "kites under:" and bad.under is None  # a bare "under:" is just a word
    assert parse_query('kites in:""').problems == ("in: needs a value",)


@given(st.text(max_size=80))
def test_any_text_parses_and_its_words_survive(raw: str) -> None:
    parsed = parse_query(raw)
    assert isinstance(parsed.text, str)
    for word in parsed.text.split():
        assert word in raw
