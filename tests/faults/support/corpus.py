"""Small generated Markdown corpora with one unique marker word per file.

The marker (``mk<n>q``) lets a test prove a file is really searchable after a crash,
not just `completed` in the catalogue.
"""

from __future__ import annotations

from pathlib import Path

WORDS = ("kite", "string", "wind", "spar", "sail", "tail", "bridle", "harbour", "storm", "reel", "launch", "glide")


def marker(n: int) -> str:
    return f"mk{n}q"


def markdown(n: int) -> str:
    body = " ".join(WORDS[(n * 7 + k) % len(WORDS)] for k in range(40))
    return f"# Note {n}\n\nThe marker {marker(n)} appears in this file only.\n\n## Details\n\n{body}.\n"


def write_corpus(root: Path, tree: int = 250, flat: int = 250) -> dict[str, int]:
    """`root/tree/dNN/fNNN.md` (nested folders, for one directory item) and
    `root/flat/fNNN.md` (for file items). Returns {absolute path: marker number}."""
    out: dict[str, int] = {}
    for n in range(tree):
        path = root / "tree" / f"d{n % 10:02d}" / (f"sub/f{n:03d}.md" if n % 3 == 0 else f"f{n:03d}.md")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(markdown(n), encoding="utf-8")
        out[str(path)] = n
    for n in range(tree, tree + flat):
        path = root / "flat" / f"f{n:03d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(markdown(n), encoding="utf-8")
        out[str(path)] = n
    return out
