"""core.data.validation: every argument check returns a clean value or raises
ValidationError naming the field."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ktui.core.data.base_validation import validate_base_field, validate_base_patch
from ktui.core.data.item_validation import (
    require_group_filter,
    require_item_type,
    validate_item_input,
    validate_item_inputs,
)
from ktui.core.data.validation import (
    MAX_INPUTS_PER_CALL,
    MAX_NOTE_CHARS,
    require_emoji,
    require_id,
    require_ids,
    require_model_id,
    require_name,
    require_page,
    require_query,
    require_top_k,
)
from ktui.core.errors import ValidationError
from ktui.core.models import (
    ANY_GROUP,
    DirectoryItemData,
    FileItemData,
    ItemInput,
    ItemType,
    NoteItemData,
    SearchMode,
    SitemapItemData,
    UrlItemData,
)


def field_of(exc: pytest.ExceptionInfo[ValidationError]) -> str:
    (name,) = exc.value.errors
    return name


# --- emoji -----------------------------------------------------------------


@pytest.mark.parametrize(
    "emoji",
    ["📁", "🚀", "a", "é", "e\u0301", "👩‍👩‍👧", "🇫🇷", "👍🏽", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "❤️", "🧑🏻‍❤️‍💋‍🧑🏼", "1️⃣"],
)
def test_emoji_accepts_one_grapheme_cluster(emoji):
    assert require_emoji(emoji) == emoji


@pytest.mark.parametrize(
    "emoji",
    [
        "",
        " ",
        " 📁",
        "📁 ",
        "\t📁",
        "📁📁",
        "ab",
        "🇫🇷🇩🇪",
        "👩 👩",
        "e" + "\u0301" * 40,  # one cluster, but an unbounded one
        "\x00",
        "\x7f",
        "\ud83d",  # a lone surrogate (half an emoji)
        None,
        1,
        ["📁"],
    ],
)
def test_emoji_refuses_empty_padded_or_several_clusters(emoji):
    with pytest.raises(ValidationError) as exc:
        require_emoji(emoji)
    assert field_of(exc) == "emoji"


# --- ids, names, models, pages ----------------------------------------------


@pytest.mark.parametrize("value", ["", " ", " id", "id ", "a\x00b", "x" * 201, "\udcff", None, 3, b"id", ["id"]])
def test_require_id_refuses(value):
    with pytest.raises(ValidationError) as exc:
        require_id(value, "base_id")
    assert field_of(exc) == "base_id"


def test_require_ids_dedupes_in_order_and_names_the_bad_index():
    assert require_ids(("b", "a", "b"), "item_ids") == ["b", "a"]
    with pytest.raises(ValidationError) as exc:
        require_ids(["a", 7], "item_ids")
    assert field_of(exc) == "item_ids[1]"
    for bad in ("abc", [], None, {"a": 1}, b"x"):
        with pytest.raises(ValidationError):
            require_ids(bad, "item_ids")


def test_require_name_strips_and_refuses_control_chars():
    assert require_name("  Notes  ") == "Notes"
    for bad in ("", "   ", "a\nb", "a\x00", "x" * 201, "\ud800", 5, None):
        with pytest.raises(ValidationError) as exc:
            require_name(bad)
        assert field_of(exc) == "name"


@pytest.mark.parametrize("value", ["ollama::nomic-embed-text", "builtin::wordllama", " openai::text-embedding-3-small "])
def test_model_id_accepts_provider_model(value):
    assert require_model_id(value) == value.strip()


@pytest.mark.parametrize("value", ["", "wordllama", "::m", "p::", "p:: ", " ::m", "p::m\x00", "p::" + "m" * 600, 1, None])
def test_model_id_refuses(value):
    with pytest.raises(ValidationError) as exc:
        require_model_id(value)
    assert field_of(exc) == "embedding_model_id"


def test_pages_default_bounds():
    assert require_page(1, 1) == (1, 1)
    assert require_page(3, 100) == (3, 100)
    for page, limit, field in [(0, 20, "page"), (1, 0, "limit"), (1, 101, "limit"), (True, 20, "page"),
                               ("1", 20, "page"), (1, 2.0, "limit"), (-1, 20, "page"), (None, 20, "page")]:
        with pytest.raises(ValidationError) as exc:
            require_page(page, limit)
        assert field_of(exc) == field


def test_query_rules():
    assert require_query("  kites  ") == "kites"
    assert require_query("42") == "42"
    assert require_query("日本") == "日本"
    for bad in ("", "   ", "?!", "x" * 1001, None, 3, "\ud800a"):
        with pytest.raises(ValidationError) as exc:
            require_query(bad)
        assert field_of(exc) == "query"


def test_top_k():
    assert require_top_k(None) is None
    assert require_top_k(5) == 5
    for bad in (0, -1, 1001, 2.5, True, "3"):
        with pytest.raises(ValidationError):
            require_top_k(bad)


def test_item_type_and_group_filters():
    assert require_item_type(None) is None
    assert require_item_type("note") is ItemType.NOTE
    assert require_group_filter(None) is None
    assert require_group_filter(ANY_GROUP) is ANY_GROUP
    assert require_group_filter("g1") == "g1"
    with pytest.raises(ValidationError) as exc:
        require_item_type("folder")
    assert field_of(exc) == "type"
    with pytest.raises(ValidationError) as exc:
        require_group_filter(5)
    assert field_of(exc) == "group_id"


# --- base fields and patches -------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("threshold", -0.001),
        ("threshold", 1.0001),
        ("threshold", float("nan")),
        ("threshold", float("inf")),
        ("threshold", 10**400),
        ("threshold", "0.5"),
        ("threshold", True),
        ("hybrid_alpha", 2),
        ("hybrid_alpha", float("-inf")),
        ("document_count", 0),
        ("document_count", -5),
        ("document_count", 1.0),
        ("document_count", 1001),
        ("chunk_size", 15),
        ("chunk_size", 100_001),
        ("chunk_overlap", -1),
        ("search_mode", "semantic"),
        ("search_mode", ["hybrid"]),
        ("name", None),
        ("emoji", None),
        ("chunk_size", None),
        ("search_mode", None),
        ("rerank_model_id", "nocolons"),
        ("group_id", ""),
    ],
)
def test_base_field_refusals_name_the_field(name, value):
    with pytest.raises(ValidationError) as exc:
        validate_base_field(name, value)
    assert field_of(exc) == name


@pytest.mark.parametrize("name", ["group_id", "rerank_model_id", "threshold", "document_count", "hybrid_alpha"])
def test_nullable_base_fields_can_be_cleared(name):
    assert validate_base_field(name, None) is None


def test_base_field_values_are_normalised():
    assert validate_base_field("search_mode", "bm25") is SearchMode.BM25
    assert validate_base_field("threshold", 1) == 1.0 and isinstance(validate_base_field("threshold", 1), float)
    assert validate_base_field("name", " x ") == "x"


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        (None, "patch"),
        ([("name", "x")], "patch"),
        ({}, "patch"),
        ({1: "x"}, "patch"),
        ({"embedding_model_id": "a::b"}, "embedding_model_id"),
        ({"dimensions": 3}, "dimensions"),
        ({"status": "failed"}, "status"),
        ({"id": "x"}, "id"),
        ({"created_at": "x"}, "created_at"),
        ({"colour": "red"}, "colour"),
        ({"name": "ok", "threshold": 7}, "threshold"),
    ],
)
def test_base_patch_refusals(patch, field):
    with pytest.raises(ValidationError) as exc:
        validate_base_patch(patch)
    assert field_of(exc) == field


def test_immutable_model_message_says_how_to_change_it():
    with pytest.raises(ValidationError, match="restore"):
        validate_base_patch({"embedding_model_id": "ollama::x"})


# --- item inputs ---------------------------------------------------------------


def test_file_and_directory_paths_become_absolute_sources(tmp_path, monkeypatch):
    f = tmp_path / "a.md"
    f.write_text("# a")
    monkeypatch.chdir(tmp_path)
    item = validate_item_input(ItemInput("file", {"path": "a.md"}))
    assert item.type is ItemType.FILE
    assert item.data == FileItemData(path=str(f), source=str(f))
    d = validate_item_input({"type": "directory", "data": {"path": str(tmp_path) + "/", "watch": True}})
    assert d.data == DirectoryItemData(path=str(tmp_path), source=str(tmp_path), watch=True)
    assert validate_item_input(ItemInput(ItemType.DIRECTORY, {"path": "."})).data.watch is False


def test_home_relative_paths_are_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "n.txt").write_text("x")
    assert validate_item_input(ItemInput("file", {"path": "~/n.txt"})).data.source == str(tmp_path / "n.txt")


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"path": "missing.txt"}, "items[0].data.path"),
        ({"path": ""}, "items[0].data.path"),
        ({"path": "a\x00b"}, "items[0].data.path"),
        ({"path": "x" * 5000}, "items[0].data.path"),
        ({"path": ("y" * 300) + "/z"}, "items[0].data.path"),
        ({"path": 5}, "items[0].data.path"),
        ({}, "items[0].data.path"),
        ({"path": "DIR"}, "items[0].data.path"),  # a directory given as a file
        ({"path": "FILE", "watch": True}, "items[0].data.watch"),  # unknown for a file
    ],
)
def test_file_refusals(tmp_path, payload, field):
    (tmp_path / "FILE").write_text("x")
    (tmp_path / "DIR").mkdir()
    payload = {k: (str(tmp_path / v) if v in ("DIR", "FILE", "missing.txt") else v) for k, v in payload.items()}
    with pytest.raises(ValidationError) as exc:
        validate_item_input(ItemInput("file", payload))
    assert field_of(exc) == field


def test_directory_refusals(tmp_path):
    (tmp_path / "f").write_text("x")
    for payload, field in [
        ({"path": str(tmp_path / "f")}, "items[0].data.path"),
        ({"path": str(tmp_path / "nope")}, "items[0].data.path"),
        ({"path": str(tmp_path), "watch": "yes"}, "items[0].data.watch"),
        ({"path": str(tmp_path), "recursive": True}, "items[0].data.recursive"),
    ]:
        with pytest.raises(ValidationError) as exc:
            validate_item_input(ItemInput("directory", payload))
        assert field_of(exc) == field


@pytest.mark.parametrize(
    "url",
    ["http://example.com", "https://example.com/a?b=c#d", "HTTPS://EXAMPLE.COM", "http://127.0.0.1:8080/x",
     "http://[::1]:9/x", "https://例え.jp/パス"],
)
@pytest.mark.parametrize("kind", ["url", "sitemap"])
def test_urls_accepted(url, kind):
    item = validate_item_input(ItemInput(kind, {"url": f"  {url} "}))
    expected = UrlItemData(url=url, source=url) if kind == "url" else SitemapItemData(url=url, source=url)
    assert item.data == expected


@pytest.mark.parametrize(
    "url",
    ["", "example.com", "ftp://example.com", "file:///etc/passwd", "javascript:alert(1)", "http://",
     "http:///path", "http://exa mple.com", "http://example.com:99999", "http://example.com:port",
     "http://[::1", "http://a\x00b.com", "http://a.com/\x7f", "data:text/plain,hi", "http://x.com/\ud800",
     "https://" + "a" * 9000, 42, None, ["http://x.com"]],
)
@pytest.mark.parametrize("kind", ["url", "sitemap"])
def test_urls_refused(url, kind):
    with pytest.raises(ValidationError) as exc:
        validate_item_input(ItemInput(kind, {"url": url}))
    assert field_of(exc) == "items[0].data.url"


def test_note_source_is_its_source_url_or_note():
    plain = validate_item_input(ItemInput("note", {"content": "hello"}))
    assert plain.data == NoteItemData(content="hello", source="note", source_url=None)
    linked = validate_item_input(ItemInput("note", {"content": "hi", "source_url": "https://x.org/p"}))
    assert linked.data == NoteItemData(content="hi", source="https://x.org/p", source_url="https://x.org/p")
    assert validate_item_input(ItemInput("note", {"content": "x" * MAX_NOTE_CHARS})).data.content == "x" * MAX_NOTE_CHARS


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"content": ""}, "items[0].data.content"),
        ({"content": " \n\t"}, "items[0].data.content"),
        ({"content": 12}, "items[0].data.content"),
        ({"content": "x" * (MAX_NOTE_CHARS + 1)}, "items[0].data.content"),
        ({"content": "half \ud83d emoji"}, "items[0].data.content"),
        ({"content": "x", "source_url": "ftp://x"}, "items[0].data.source_url"),
        ({"content": "x", "title": "t"}, "items[0].data.title"),
    ],
)
def test_note_refusals(payload, field):
    with pytest.raises(ValidationError) as exc:
        validate_item_input(ItemInput("note", payload))
    assert field_of(exc) == field


def test_note_content_may_hold_nul_and_any_unicode():
    text = "a\x00b 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ‮rtl‬ \ufeff"
    assert validate_item_input(ItemInput("note", {"content": text})).data.content == text


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ("file", "items[0]"),
        ({"type": "file", "data": {}, "extra": 1}, "items[0]"),
        (ItemInput("folder", {"path": "."}), "items[0].type"),
        (ItemInput(None, {}), "items[0].type"),
        (ItemInput("note", "content"), "items[0].data"),
        ({"type": "note"}, "items[0].data"),
    ],
)
def test_item_envelope_refusals(raw, field):
    with pytest.raises(ValidationError) as exc:
        validate_item_input(raw)
    assert field_of(exc) == field


def test_item_list_rules():
    note = ItemInput("note", {"content": "x"})
    assert len(validate_item_inputs([note] * MAX_INPUTS_PER_CALL)) == MAX_INPUTS_PER_CALL
    assert len(validate_item_inputs((note,))) == 1
    for bad in ([], [note] * (MAX_INPUTS_PER_CALL + 1), note, "note", {"type": "note"}, None, iter([note])):
        with pytest.raises(ValidationError) as exc:
            validate_item_inputs(bad)
        assert field_of(exc) == "items"
    with pytest.raises(ValidationError) as exc:
        validate_item_inputs([note, ItemInput("url", {"url": "nope"})])
    assert field_of(exc) == "items[1].data.url"


@pytest.mark.skipif(os.name != "posix", reason="non-UTF-8 file names are a POSIX thing")
def test_non_utf8_file_name_is_accepted(tmp_path):
    raw_name = os.fsencode(str(tmp_path)) + b"/caf\xe9.txt"
    with open(raw_name, "wb") as fh:
        fh.write(b"x")
    path = os.fsdecode(raw_name)
    assert validate_item_input(ItemInput("file", {"path": path})).data.source == path


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_pipes_and_devices_are_not_files(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    devices = [] if Path("/dev/null").is_file() else ["/dev/null"]  # some sandboxes bind a plain file there
    for path in (str(fifo), *devices):
        with pytest.raises(ValidationError, match="not a regular file") as exc:
            validate_item_input(ItemInput("file", {"path": path}))
        assert field_of(exc) == "items[0].data.path"
    link = tmp_path / "link.md"
    (tmp_path / "real.md").write_text("x")
    link.symlink_to(tmp_path / "real.md")
    assert validate_item_input(ItemInput("file", {"path": str(link)})).data.path == str(link)


def test_vector_is_the_search_mode_name_and_default_its_old_alias():
    """One vocabulary (issue 15): users type `vector`; `default` (the stored value) still works."""
    from ktui.core.models import SearchMode

    assert validate_base_field("search_mode", "vector") == SearchMode.DEFAULT
    assert validate_base_field("search_mode", "default") == SearchMode.DEFAULT
