"""Ingestion: everything that turns a source into chunks, independent of the queue.

* `read_leaf` reads a file, URL or note into `Document`s (core.ingest.readers);
* `expand_directory` / `expand_sitemap` turn containers into children (core.ingest.expand);
* `chunk_documents` cuts documents into token-bounded `Chunk`s (core.ingest.chunking);
* `Fetcher` is the shared, bounded HTTP client (core.ingest.fetch).

See docs/ingestion.md for behaviour and the decisions behind it.
"""

from ktui.core.ingest.chunking import chunk_documents, estimate_tokens
from ktui.core.ingest.expand import DirectoryListing, expand_directory, expand_sitemap
from ktui.core.ingest.fetch import FetchedResource, Fetcher, validate_url
from ktui.core.ingest.readers import SUPPORTED_EXTENSIONS, is_supported_file, read_leaf

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
