"""Write one preference (the theme) back into the user's settings file.

tomlkit keeps the file as the user wrote it (comments, order, other keys); the
new text is written to a temporary file beside it and moved over it, so a crash
never leaves half a settings file. Runs in a thread (file I/O off the loop).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import tomlkit


def save_top_level(path: Path, key: str, value: str) -> None:
    """Set `key = value` at the top of the TOML file `path` (created with its folder if missing)."""
    path = Path(path)
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    doc = tomlkit.parse(text)
    if doc.get(key) == value:
        return
    doc[key] = value  # tomlkit places a new top-level key before the first table
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".config-", suffix=".toml", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(tomlkit.dumps(doc))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
