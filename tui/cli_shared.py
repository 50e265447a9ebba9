"""What the CLI's commands share: the facade for one command, listing everything, base
settings from the arguments, waiting for queued work."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from ktui.core import Settings
from ktui.core.errors import KnowledgeError
from ktui.core.models import ANY_GROUP, ItemType, KnowledgeItem
from ktui.tui.cli_text import warn
from ktui.tui.cli_window import window_json, window_lines
from ktui.tui.paging import all_bases
from ktui.tui.skip_summary import skipped_summary

if TYPE_CHECKING:  # cli_progress (the --wait follower) is imported by the commands that wait
    from ktui.tui.cli_progress import WaitOutcome

EXIT_OK, EXIT_FAILURE = 0, 1
URL_RE = re.compile(r"^https?://", re.IGNORECASE)
BATCH = 100


@asynccontextmanager
async def service(settings: Settings, *, read_only: bool = False, recover: bool = False,
                  wait: bool = False) -> AsyncIterator[Any]:
    """The facade for one command. Reading commands open a reader (never refused,
    never waiting, even beside the TUI); the others hold the directory for the
    command's own work and leave the recovery of older work to `ktui wait` and the
    long-running holders (TUI, serve), which do it once.

    `wait` (a `--wait` command): on a shared store the process also sweeps like a
    holder (but follows no watched folder), since it waits for items another process
    may give back (closed) or lose (killed) before finishing them: somebody must pick
    those up, or the wait never ends."""
    from ktui.core.service import KnowledgeService
    from ktui.tui.cli import startup_over

    sweep = wait and not recover and settings.store.url is not None
    ks = await KnowledgeService.open(settings=settings, read_only=read_only, recover=recover or sweep,
                                     watch=not sweep)
    startup_over()  # the command's own work (indexing, waiting) runs with the collector
    try:
        yield ks
    finally:
        await ks.close()


def err(text: str) -> None:
    warn(text)


# --- shared pieces --------------------------------------------------------


async def all_items(ks: Any, base_id: str, *, everything: bool, type: str | None = None) -> list[KnowledgeItem]:
    """Every root (or, `everything`, every item) of the base, newest first: keyset pages
    of 1000 (`iter_items`), so the whole listing costs O(n) (pages by number re-counted
    and skipped every earlier row: 60 s for 46,000 items)."""
    return [item async for item in ks.iter_items(base_id, type, ANY_GROUP if everything else None, page_size=1000)]


async def group_setting(ks: Any, ref: str) -> dict[str, str]:
    """`--group REF` for base create/update: an existing group by id or name, else a new
    group of that name, which the facade creates together with the base (never alone)."""
    from ktui.core.errors import NotFoundError

    try:
        return {"group_id": (await ks.resolve_group(ref)).id}
    except NotFoundError:
        return {"group_name": ref}


SETTING_ATTRS = ("emoji", "group", "rerank_model", "chunk_size", "chunk_overlap", "threshold", "top_k", "mode", "alpha",
                 "ocr", "ocr_languages", "ocr_max_pages")


async def base_config(ks: Any, args: argparse.Namespace) -> dict[str, Any]:
    mapping = {
        "name": "name",
        "emoji": "emoji",
        "rerank_model": "rerank_model_id",
        "chunk_size": "chunk_size",
        "chunk_overlap": "chunk_overlap",
        "threshold": "threshold",
        "top_k": "document_count",
        "mode": "search_mode",
        "alpha": "hybrid_alpha",
        "ocr": "ocr_enabled",
        "ocr_languages": "ocr_languages",
        "ocr_max_pages": "ocr_max_pages",
    }
    config = {field: getattr(args, attr) for attr, field in mapping.items() if hasattr(args, attr)}
    if hasattr(args, "group"):
        config.update(await group_setting(ks, args.group) if args.group is not None else {"group_id": None})
    return config


async def wait_for(ks: Any, sub: Any, roots: Sequence[KnowledgeItem], args: argparse.Namespace) -> WaitOutcome:
    from ktui.tui.cli_progress import Progress, follow
    from ktui.tui.cli_render import names_itself, own_error

    outcome = await follow(ks, sub, roots, Progress(sys.stderr))
    bases = [await ks.get_base(b) for b in dict.fromkeys(r.base_id for r in roots)]
    outcome.over_window = [i for b in bases for i in await ks.items_over_window(b.id) if i.id in outcome.completed_ids]
    if not args.json:
        named = [i for i in outcome.failed if names_itself(i)]
        summary = f"{outcome.completed:,} completed, {len(named):,} failed"
        if held := len(outcome.failed) - len(named):  # listed as failed in `ktui items`: say why
            summary += f" (and {held:,} folder{'s' if held != 1 else ''} holding failed files)"
        if outcome.unfinished:
            summary += f", {outcome.unfinished:,} unfinished"
        err(f"{'stopped' if outcome.unfinished else 'done'}: {summary}")
        if outcome.paused:
            err(f"paused: {outcome.paused}; free some space, then run `ktui wait` to finish")
        for item in named:
            err(f"  failed  {item.type.value} {item.source}: {own_error(item)}")
        for line in window_lines(ks, bases, outcome.over_window):
            err(line)
    outcome.skipped = await walk_skips(ks, roots)
    if not args.json:
        for folder, skipped in outcome.skipped:
            summary = skipped_summary(skipped)
            err(f"skipped in {folder.display_name}: {summary}")
    return outcome


async def walk_skips(ks: Any, roots: Sequence[KnowledgeItem]) -> list[tuple[KnowledgeItem, dict[str, Any]]]:
    """The followed folders whose walk left files out (one lookup per root folder)."""
    found = []
    for root in roots:
        if root.type != ItemType.DIRECTORY:
            continue
        try:
            item = await ks.get_item(root.id)
        except KnowledgeError:
            continue
        skipped = getattr(item.data, "skipped", None)
        if skipped and skipped.get("total"):
            found.append((item, skipped))
    return found


def wait_json(outcome: WaitOutcome | None) -> dict[str, Any] | None:
    if outcome is None:
        return None
    return {
        "total": outcome.total,
        "completed": outcome.completed,
        "unfinished": outcome.unfinished,
        "paused": outcome.paused,
        "failed": [{"id": i.id, "type": i.type.value, "source": i.source, "error": i.error} for i in outcome.failed],
        "window_overflow": window_json(outcome.over_window),  # completed items with chunks past the window
        "skipped": [{"id": i.id, "source": i.source, **s} for i, s in outcome.skipped],  # left out by folder walks
    }


def not_waited_hint(ks: Any, args: argparse.Namespace) -> None:
    """Where queued work goes when the command does not wait. On a shared store a TUI,
    `ktui serve` or `ktui watch` open anywhere on it sweeps the items at once; on SQLite
    they wait for the next ktui that holds this data directory."""
    if args.json:
        return
    if ks.settings.store.url is not None:
        err("queued on the shared store; any TUI, `ktui serve` or `ktui watch` open on it indexes them now, "
            "else the next one to open it (use --wait, or run `ktui wait`, to index from here)")
    else:
        err("queued; indexing runs the next time ktui opens this data directory "
            "(use --wait, or run `ktui wait`, to index now)")


__all__ = [
    "BATCH",
    "EXIT_FAILURE",
    "EXIT_OK",
    "SETTING_ATTRS",
    "URL_RE",
    "all_bases",
    "all_items",
    "base_config",
    "err",
    "group_setting",
    "not_waited_hint",
    "service",
    "wait_for",
    "wait_json",
    "walk_skips",
]
