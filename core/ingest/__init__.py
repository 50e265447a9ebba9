"""Ingestion: everything that turns a source into chunks, independent of the queue.

* `read_leaf` reads a file, URL or note into `Document`s (core.ingest.readers);
* `expand_directory` / `expand_sitemap` turn containers into children (core.ingest.expand);
* `chunk_documents` cuts documents into token-bounded `Chunk`s (core.ingest.chunking);
* `Fetcher` is the shared, bounded HTTP client (core.ingest.fetch).

See docs/ingestion.md for behaviour and the decisions behind it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Lazy (PEP 562): importing one part of ingest (the parse worker's protocol, the
# chunker) must not import every parser and the HTTP client with it; a search or a
# `ktui base list` imports none of them.
_WHERE = {
    "chunk_documents": "chunking",
    "estimate_tokens": "chunking",
    "DirectoryListing": "expand",
    "expand_directory": "expand",
    "expand_sitemap": "expand",
    "FetchedResource": "fetch",
    "Fetcher": "fetch",
    "validate_url": "fetch",
    "SUPPORTED_EXTENSIONS": "readers",
    "is_supported_file": "readers",
    "read_leaf": "readers",
}

if TYPE_CHECKING:
    from ktui.core.ingest.chunking import chunk_documents, estimate_tokens
    from ktui.core.ingest.expand import DirectoryListing, expand_directory, expand_sitemap
    from ktui.core.ingest.fetch import FetchedResource, Fetcher, validate_url
    from ktui.core.ingest.readers import SUPPORTED_EXTENSIONS, is_supported_file, read_leaf


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "SUPPORTED_EXTENSIONS",
    "DirectoryListing",
    "FetchedResource",
    "Fetcher",
    "chunk_documents",
    "estimate_tokens",
    "expand_directory",
    "expand_sitemap",
    "is_supported_file",
    "read_leaf",
    "validate_url",
]
