"""Finding a base, an item or a group by what a person types: id, unique id prefix or
suffix, name (exact, then case-insensitive).

The one place these rules live: the facade's `resolve_base` / `resolve_item` /
`resolve_group` (used by the CLI, the TUI's command palette and the other front
ends) and import all go through it. Each rule is tried in order; the first that
matches exactly one candidate wins, and a rule that matches several is an error
listing them (never a guess).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TypeVar

from ktui.core.errors import NotFoundError, ValidationError
from ktui.core.models import KnowledgeBase, KnowledgeGroup, KnowledgeItem

MAX_LISTED_CANDIDATES = 8
MIN_ID_FRAGMENT = 4  # a shorter id prefix/suffix would match by accident

T = TypeVar("T")


def resolve_base(bases: Sequence[KnowledgeBase], ref: object) -> KnowledgeBase:
    """A base by id, unique name, unique id prefix or suffix (4+ characters), or case-insensitive name.

    Ids are time-ordered UUIDs: their prefixes are shared by things created together,
    so the random tail (suffix) is usually the shorter unique handle.
    """
    text = _reference(ref, "base", "must be a base id or name")
    rules: list[Callable[[KnowledgeBase], bool]] = [
        lambda b: b.id == text,
        lambda b: b.name == text,
        lambda b: _id_fragment(b.id, text),
        lambda b: b.name.casefold() == text.casefold(),
    ]
    return _pick(bases, rules, text, "base", "bases", lambda b: f"{b.name} ({b.id})", "Knowledge base")


def resolve_item(items: Sequence[KnowledgeItem], ref: object) -> KnowledgeItem:
    """An item by id, unique id prefix or suffix (4+ characters), source (path / URL) or display name."""
    text = _reference(ref, "item", "must be an item id, id prefix, source or name")
    absolute = os.path.abspath(os.path.expanduser(text))
    rules: list[Callable[[KnowledgeItem], bool]] = [
        lambda i: i.id == text,
        lambda i: _id_fragment(i.id, text),
        lambda i: i.source == text or i.source == absolute,
        lambda i: i.display_name == text,
        lambda i: i.display_name.casefold() == text.casefold(),
    ]
    return _pick(items, rules, text, "item", "items", lambda i: f"{i.type.value} {i.display_name} ({i.id})", "Item")


def resolve_group(groups: Sequence[KnowledgeGroup], ref: object) -> KnowledgeGroup:
    """A group by id, exact name, or case-insensitive name (group names are unique
    regardless of case, so the last rule matches at most one)."""
    text = _reference(ref, "group", "must be a group id or name")
    rules: list[Callable[[KnowledgeGroup], bool]] = [
        lambda g: g.id == text,
        lambda g: g.name == text,
        lambda g: g.name.casefold() == text.casefold(),
    ]
    return _pick(groups, rules, text, "group", "groups", lambda g: f"{g.name} ({g.id})", "Group")


def find_group_by_name(groups: Sequence[KnowledgeGroup], name: str) -> KnowledgeGroup | None:
    """The group of this name (case-insensitive, as group names are unique), or None."""
    key = name.strip().casefold()
    return next((g for g in groups if g.name.casefold() == key), None)


def _reference(ref: object, field: str, message: str) -> str:
    if not isinstance(ref, str) or not ref.strip():
        raise ValidationError.field(field, message)
    return ref.strip()


def _id_fragment(ident: str, text: str) -> bool:
    return len(text) >= MIN_ID_FRAGMENT and (ident.startswith(text) or ident.endswith(text))


def _pick(
    candidates: Sequence[T],
    rules: Sequence[Callable[[T], bool]],
    ref: str,
    field: str,
    plural: str,
    label: Callable[[T], str],
    kind: str,
) -> T:
    for rule in rules:
        hits = [c for c in candidates if rule(c)]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise ValidationError.field(field, _ambiguous(ref, plural, [label(h) for h in hits]))
    raise NotFoundError(kind, ref)


def _ambiguous(ref: str, what: str, labels: list[str]) -> str:
    shown = ", ".join(labels[:MAX_LISTED_CANDIDATES])
    more = f" and {len(labels) - MAX_LISTED_CANDIDATES} more" if len(labels) > MAX_LISTED_CANDIDATES else ""
    return f"'{ref}' matches {len(labels)} {what}: {shown}{more}; name one by its id"
