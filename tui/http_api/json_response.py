"""The JSON body of every `ktui serve` answer, valid UTF-8 whatever the data holds.

A file whose name is not UTF-8 comes back from os.fsdecode with lone surrogates;
Starlette's JSONResponse encodes its text as strict UTF-8 and so answered such an
item, a page of items holding it, or a search hit on it with a 500. `json_text`
keeps non-ASCII letters as they are and writes all-ASCII (``\\udcXX`` escapes,
exact through json.loads) only when the text would not encode.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import JSONResponse

__all__ = ["JsonResponse", "json_text"]


def json_text(content: Any) -> str:
    """Compact JSON text that always encodes as UTF-8 (see the module docstring)."""
    text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return text


class JsonResponse(JSONResponse):
    """Starlette's JSONResponse with a body that never fails to encode."""

    def render(self, content: Any) -> bytes:
        return json_text(content).encode("utf-8")
