"""`ktui add`, `items`, `item`, `reindex`, `rm`, `search` and `chunks`: a base's items and
what a search finds in them."""

from __future__ import annotations

import argparse
import errno
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ktui.core import Settings
from ktui.core.errors import ValidationError
from ktui.core.models import ItemInput, KnowledgeBase, KnowledgeItem
from ktui.tui.cli_render import (
    UsageError,
    chunk_json,
    dump,
    item_json,
    item_lines,
    item_rows,
    search_json,
    snippet,
    table,
)
from ktui.tui.cli_shared import (
    BATCH,
    EXIT_FAILURE,
    EXIT_OK,
    URL_RE,
    all_items,
    err,
    not_waited_hint,
    service,
    wait_for,
    wait_json,
)
from ktui.tui.cli_text import say
from ktui.tui.cli_window import window_advice, window_overflow_json

# --- items ----------------------------------------------------------------


def _missing(path: Path, source: str) -> str:
    """Why a path that is neither a file nor a folder cannot be added: a link that leads
    nowhere is named as such, not as a path that "does not exist" (the user sees it in ls)."""
    if path.is_symlink():
        try:
            path.stat()
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return f"is a symbolic link loop (it leads back to itself): {source}"
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        return f"is a broken symbolic link (its target {target} does not exist): {source}"
    return f"does not exist: {source} (neither a file, a directory nor an http(s) URL)"


def _inputs(args: argparse.Namespace) -> list[ItemInput]:
    inputs: list[ItemInput] = []
    for source in args.sources:
        if URL_RE.match(source):
            if args.dir:
                raise UsageError(f"--dir expects directories, got the URL {source}")
            inputs.append(ItemInput("sitemap" if args.sitemap else "url", {"url": source}))
            continue
        if args.sitemap:
            raise UsageError(f"--sitemap expects http(s) URLs, got {source}")
        path = Path(source).expanduser()
        try:
            is_dir, exists = path.is_dir(), path.exists()
        except (OSError, ValueError) as exc:  # a name too long for the file system, a NUL byte...
            raise ValidationError.field("path", f"cannot be used ({getattr(exc, 'strerror', None) or exc}): "
                                                f"{source[:80]}") from None
        if is_dir:
            inputs.append(ItemInput("directory", {"path": str(path), "watch": bool(args.watch)}))
        elif args.dir:
            raise ValidationError.field("path", f"is not a directory: {source}")
        elif exists:
            inputs.append(ItemInput("file", {"path": str(path)}))
        else:
            raise ValidationError.field("path", _missing(path, source))
    if args.watch and not any(i.type == "directory" for i in inputs):
        raise UsageError("--watch applies to directories only")
    for note in args.note:
        text = sys.stdin.read() if note == "-" else note
        data: dict[str, Any] = {"content": text}
        if args.source_url:
            data["source_url"] = args.source_url
        inputs.append(ItemInput("note", data))
    if args.source_url and not args.note:
        raise UsageError("--source-url applies to --note only")
    if not inputs:
        raise UsageError("nothing to add: give paths, URLs or --note TEXT")
    return inputs


async def _report_queued(
    ks: Any, sub: Any, base: KnowledgeBase, items: list[KnowledgeItem], args: argparse.Namespace, verb: str
) -> int:
    """What add and reindex print: the queued items, then (with --wait) how each ended."""
    if not args.json:
        for item in items:
            say(f"{verb} {item.type.value} {item.display_name}  {item.id}")
    outcome = await wait_for(ks, sub, items, args) if args.wait else None
    sub.close()
    if args.json:
        dump({"base_id": base.id, "items": [item_json(i) for i in items], "wait": wait_json(outcome)})
    elif outcome is None:
        not_waited_hint(ks, args)
    return EXIT_FAILURE if outcome is not None and not outcome.ok else EXIT_OK


