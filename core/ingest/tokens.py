"""The token estimator used to size chunks.

ktui must size chunks without loading the embedding model's tokenizer (each
provider has its own, and Ollama's is not reachable from here), so it uses a
fast, documented estimate:

* every character of a *dense* script — Han (Chinese, kanji), Hiragana,
  Katakana, Hangul, Bopomofo, Thai, Lao, Khmer, Myanmar — is one token
  (these scripts do not separate words with spaces, and BPE vocabularies give
  them roughly one token per character);
* every other character outside the Basic Multilingual Plane (emoji, …) is
  one token;
* a run of word characters (letters, digits, `_`, as `str.isalnum`) is one
  token per started WORD_PIECE (10) characters — "setup" is 1, "configuration"
  is 2, a 64-char hex hash is 7;
* every other non-space character (punctuation, symbols) is one token;
* whitespace (exactly the characters of `str.isspace`) is free.

The estimate is *additive* at token boundaries: for any cut at whitespace or at
a token start, tokens(a + b) == tokens(a) + tokens(b). The chunker relies on
that to bound chunks exactly with prefix sums instead of re-counting text.

Two implementations compute the same numbers: a regular expression for short
ASCII strings (lowest overhead) and a vectorised numpy pass that yields a
per-character "a token starts here" array for whole documents. A property test
checks that they agree.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

WORD_PIECE = 10
"""A run of word characters costs one token per started WORD_PIECE characters."""

SPACE, WORD, DENSE, OTHER = 0, 1, 2, 3

_DENSE_RANGES = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x1780, 0x17FF),  # Khmer
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x31FF),  # Bopomofo, Hangul compatibility Jamo, Katakana ext.
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA960, 0xA97F),  # Hangul Jamo extended A
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
)

_SHORT_ASCII = 2048
_ASCII_TOKEN_RE = re.compile(
    rf"[A-Za-z0-9_]{{1,{WORD_PIECE}}}|[^A-Za-z0-9_\t\n\x0b\x0c\r\x1c-\x1f ]"
)


@lru_cache(maxsize=1)
def _bmp_classes() -> np.ndarray:
    """Class of each BMP code point, built once (~40 ms) from str methods."""
    table = np.full(0x10000, OTHER, dtype=np.uint8)
    for cp in range(0x10000):
        ch = chr(cp)
        if ch.isspace():
            table[cp] = SPACE
        elif ch.isalnum() or cp == 0x5F:
            table[cp] = WORD
    for lo, hi in _DENSE_RANGES:
        # Only letters of those blocks are dense; their punctuation and marks stay OTHER.
        block = table[lo : hi + 1]
        block[block == WORD] = DENSE
    return table


@lru_cache(maxsize=1)
def _ascii_classes() -> np.ndarray:
    return _bmp_classes()[:128].copy()


@lru_cache(maxsize=1)
def _ascii_translation() -> bytes:
    """bytes.translate table mapping each ASCII byte to its class (a C loop, ~1 GB/s)."""
    return bytes(_ascii_classes().tolist()) + bytes(128)


def char_classes(text: str) -> np.ndarray:
    """One class (SPACE/WORD/DENSE/OTHER) per character of `text`."""
    if text.isascii():
        return np.frombuffer(text.encode("ascii").translate(_ascii_translation()), dtype=np.uint8)
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    astral = codes > 0xFFFF
    if astral.any():
        classes = _bmp_classes()[np.where(astral, 0, codes)]
        dense = astral & (codes >= 0x20000) & (codes <= 0x3FFFF)  # CJK extensions B..H
        classes[astral] = OTHER
        classes[dense] = DENSE
        return classes
    return _bmp_classes()[codes]


def token_starts(text: str) -> np.ndarray:
    """Boolean array: True where a token starts (see the module docstring)."""
    return starts_from_classes(char_classes(text))


def starts_from_classes(classes: np.ndarray) -> np.ndarray:
    starts = classes >= DENSE  # DENSE and OTHER characters are one token each
    word = (classes == WORD).view(np.int8)
    n = word.shape[0]
    change = np.empty(n + 1, dtype=np.int8)  # np.diff(prepend=0, append=0) without its overhead
    if n:
        change[0] = word[0]
        np.subtract(word[1:], word[:-1], out=change[1:n])
        change[n] = -word[-1]
    else:
        change[0] = 0
    edges = np.flatnonzero(change)
    if edges.size:
        first, stop = edges[0::2], edges[1::2]  # word runs are [first, stop)
        starts[first] = True
        length = stop - first
        long_runs = length > WORD_PIECE
        if long_runs.any():
            # Extra token starts every WORD_PIECE characters inside long runs.
            first, length = first[long_runs], length[long_runs]
            extra = (length - 1) // WORD_PIECE
            offsets = np.arange(int(extra.sum()), dtype=np.int64)
            group_base = np.repeat(np.cumsum(extra) - extra, extra)
            piece = offsets - group_base + 1
            starts[np.repeat(first, extra) + piece * WORD_PIECE] = True
    return starts


def token_prefix(text: str) -> tuple[np.ndarray, np.ndarray]:
    """(classes, cum): the class of each character, and cum[i] = tokens starting before i.

    `cum` has len(text)+1 entries; tokens(text[a:b]) == cum[b] - cum[a] whenever
    `a` is whitespace or a token start (the chunker only cuts there).
    """
    classes = char_classes(text)
    cum = np.zeros(len(text) + 1, dtype=np.int64)
    np.cumsum(starts_from_classes(classes), out=cum[1:])
    return classes, cum


def estimate_tokens(text: str) -> int:
    """Estimated token count of `text` (see the module docstring for the rules)."""
    if not text:
        return 0
    if len(text) <= _SHORT_ASCII and text.isascii():
        return len(_ASCII_TOKEN_RE.findall(text))
    return int(np.count_nonzero(token_starts(text)))
