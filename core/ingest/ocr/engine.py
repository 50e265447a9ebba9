"""Tesseract, run as a subprocess on one page image at a time.

Chosen by measurement over RapidOCR's ONNX wheels (docs/ingestion.md, "OCR"):
on the generated page set it had a lower error rate and was about ten times
faster per page on this 2-core machine, and it is a 10 MB Debian package rather
than 270 MB of wheels (onnxruntime, OpenCV). It is a system program, so it may be
missing; every caller gets an `OcrUnavailable` that says how to install it.

Each page is one `tesseract stdin stdout tsv` call: the page goes in as PGM, the
words come back with a confidence each. A call is bounded by the page time limit,
runs with one OpenMP thread (the machine's other core belongs to the app), and is
killed with the parse worker if the worker dies (PR_SET_PDEATHSIG on Linux).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import io
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache

from PIL import Image

from ktui.core.errors import IngestError

INSTALL_HINT = "install Tesseract, e.g. `apt install tesseract-ocr`"


class OcrUnavailable(IngestError):
    """The OCR program (or a language it needs) is not installed."""


@dataclass(frozen=True, slots=True)
class PageText:
    """What recognition found on one page: its text and the words' mean confidence (0..100)."""

    text: str
    confidence: float | None  # None when no word was found
    words: int


@dataclass(frozen=True, slots=True)
class Tesseract:
    command: str  # the resolved executable
    version: str  # "tesseract 5.3.0"
    languages: frozenset[str]


def _kill_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@lru_cache(maxsize=8)
def find_tesseract(command: str) -> Tesseract:
    """The installed Tesseract named by `command` (a name on PATH or a path), or OcrUnavailable."""
    resolved = shutil.which(command)
    if resolved is None:
        raise OcrUnavailable(f"OCR needs Tesseract, which is not installed ({command!r} not found; {INSTALL_HINT})")
    try:
        version = subprocess.run([resolved, "--version"], capture_output=True, timeout=30, check=False)
        langs = subprocess.run([resolved, "--list-langs"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise OcrUnavailable(f"Tesseract ({resolved}) cannot be run: {exc}") from None
    first = (version.stdout or version.stderr).decode("utf-8", "replace").strip().splitlines()
    names = langs.stdout.decode("utf-8", "replace").splitlines()[1:]  # first line: "List of ..."
    return Tesseract(resolved, first[0] if first else "tesseract", frozenset(n.strip() for n in names if n.strip()))


def check_languages(engine: Tesseract, languages: tuple[str, ...]) -> None:
    missing = [lang for lang in languages if lang not in engine.languages]
    if missing:
        name = missing[0]
        raise OcrUnavailable(
            f"OCR language '{name}' is not installed for Tesseract "
            f"(e.g. `apt install tesseract-ocr-{name.lower().replace('_', '-')}`)"
        )


def recognise(engine: Tesseract, image: Image.Image, languages: tuple[str, ...], timeout: float) -> PageText:
    """Recognise one greyscale page. Raises IngestError (without a file name) on failure."""
    buffer = io.BytesIO()
    image.save(buffer, "PPM")  # PGM for mode L: no compression to undo on either side
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    try:
        done = subprocess.run(
            [engine.command, "stdin", "stdout", "-l", "+".join(languages), "--psm", "3", "tsv"],
            input=buffer.getvalue(), capture_output=True, timeout=timeout, env=env, check=False,
            preexec_fn=_kill_with_parent if sys.platform == "linux" else None,
        )
    except subprocess.TimeoutExpired:
        raise IngestError(f"OCR took longer than {timeout:g} s on one page and was stopped (ocr.page_timeout)") from None
    except OSError as exc:
        raise OcrUnavailable(f"Tesseract ({engine.command}) cannot be run: {exc}") from None
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise IngestError(f"OCR failed (Tesseract exit {done.returncode}: {detail[-1] if detail else 'no message'})")
    return parse_tsv(done.stdout.decode("utf-8", "replace"))


def parse_tsv(tsv: str) -> PageText:
    """Tesseract's TSV (one row per word) as text: words of a line joined by spaces, lines by
    newlines, paragraphs and blocks by a blank line; confidence is the mean over words."""
    lines: list[str] = []
    current: list[str] = []
    key: tuple[str, str, str] | None = None
    block: tuple[str, str] | None = None
    confidences: list[float] = []
    for row in tsv.splitlines()[1:]:
        cells = row.split("\t")
        if len(cells) < 12 or cells[0] != "5":
            continue
        word = cells[11].strip()
        try:
            conf = float(cells[10])
        except ValueError:
            conf = -1.0
        if not word:
            continue
        line_key = (cells[2], cells[3], cells[4])
        if line_key != key:
            if current:
                lines.append(" ".join(current))
            if block is not None and (cells[2], cells[3]) != block:
                lines.append("")  # a new paragraph or block
            current, key, block = [], line_key, (cells[2], cells[3])
        current.append(word)
        if conf >= 0:
            confidences.append(conf)
    if current:
        lines.append(" ".join(current))
    mean = round(sum(confidences) / len(confidences), 1) if confidences else None
    return PageText("\n".join(lines).strip(), mean, len(confidences))