async def cmd_add(settings: Settings, args: argparse.Namespace) -> int:
    inputs = _inputs(args)
    async with service(settings, wait=args.wait) as ks:
        base = await ks.resolve_base(args.base)
        sub = ks.subscribe()
        created: list[KnowledgeItem] = []
        for start in range(0, len(inputs), BATCH):
            batch = inputs[start : start + BATCH]
            try:
                created.extend(await ks.add_items(base.id, batch))
            except ValidationError as exc:
                raise _named_by_argument(exc, batch, start) from None
        return await _report_queued(ks, sub, base, created, args, "added")


_ITEM_REF = re.compile(r"items\[(\d+)\](?:\.data\.\w+)?")  # how the facade names an input


def _argument(item: ItemInput, position: int) -> str:
    """How the user gave the input at `position` (1-based, all inputs) on the command line."""
    data = item.data if isinstance(item.data, dict) else {}
    return str(data.get("path") or data.get("url") or f"the note given as input {position}")


def _named_by_argument(exc: ValidationError, batch: Sequence[ItemInput], start: int) -> ValidationError:
    """The facade names inputs by position (`items[0].data.path`); a person typed paths
    and URLs, so the error names those instead."""

    def named(text: str) -> str:
        def one(match: re.Match[str]) -> str:
            n = int(match[1])
            return _argument(batch[n], start + n + 1) if n < len(batch) else match[0]

        return _ITEM_REF.sub(one, text)

    errors = {named(field): named(message) for field, message in exc.errors.items()}
    said = [message if field in message else f"{field}: {message}" for field, message in errors.items()]
    return ValidationError(errors, "; ".join(said))


def _tree_order(items: list[KnowledgeItem]) -> tuple[list[KnowledgeItem], dict[str, int]]:
    """Parents before their children (each level oldest first), with each item's depth."""
    children: dict[str | None, list[KnowledgeItem]] = {}
    for item in sorted(items, key=lambda i: (i.created_at, i.id)):
        children.setdefault(item.group_id, []).append(item)
    ids = {i.id for i in items}
    ordered: list[KnowledgeItem] = []
    depth: dict[str, int] = {}

    def walk(parent: str | None, level: int) -> None:
        for item in children.get(parent, []):
            ordered.append(item)
            depth[item.id] = level
            walk(item.id, level + 1)

    walk(None, 0)
    for parent in children:  # orphans of a filter (e.g. --type): keep them at the top level
        if parent is not None and parent not in ids:
            walk(parent, 0)
    return ordered, depth


async def cmd_items(settings: Settings, args: argparse.Namespace) -> int:
    async with service(settings, read_only=True) as ks:
        base = await ks.resolve_base(args.base)
        items = await all_items(ks, base.id, everything=args.all, type=args.type)
        ordered, depth = _tree_order(items)
        if args.json:
            dump({"base_id": base.id, "items": [item_json(i) for i in ordered]})
        elif not ordered:
            err(f"{base.name} has no items; add some with `ktui add {base.name} PATH|URL`")
        else:
            table(item_rows(ordered, depth), ["ID", "TYPE", "NAME", "STATUS"])
            if not base.is_usable:
                err(f"{base.name} has no usable embedding model: restore it (`ktui base restore {base.id} --model ...`)")
    return EXIT_OK


async def cmd_item(settings: Settings, args: argparse.Namespace) -> int:
    async with service(settings, read_only=True) as ks:
        base = await ks.resolve_base(args.base)
        item = await ks.resolve_item(base.id, args.item)
        chunks = None
        if item.type.is_leaf and base.is_usable:  # a failed base has no vector store
            chunks = len(await ks.list_item_chunks(base.id, item.id))
        advice = window_advice(ks, base)
    if args.json:
        dump({**item_json(item), "chunk_count": chunks, "window_overflow": window_overflow_json(item)})
    else:
        for line in item_lines(item, chunks, window_advice=advice):
            say(line)
    return EXIT_OK


async def _resolve_items(ks: Any, base: KnowledgeBase, refs: Sequence[str]) -> list[KnowledgeItem]:
    return list({i.id: i for i in [await ks.resolve_item(base.id, ref) for ref in refs]}.values())


