"""Container expansion: a directory into a tree of indexable files (and sitemaps, re-exported).

The walk is what a user expects from "index this folder":

* dot-files and dot-directories are skipped (.git, .venv, .cache, .DS_Store …);
* so are dependency, build and cache folders by name (`DEFAULT_SKIPPED_DIRS`) and any
  directory that is a Python virtual environment or conda env (has `pyvenv.cfg` or
  `conda-meta/`) whatever its name;
* `.gitignore` files inside the walked folder are honoured with git's semantics
  (pathspec's GitIgnoreSpec; deeper files override shallower ones, `!` re-includes,
  an ignored directory is not entered);
* `settings.exclude` globs (gitignore syntax, relative to the root) skip files and
  folders; `settings.include` globs, when given, keep only the files they match;
* symlinks are followed, but every real directory is visited once, so a link loop
  ends instead of recursing forever, and a linked tree is not listed twice;
* only files a reader supports are kept, and folders left with nothing are dropped;
* empty files (0 bytes, or nothing but whitespace up to `BLANK_SCAN_BYTES`: an empty
  `__init__.py`, a placeholder) are skipped as `empty file`, not listed to fail.
"""

from __future__ import annotations

import asyncio
import codecs
import errno
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

import pathspec

from ktui.core.config import IngestSettings
from ktui.core.errors import IngestError
from ktui.core.ingest.readers import is_image_file, is_supported_file
from ktui.core.ingest.sitemap import expand_sitemap

__all__ = ["DEFAULT_SKIPPED_DIRS", "DirectoryListing", "expand_directory", "expand_sitemap", "walk_directory"]

DEFAULT_SKIPPED_DIRS = frozenset(
    {
        "node_modules", "bower_components", "jspm_packages", "__pycache__", "__pypackages__",
        "site-packages", "venv", "virtualenv", "build", "dist", "target", "_build", "htmlcov",
        "coverage", "out-tsc",
    }
)
"""Folder names skipped anywhere in the tree (besides every name starting with a dot)."""

_MAX_DEPTH = 128

BLANK_PROBE_BYTES = 64
"""Every listed file's first bytes are read during the walk: almost every real file shows
text within them, so one short read settles it; only a file whose head is whitespace is
read on (see `BLANK_SCAN_BYTES`)."""

BLANK_SCAN_BYTES = 1 << 20
"""A file whose head is whitespace is read on up to this size to see whether it holds only
whitespace; a larger one is listed (a huge whitespace-only file fails on its own), so
the walk never reads much of any file."""

_SCAN_BLOCK = 64 * 1024


def _is_blank(entry: os.DirEntry[str]) -> bool:
    """Empty (0 bytes) or only whitespace up to `BLANK_SCAN_BYTES` (a UTF-8 byte-order mark
    allowed). Anything that cannot be stat'ed or read is not blank: its read will say why."""
    try:
        size = entry.stat().st_size  # follows symlinks
        if size == 0:
            return True
        if size > BLANK_SCAN_BYTES:
            return False
        # O_NONBLOCK: a file swapped for a FIFO since the walk saw it must not hang the walk
        fd = os.open(entry.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        try:
            head = os.read(fd, BLANK_PROBE_BYTES).removeprefix(codecs.BOM_UTF8)
            if head.strip():
                return False
            seen = len(head)
            while seen <= BLANK_SCAN_BYTES:
                block = os.read(fd, _SCAN_BLOCK)
                if not block:
                    return True
                if block.strip():
                    return False
                seen += len(block)
            return False  # grew past the limit while being read: let its read decide
        finally:
            os.close(fd)
    except OSError:
        return False


@dataclass
class DirectoryListing:
    """A folder with indexable content: absolute paths, sorted; empty folders dropped."""

    path: str
    files: list[str] = field(default_factory=list)
    subdirs: list[DirectoryListing] = field(default_factory=list)
    skipped: SkipReport | None = None  # the root's listing only: what the walk left out, and why

    def iter_files(self) -> Iterator[str]:
        """Every file of the tree, depth first (this folder's files before its subfolders')."""
        yield from self.files
        for sub in self.subdirs:
            yield from sub.iter_files()

    @property
    def file_count(self) -> int:
        return len(self.files) + sum(sub.file_count for sub in self.subdirs)


SKIP_EXAMPLES = 3  # paths kept per reason: enough to recognise the case, bounded for 100k files


@dataclass
class SkipReport:
    """What a folder walk left out, by reason: counts, and the first few paths (relative).

    Reasons: `unsupported type`, `ignore rule` (.gitignore, `ingest.exclude`,
    `ingest.include`), `hidden` (a dot name), `skipped folder` (node_modules, .git,
    virtual environments…), `image (OCR off)`, `empty file` (0 bytes or only whitespace,
    see `BLANK_SCAN_BYTES`), `unreadable` (a file or subfolder that
    cannot be listed or stat'ed), `symlink loop` (a link to itself, or links that point at
    each other: ELOOP), `too deep or a loop` (a folder already walked, e.g. linked back to
    a parent).
    """

    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, reason: str, rel: str) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + 1
        shown = self.examples.setdefault(reason, [])
        if len(shown) < SKIP_EXAMPLES:
            shown.append(rel)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def as_dict(self) -> dict[str, object]:
        return {"total": self.total, "counts": dict(sorted(self.counts.items())),
                "examples": {k: list(v) for k, v in sorted(self.examples.items())}}


