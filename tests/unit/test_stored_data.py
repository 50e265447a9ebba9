"""`stored_data_problem`: a payload written by another program (an export's index) is let in
only when every row built from it reads back (hypothesis over hostile payloads)."""

from __future__ import annotations

import dataclasses
import json

from hypothesis import given
from hypothesis import strategies as st

from ktui.core.data.rows import data_from_json, stored_data_problem
from ktui.core.models import ITEM_DATA_CLASSES, ItemType

VALUES = st.one_of(st.none(), st.booleans(), st.integers(-5, 2**40), st.floats(allow_nan=False), st.text(max_size=8),
                   st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@st.composite
def payloads(draw):
    kind = draw(st.sampled_from(list(ItemType)))
    names = [f.name for f in dataclasses.fields(ITEM_DATA_CLASSES[kind])] + ["unknown"]
    keys = draw(st.lists(st.sampled_from(names), unique=True))
    return kind, {k: draw(VALUES) for k in keys}


@given(payloads())
def test_a_payload_let_in_reads_back_with_the_right_kinds(case):
    kind, payload = case
    if stored_data_problem(kind, payload) is not None:
        return
    data = data_from_json(kind, json.dumps(payload))
    assert isinstance(data.source, str) and data.source.strip()
    for f in dataclasses.fields(data):
        value = getattr(data, f.name)
        assert value is None or not isinstance(value, (list, float)), (f.name, value)


def test_the_problem_names_the_field():
    assert stored_data_problem(ItemType.DIRECTORY, {"path": "/a"}) == "needs 'source'"
    assert stored_data_problem(ItemType.FILE, {"path": "/a", "source": "/a", "size": True}) == \
        "'size' must be a whole number or null"
    assert stored_data_problem(ItemType.URL, {"url": "https://x.example/", "source": " "}) == "'source' must not be empty"
    assert stored_data_problem(ItemType.NOTE, {"content": "otters", "source": "note", "extra": 1}) is None
