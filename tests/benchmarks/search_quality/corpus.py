"""Known-item sets built from manual pages that ship in Debian packages.

Why man pages: they are real documentation nobody here wrote, they ship in Debian
packages (`manpages`, `manpages-dev` for English; the translations shipped by
`passwd`, `man-db`, `dpkg`, `vim`, `procps`... for the multilingual set), and their
structure gives a question and its answer without anyone writing either: the NAME
line's description ("epoll - I/O event notification facility") is the query, the
rest of that page (its NAME section removed) is the one relevant document, and every
other page is a distractor.

Pages are rendered with groff (hyphenation off) once and cached as JSON under
``$KTUI_BENCH_CACHE`` (default ``/tmp/ktui-bench-cache``). Queries are split by a
stable hash of the page path into a *dev* half (for tuning) and a *held-out* half
(for acceptance); documents are never split.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

MAN_ROOT = Path("/usr/share/man")
ENGLISH_SECTIONS = ("man2", "man7")
MULTILINGUAL_LANGUAGES = ("ja", "zh_CN", "zh_TW", "ko", "de", "fr", "ru", "es")
MIN_BODY_CHARS = 300
_DASH = re.compile(r"\s+(?:\\-|-|—|–|－)\s+")


@dataclass(frozen=True, slots=True)
class Page:
    key: str  # path relative to MAN_ROOT, e.g. "man7/epoll.7.gz"
    language: str
    query: str  # the NAME line's description
    body: str  # the page without its NAME section


@dataclass(frozen=True, slots=True)
class KnownItemSet:
    name: str
    pages: list[Page]  # every document (answers and distractors)
    dev: list[Page]  # queries for tuning
    held_out: list[Page]  # queries for acceptance


def cache_dir() -> Path:
    path = Path(os.environ.get("KTUI_BENCH_CACHE", "/tmp/ktui-bench-cache"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def render(path: Path) -> str:
    """The page as plain UTF-8 text (groff, no hyphenation, no overstriking)."""
    source = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    out = subprocess.run(
        ["groff", "-k", "-man", "-Tutf8", "-P-cbou", "-rHY=0", "-rLL=160n"],
        input=source, capture_output=True, timeout=60, check=False,
    )
    return out.stdout.decode("utf-8", "replace")


def split_name_section(text: str) -> tuple[str, str] | None:
    """(description from the NAME line, the rest of the page) or None when the page has no usable NAME."""
    lines = text.splitlines()
    headings = [i for i, line in enumerate(lines) if line and not line[0].isspace()]
    if len(headings) < 3:  # page header, NAME, at least one more section
        return None
    name_at, next_at = headings[1], headings[2]
    name_text = " ".join(line.strip() for line in lines[name_at + 1 : next_at]).strip()
    parts = _DASH.split(name_text, maxsplit=1)
    if len(parts) != 2 or not parts[1].strip():
        return None
    body = "\n".join(lines[:name_at] + lines[next_at:])
    body = re.sub(r"[ \t]{2,}", " ", body)
    body = re.sub(r"\n{3,}", "\n\n", body).strip()
    return parts[1].strip(), body


def _pages(paths: list[Path], language_of) -> list[Page]:
    pages = []
    for path in paths:
        split = split_name_section(render(path))
        if split is None or len(split[1]) < MIN_BODY_CHARS:
            continue  # a redirect stub (.so) or a page without a NAME description
        pages.append(Page(str(path.relative_to(MAN_ROOT)), language_of(path), split[0], split[1]))
    # A description shared by several pages (aliases, copies) has no single answer.
    count: dict[str, int] = {}
    for p in pages:
        count[p.query.lower()] = count.get(p.query.lower(), 0) + 1
    bodies: set[str] = set()
    unique = []
    for p in pages:
        if p.body in bodies:
            continue
        bodies.add(p.body)
        unique.append(p)
    return [p for p in unique if count[p.query.lower()] == 1]


def _held_out(page: Page) -> bool:
    return hashlib.sha1(page.key.encode()).digest()[0] % 2 == 1


def _load(name: str, paths: list[Path], language_of) -> KnownItemSet | None:
    signature = hashlib.sha1("\n".join(f"{p}:{p.stat().st_size}" for p in paths).encode()).hexdigest()[:12]
    cached = cache_dir() / f"corpus-{name}-{signature}.json"
    if cached.is_file():
        pages = [Page(**row) for row in json.loads(cached.read_text("utf-8"))]
    else:
        pages = _pages(paths, language_of)
        cached.write_text(json.dumps([p.__dict__ if hasattr(p, "__dict__") else
                                      {f: getattr(p, f) for f in Page.__slots__} for p in pages],
                                     ensure_ascii=False), "utf-8")
    if len(pages) < 50:
        return None
    return KnownItemSet(name, pages, [p for p in pages if not _held_out(p)], [p for p in pages if _held_out(p)])


def english_set() -> KnownItemSet | None:
    """Linux man-pages sections 2 and 7 (Debian `manpages`, `manpages-dev`); None if not installed."""
    paths = sorted(p for s in ENGLISH_SECTIONS for p in (MAN_ROOT / s).glob("*") if p.is_file())
    return _load("english", paths, lambda p: "en")


def multilingual_set() -> KnownItemSet | None:
    """Every translated page of the languages above (Chinese, Japanese, Korean, German, French...)."""
    paths = sorted(p for lang in MULTILINGUAL_LANGUAGES for p in (MAN_ROOT / lang).glob("man*/*") if p.is_file())
    return _load("multilingual", paths, lambda p: p.relative_to(MAN_ROOT).parts[0])