def _gitwild(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec | None:
    return pathspec.GitIgnoreSpec.from_lines(patterns) if patterns else None


class _Walker:
    def __init__(self, root: str, settings: IngestSettings, images: bool = True):
        self.root = root
        self.images = images
        self.include = _gitwild(settings.include)
        self.exclude = _gitwild(settings.exclude)
        self.seen_dirs: set[tuple[int, int]] = set()
        self.skipped = SkipReport()

    @staticmethod
    def _ignored(rel: str, ignores: list[tuple[str, pathspec.GitIgnoreSpec]]) -> bool:
        """Git semantics: the last matching pattern across all applicable .gitignore files wins."""
        verdict: bool | None = None
        for base, spec in ignores:
            sub = rel[len(base) + 1 :] if base else rel
            result = spec.check_file(sub).include
            if result is not None:
                verdict = result
        return bool(verdict)

    @staticmethod
    def _read_gitignore(directory: str) -> pathspec.GitIgnoreSpec | None:
        try:
            with open(os.path.join(directory, ".gitignore"), encoding="utf-8", errors="replace") as handle:
                lines = handle.read().splitlines()
        except OSError:
            return None
        return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None

    @staticmethod
    def _is_environment(path: str) -> bool:
        return os.path.isfile(os.path.join(path, "pyvenv.cfg")) or os.path.isdir(os.path.join(path, "conda-meta"))

    def visit(self, path: str, rel: str, ignores: list[tuple[str, pathspec.GitIgnoreSpec]],
              depth: int) -> DirectoryListing | None:
        try:
            st = os.stat(path)
        except OSError:
            self.skipped.add("unreadable", rel + "/")
            return None
        key = (st.st_dev, st.st_ino)
        if key in self.seen_dirs or depth > _MAX_DEPTH:
            self.skipped.add("too deep or a loop", rel + "/")
            return None
        self.seen_dirs.add(key)
        try:
            with os.scandir(path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            if depth == 0:
                raise
            self.skipped.add("unreadable", rel + "/")
            return None
        own = self._read_gitignore(path) if any(e.name == ".gitignore" for e in entries) else None
        if own is not None:
            ignores = [*ignores, (rel, own)]
        listing = DirectoryListing(path)
        for entry in entries:
            name = entry.name
            child_rel = f"{rel}/{name}" if rel else name
            if name.startswith("."):
                if name != ".gitignore":
                    self.skipped.add("hidden", child_rel)
                continue
            try:
                is_dir = entry.is_dir()  # follows symlinks
                is_file = not is_dir and entry.is_file()
            except OSError as exc:  # ELOOP: a link to itself, or links pointing at each other
                self.skipped.add("symlink loop" if exc.errno == errno.ELOOP else "unreadable", child_rel)
                continue
            if is_dir:
                if name in DEFAULT_SKIPPED_DIRS or self._is_environment(entry.path):
                    self.skipped.add("skipped folder", child_rel + "/")
                    continue
                if self._ignored(child_rel + "/", ignores) or (
                        self.exclude is not None and self.exclude.match_file(child_rel + "/")):
                    self.skipped.add("ignore rule", child_rel + "/")
                    continue
                sub = self.visit(entry.path, child_rel, ignores, depth + 1)
                if sub is not None:
                    listing.subdirs.append(sub)
            elif is_file:
                if not is_supported_file(name):
                    self.skipped.add("unsupported type", child_rel)
                    continue
                if self._ignored(child_rel, ignores) or (
                        self.exclude is not None and self.exclude.match_file(child_rel)) or (
                        self.include is not None and not self.include.match_file(child_rel)):
                    self.skipped.add("ignore rule", child_rel)
                    continue
                if not self.images and is_image_file(name):
                    self.skipped.add("image (OCR off)", child_rel)
                    continue
                if _is_blank(entry):
                    self.skipped.add("empty file", child_rel)
                    continue
                listing.files.append(entry.path)
            else:
                self.skipped.add("not a regular file", child_rel)
        if not listing.files and not listing.subdirs:
            return None
        return listing


def walk_directory(path: str, settings: IngestSettings, images: bool = True) -> DirectoryListing:
    """Blocking walk (see the module docstring); `expand_directory` runs it in a thread.
    `images` False leaves image files out (the base does not OCR them)."""
    root = os.path.abspath(os.path.expanduser(path))
    if not os.path.exists(root):
        raise IngestError(f"Directory not found: {path}")
    if not os.path.isdir(root):
        raise IngestError(f"Not a directory: {path}")
    walker = _Walker(root, settings, images)
    try:
        listing = walker.visit(root, "", [], 0)
    except PermissionError:
        raise IngestError(f"Directory cannot be read (permission denied): {path}") from None
    except OSError as exc:
        raise IngestError(f"Directory cannot be read ({exc.strerror or exc}): {path}") from None
    if listing is None:
        left = walker.skipped
        why = "" if not left.total else " (skipped: " + ", ".join(
            f"{n} {reason}" for reason, n in sorted(left.counts.items(), key=lambda kv: (-kv[1], kv[0]))) + ")"
        raise IngestError(f"Directory contains no indexable files{why}")
    listing.skipped = walker.skipped
    return listing


async def expand_directory(path: str, settings: IngestSettings, images: bool = True) -> DirectoryListing:
    """Walk `path` off the event loop; IngestError when missing, not a folder, or empty."""
    return await asyncio.to_thread(walk_directory, path, settings, images)
