"""Which files are plain text, without importing a single parser.

The runtime batches plain-text files (Markdown, prose, source code, configuration:
read by decoding, no parser library, never OCR) many to one parse call and one
embedding call (core/runtime/batches.py); it has to tell them apart before reading,
on the event loop, and must not import lxml or pypdf to do so. The readers take
their extension tables from here, so the two can never disagree.
"""

from __future__ import annotations

import os

MARKDOWN_EXTENSIONS = frozenset({".md", ".markdown", ".mdown", ".mkd", ".mkdn", ".mdx"})
TEXT_EXTENSIONS = frozenset(
    (
        # prose, source code and configuration, all read as plain text
        ".txt", ".text", ".rst", ".adoc", ".asciidoc", ".org", ".tex", ".log", ".nfo", ".srt",
        ".vtt", ".py", ".pyi", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".java",
        ".kt", ".kts", ".scala", ".groovy", ".gradle", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp",
        ".hh", ".cs", ".fs", ".go", ".rs", ".rb", ".php", ".swift", ".m", ".mm", ".dart", ".lua",
        ".pl", ".pm", ".r", ".jl", ".ex", ".exs", ".erl", ".hrl", ".hs", ".clj", ".cljs", ".elm",
        ".ml", ".mli", ".nim", ".zig", ".v", ".sv", ".vhd", ".sql", ".sh", ".bash", ".zsh",
        ".fish", ".ps1", ".bat", ".cmd", ".vue", ".svelte", ".css", ".scss", ".sass", ".less",
        ".graphql", ".gql", ".proto", ".tf", ".hcl", ".nix", ".yaml", ".yml", ".toml", ".ini",
        ".cfg", ".conf", ".properties", ".xml", ".xsd", ".jsonl", ".ndjson",
    )
)
TEXT_FILENAMES = frozenset(
    {"readme", "license", "licence", "changelog", "authors", "contributing", "makefile", "dockerfile",
     "procfile", "gemfile", "rakefile", "vagrantfile", "justfile", "copying", "notice", "todo"}
)
"""Well-known extension-less text files (matched case-insensitively)."""


def is_plain_text(path: str) -> bool:
    """True for a file read as plain text or Markdown (by extension or well-known name)."""
    name = os.path.basename(path).lower()
    return os.path.splitext(name)[1] in _PLAIN or name in TEXT_FILENAMES


_PLAIN = MARKDOWN_EXTENSIONS | TEXT_EXTENSIONS
