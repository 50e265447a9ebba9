"""Text decoding, binary detection, JSON and CSV parsing (bytes in, documents out)."""

from __future__ import annotations

import codecs

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ktui.core.errors import IngestError
from ktui.core.ingest import SUPPORTED_EXTENSIONS, is_supported_file
from ktui.core.ingest.formats.text import (
    decode_text,
    parse_csv,
    parse_json,
    parse_markdown,
    parse_plain,
)


def test_utf8_and_newlines_are_normalised() -> None:
    assert decode_text("héllo\r\nwörld\rend".encode(), "f.txt") == "héllo\nwörld\nend"


@pytest.mark.parametrize("bom,encoding", [(codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
                                          (codecs.BOM_UTF16_BE, "utf-16-be"), (codecs.BOM_UTF32_LE, "utf-32-le")])
def test_byte_order_marks_decide_the_encoding(bom: bytes, encoding: str) -> None:
    text = "Grüße, 世界 — ok"
    assert decode_text(bom + text.encode(encoding), "f.txt") == text


def test_legacy_encodings_are_detected_not_assumed() -> None:
    text = ("Déjà l'été: la forêt, le château et la crème brûlée étaient à côté. " * 20).strip()
    decoded = decode_text(text.encode("latin-1"), "f.txt")
    assert "été" in decoded and "brûlée" in decoded and "château" in decoded
    german = "Über Größe und Maß: die Straße, die Fähre, das Öl. " * 5
    assert "Größe" in decode_text(german.encode("latin-1"), "de.txt")
    russian = "Съешь же ещё этих мягких французских булок, да выпей чаю. " * 10
    assert "французских" in decode_text(russian.encode("cp1251"), "ru.txt")


def test_declared_charset_is_used_when_valid() -> None:
    assert decode_text("naïve".encode("latin-1"), "u", declared="latin-1") == "naïve"
    assert decode_text(b"plain", "u", declared="no-such-charset") == "plain"


@pytest.mark.parametrize("data", [
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00",  # an image header
    bytes(range(256)) * 8,  # everything, NULs included
    b"\x01\x02\x03\x04\x05\x06 text \x07\x08" * 50,  # valid UTF-8 but mostly control characters
])
def test_binary_content_is_refused(data: bytes) -> None:
    with pytest.raises(IngestError, match=r"binary content.*f\.txt"):
        decode_text(data, "f.txt")


def test_empty_and_blank() -> None:
    with pytest.raises(IngestError, match="File is empty: e.txt"):
        parse_plain(b"", "/e.txt", "e.txt")
    with pytest.raises(IngestError, match="no text content: b.md"):
        parse_markdown(b" \n\t\n", "/b.md", "b.md")


@given(st.text(min_size=1, max_size=200).filter(lambda t: t.strip()))
def test_any_utf8_text_round_trips(text: str) -> None:
    # Only texts that are not mostly control characters count as text.
    controls = sum(1 for c in text if ord(c) < 32 and c not in "\t\n\x0b\x0c\r" or c == "\x7f")
    try:
        decoded = decode_text(text.encode("utf-8", "surrogatepass"), "h.txt")
    except IngestError as exc:
        assert "binary" in str(exc) and controls > 0
        return
    assert decoded == text.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")


def test_json_is_validated_and_reindented() -> None:
    doc = parse_json(b'{"name":"ktui","tags":["tui","search"],"n":1}', "/a.json", "a.json")[0]
    assert '"name": "ktui"' in doc.text and doc.text.count("\n") >= 4
    with pytest.raises(IngestError, match=r"Invalid JSON in a.json: .*line 1"):
        parse_json(b'{"name": ', "/a.json", "a.json")
    with pytest.raises(IngestError, match="no text content"):
        parse_json(b"{}", "/a.json", "a.json")


def test_csv_rows_become_lines_with_sniffed_delimiter() -> None:
    doc = parse_csv(b"name;score\nalice;3\n;\nbob;\"4;5\"\n", "/s.csv", "s.csv")[0]
    assert doc.text.splitlines() == ["name | score", "alice | 3", "bob | 4;5"]


def test_supported_extensions_and_names() -> None:
    for ext in (".md", ".txt", ".py", ".html", ".pdf", ".docx", ".pptx", ".xlsx", ".csv", ".epub", ".json"):
        assert ext in SUPPORTED_EXTENSIONS
        assert is_supported_file(f"/x/File{ext.upper()}")
    assert all(e == e.lower() and e.startswith(".") for e in SUPPORTED_EXTENSIONS)
    assert is_supported_file("Makefile") and is_supported_file("/a/README")
    for name in ("vector.svg", "archive.zip", "movie.mp4", "lib.so", "noext", "doc.doc"):
        assert not is_supported_file(name)