async def cmd_reindex(settings: Settings, args: argparse.Namespace) -> int:
    async with service(settings, wait=args.wait) as ks:
        base = await ks.resolve_base(args.base)
        if args.all and args.items:
            raise UsageError("give ITEMs or --all, not both")
        if not args.all and not args.items:
            raise UsageError("name the items to reindex, or give --all")
        if args.all:
            items = await all_items(ks, base.id, everything=False)
        else:
            items = await _resolve_items(ks, base, args.items)
        sub = ks.subscribe()
        # --all rebuilds (a damaged store too); a base whose store needs a rebuild is always forced
        fresh = await ks.reindex_items(base.id, [i.id for i in items], force=args.all or base.needs_rebuild)
        return await _report_queued(ks, sub, base, fresh, args, "reindexing")


async def cmd_rm(settings: Settings, args: argparse.Namespace) -> int:
    async with service(settings) as ks:
        base = await ks.resolve_base(args.base)
        items = await _resolve_items(ks, base, args.items)
        await ks.delete_items(base.id, [i.id for i in items])
        if args.json:
            dump({"base_id": base.id, "removed": [i.id for i in items]})
        else:
            for item in items:
                say(f"removed {item.type.value} {item.display_name}  {item.id}")
    return EXIT_OK


def _search_filters(args: argparse.Namespace) -> dict[str, Any] | None:
    filters: dict[str, Any] = {}
    if args.types:
        filters["item_types"] = args.types
    if args.under:
        under = args.under
        if "://" not in under:  # a path: the item sources are absolute paths
            under = str(Path(under).expanduser().absolute())
        filters["source_prefix"] = under
    if args.after:
        filters["modified_after"] = args.after
    return filters or None


async def cmd_search(settings: Settings, args: argparse.Namespace) -> int:
    if args.all and len(args.terms) != 1:
        raise UsageError("with --all, give only the query")
    if not args.all and len(args.terms) < 2:
        raise UsageError("give a base and a query (or --all and a query)")
    query = args.terms[-1]
    filters = _search_filters(args)
    async with service(settings, read_only=True) as ks:
        if args.all or len(args.terms) > 2:
            bases = None if args.all else [(await ks.resolve_base(ref)).id for ref in args.terms[:-1]]
            response = await ks.search_bases(bases, query, args.top_k, mode=args.mode, filters=filters)
            names = {bid: (await ks.get_base(bid)).name for bid in dict.fromkeys(r.base_id for r in response.results)
                     if bid is not None}
            mode = args.mode or "each base's"
        else:
            base = await ks.resolve_base(args.terms[0])
            response = await ks.search(base.id, query, args.top_k, mode=args.mode, filters=filters)
            names = None
            mode = response.mode.value if response.mode is not None else args.mode or base.search_mode.value
    if args.json:
        dump(search_json(query, mode, response, names))
        return EXIT_OK
    if response.reason:  # keyword results instead of semantic ones, or results not reranked
        err(f"warning: {response.reason}")
    if not response.results:
        say("no results")
    for r in response.results:
        source = r.metadata.get("source") or r.item_id or ""
        where = f" p.{r.metadata['page']}" if r.metadata.get("page") is not None else ""
        in_base = f"[{names.get(r.base_id, r.base_id)}] " if names is not None else ""
        say(f"{r.rank:>2}. {r.relevance:.2f} ({r.score:.3f} {r.score_kind.value}) {in_base}{source}{where}")
        say(f"    {snippet(r.page_content)}")
    return EXIT_OK


async def cmd_chunks(settings: Settings, args: argparse.Namespace) -> int:
    async with service(settings, read_only=True) as ks:
        base = await ks.resolve_base(args.base)
        item = await ks.resolve_item(base.id, args.item)
        # A failed base has no vector store (its chunks were never imported).
        chunks = await ks.list_item_chunks(base.id, item.id) if base.is_usable else []
    if args.json:
        dump({"base_id": base.id, "item_id": item.id, "chunks": [chunk_json(c) for c in chunks]})
    elif not chunks:
        err(f"{item.display_name} has no chunks (status: {item.status.value})")
    else:
        for c in chunks:
            say(f"#{c.chunk_index:<4} {c.id}  {snippet(c.text, 120)}")
    return EXIT_OK
