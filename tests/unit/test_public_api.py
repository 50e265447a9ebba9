"""The curated `ktui.core` surface: every name in __all__ resolves, and importing
the package stays cheap (no ingest stack, no providers, no textual)."""

from __future__ import annotations

import subprocess
import sys

import ktui.core


def test_every_public_name_resolves_to_its_defining_object() -> None:
    for name in ktui.core.__all__:
        value = getattr(ktui.core, name)
        assert getattr(value, "__name__", name) == name, name


def test_unknown_names_raise_attribute_error() -> None:
    try:
        ktui.core.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_the_public_api_is_the_documented_one() -> None:
    """A change to the public surface is a deliberate act: update this list and docs/architecture.md."""
    assert {"KnowledgeService", "rank_docs_by_embedding", "KnowledgeBase", "KnowledgeItem", "SearchResponse",
            "ValidationError", "NotFoundError", "Settings"} <= set(ktui.core.__all__)
    assert not [n for n in ktui.core.__all__ if n.startswith("_")]


def test_importing_models_and_errors_is_light() -> None:
    code = (
        "import sys\n"
        "import ktui.core, ktui.core.models, ktui.core.errors\n"
        "heavy = [m for m in ('textual', 'lxml', 'trafilatura', 'pathspec', 'ktui.core.ingest', 'httpx') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-P", "-c", code], check=True, timeout=60)
