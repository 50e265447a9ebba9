"""OCR's small pure parts: Tesseract's TSV, the text-layer verdict, page lists, settings."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ktui.core.config import parse_settings
from ktui.core.data.base_validation import validate_base_field
from ktui.core.errors import ConfigError, ValidationError
from ktui.core.ingest.formats.pdf import text_quality
from ktui.core.ingest.ocr.engine import parse_tsv
from ktui.core.ingest.ocr.options import OcrReport, compact_pages

HEADER = "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext"


def word(block: int, par: int, line: int, n: int, conf: float, text: str) -> str:
    return f"5\t1\t{block}\t{par}\t{line}\t{n}\t0\t0\t10\t10\t{conf}\t{text}"


def test_tsv_words_become_lines_and_paragraphs_with_a_mean_confidence():
    tsv = "\n".join([
        HEADER,
        "1\t1\t0\t0\t0\t0\t0\t0\t100\t100\t-1\t",  # page row: no word
        word(1, 1, 1, 1, 90, "Harbour"), word(1, 1, 1, 2, 80, "council"),
        word(1, 1, 2, 1, 70, "budget."),
        word(1, 2, 1, 1, 60, "Lantern"),
        word(2, 1, 1, 1, -1, " "),  # an empty word Tesseract sometimes reports
    ])
    page = parse_tsv(tsv)
    assert page.text == "Harbour council\nbudget.\n\nLantern"
    assert page.confidence == 75.0 and page.words == 4
    assert parse_tsv(HEADER).confidence is None and parse_tsv(HEADER).text == ""


@pytest.mark.parametrize("text,verdict", [
    ("", "empty"),
    ("  \n ", "empty"),
    ("12", "short"),
    ("Scanned by CamScanner", "good"),
    ("Page 3", "short"),
    ("\ufffd\ufffd\ufffd abc", "junk"),
    ("!#$%&()*+,-./:;<=>?@[]^_{|}~", "junk"),
    ("The harbour council met on Tuesday to discuss the lantern budget.", "good"),
])
def test_text_layer_verdicts(text, verdict):
    assert text_quality(text) == verdict


@given(st.sets(st.integers(min_value=1, max_value=300)))
def test_compact_pages_lists_every_page_once_in_order(pages):
    listed: list[int] = []
    for part in filter(None, compact_pages(sorted(pages)).split(", ")):
        first, _, last = part.partition("-")
        listed.extend(range(int(first), int(last or first) + 1))
    assert listed == sorted(pages)


def test_report_summary_is_absent_without_ocr_and_says_what_was_skipped():
    assert OcrReport().summary() is None
    report = OcrReport(engine="tesseract 5", cached=2, skipped=[9], skipped_reason="OCR is off")
    for page, confidence in ((1, 90.0), (2, None), (3, 80.0), (7, 40.0), (8, 69.9)):
        report.add(page, confidence)
    assert report.summary() == {"pages": "1-3, 7-8", "page_count": 5, "engine": "tesseract 5", "confidence": 70.0,
                                "low_confidence_pages": "7-8", "blank_pages": "2",
                                "cached_pages": 2, "skipped_pages": "9", "skipped_reason": "OCR is off"}


def test_ocr_settings_are_typed_and_name_the_bad_key():
    settings = parse_settings({"ocr": {"enabled": False, "languages": ["eng", "deu"], "max_pages": 20}})
    assert (settings.ocr.enabled, settings.ocr.languages, settings.ocr.max_pages) == (False, ("eng", "deu"), 20)
    assert parse_settings({"ocr": {"languages": "eng+fra"}}).ocr.languages == ("eng", "fra")
    for bad, key in ((({"languages": ["../etc"]}), "ocr.languages"), ({"languages": []}, "ocr.languages"),
                     ({"enabled": "yes"}, "ocr.enabled"), ({"max_pixels": 10}, "ocr.max_pixels"),
                     ({"colour": 1}, "ocr.colour")):
        with pytest.raises(ConfigError) as caught:
            parse_settings({"ocr": bad})
        assert caught.value.key == key


def test_base_ocr_fields_validate():
    assert validate_base_field("ocr_languages", ["eng", "deu", "eng"]) == "eng+deu"
    assert validate_base_field("ocr_languages", "chi_sim+eng") == "chi_sim+eng"
    assert validate_base_field("ocr_enabled", None) is None
    for name, value in (("ocr_languages", "eng; rm -rf"), ("ocr_languages", ""), ("ocr_enabled", 1),
                        ("ocr_max_pages", 0)):
        with pytest.raises(ValidationError):
            validate_base_field(name, value)
