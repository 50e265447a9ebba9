"""One line saying what a folder walk left out and why (`DirectoryItemData.skipped`).

Shared by `ktui item`, the `--wait` summary and the TUI's item detail, so the three
say the same: `12 unsupported type (setup.exe, logo.psd, …), 3 ignore rule (build/)`.
"""

from __future__ import annotations

from typing import Any


def skipped_summary(skipped: dict[str, Any] | None, *, examples: bool = True) -> str | None:
    """None when nothing was skipped; most frequent reason first."""
    if not skipped or not skipped.get("total"):
        return None
    counts: dict[str, int] = skipped.get("counts") or {}
    shown: dict[str, list[str]] = skipped.get("examples") or {}
    parts = []
    for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        part = f"{n:,} {reason}"
        paths = shown.get(reason) or []
        if examples and paths:
            part += " (" + ", ".join(paths) + (", …" if n > len(paths) else "") + ")"
        parts.append(part)
    return ", ".join(parts)
