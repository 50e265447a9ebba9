"""Hostile input: random and mutated bytes under every supported name only ever give
documents with text or a clean IngestError, never another exception."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ktui.core.errors import IngestError
from ktui.core.ingest.readers import parse_bytes
from tests.support.ingest_fixtures import (
    make_docx,
    make_epub,
    make_pdf,
    make_pptx,
    make_xlsx,
)

NAMES = ["x.md", "x.txt", "x.py", "x.json", "x.csv", "x.html", "x.pdf", "x.docx", "x.pptx", "x.xlsx",
         "x.epub", "x.ipynb"]


def _check(data: bytes, name: str) -> None:
    try:
        docs = parse_bytes(data, name, "/src/" + name)
    except IngestError as exc:
        assert name in str(exc) or "Note" in str(exc)
        return
    assert docs and all(d.text.strip() and d.metadata["source"] == "/src/" + name for d in docs)


@given(data=st.binary(max_size=2048), name=st.sampled_from(NAMES))
def test_random_bytes(data: bytes, name: str) -> None:
    _check(data, name)


@pytest.fixture(scope="module")
def valid_files(tmp_path_factory) -> dict[str, bytes]:
    d: Path = tmp_path_factory.mktemp("valid")
    notebook = {"cells": [{"cell_type": "markdown", "source": ["# T\n", "text"]}], "metadata": {}}
    (d / "x.ipynb").write_text(json.dumps(notebook))
    files = {
        "x.pdf": make_pdf(d / "x.pdf", ["Hello PDF page."]),
        "x.docx": make_docx(d / "x.docx"),
        "x.pptx": make_pptx(d / "x.pptx", [("Title", "Body")]),
        "x.xlsx": make_xlsx(d / "x.xlsx", {"S": [["a", 1]]}),
        "x.epub": make_epub(d / "x.epub", [("Ch", "Body.")]),
        "x.ipynb": d / "x.ipynb",
    }
    return {name: path.read_bytes() for name, path in files.items()}


@settings(max_examples=int(os.environ.get("KTUI_HOSTILE_EXAMPLES", "80")))
@given(name=st.sampled_from(["x.pdf", "x.docx", "x.pptx", "x.xlsx", "x.epub", "x.ipynb"]),
       cut=st.floats(min_value=0.0, max_value=1.0),
       flips=st.lists(st.tuples(st.floats(min_value=0.0, max_value=0.999), st.integers(0, 255)), max_size=8))
def test_truncated_and_corrupted_real_files(valid_files, name: str, cut: float,
                                            flips: list[tuple[float, int]]) -> None:
    data = bytearray(valid_files[name])
    for where, value in flips:
        data[int(where * len(data))] = value
    _check(bytes(data[: max(1, int(cut * len(data)))] if cut < 1 else data), name)


def test_the_valid_files_themselves_read(valid_files) -> None:
    for name, data in valid_files.items():
        assert parse_bytes(data, name, "/src/" + name)
