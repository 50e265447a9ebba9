"""The headless sub-commands: each `cmd_<name>(settings, args) -> exit code`.

Every command opens the facade, does one thing and closes it. Reading commands
open a reader beside whoever holds the directory. Queued work that is not
waited for (`--wait`) is interrupted when the command exits and picked up again
by the next holder that recovers: the TUI, `ktui wait`, `ktui serve`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, nullcontext
from pathlib import Path
from typing import Any

from ktui.core import Settings
from ktui.core.errors import KnowledgeError, ValidationError
from ktui.core.models import ANY_GROUP, ItemInput, ItemStatus, ItemType, KnowledgeBase, KnowledgeItem
from ktui.tui.cli_progress import Progress, WaitOutcome, follow
from ktui.tui.cli_render import (
    UsageError,
    base_json,
    base_lines,
    base_status_label,
    chunk_json,
    dump,
    dump_line,
    group_json,
    item_json,
    item_lines,
    item_rows,
    model_json,
    search_json,
    snippet,
    table,
)
from ktui.tui.cli_text import say, warn
from ktui.tui.cli_window import window_advice, window_json, window_lines, window_overflow_json
from ktui.tui.skip_summary import skipped_summary

EXIT_OK, EXIT_FAILURE = 0, 1
URL_RE = re.compile(r"^https?://", re.IGNORECASE)
BATCH = 100


@asynccontextmanager
async def service(settings: Settings, *, read_only: bool = False, recover: bool = False) -> AsyncIterator[Any]:
    """The facade for one command. Reading commands open a reader (never refused,
    never waiting, even beside the TUI); the others hold the directory for the
    command's own work and leave the recovery of older work to `ktui wait` and the
    long-running holders (TUI, serve), which do it once."""
    from ktui.core.service import KnowledgeService

    ks = await KnowledgeService.open(settings=settings, read_only=read_only, recover=recover)
    try:
        yield ks
    finally:
        await ks.close()


def err(text: str) -> None:
    warn(text)


# --- shared pieces --------------------------------------------------------


async def _all_bases(ks: Any) -> list[KnowledgeBase]:
    out: list[KnowledgeBase] = []
    page = 1
    while True:
        listing = await ks.list_bases(page=page, limit=100)
        out.extend(listing.items)
        if page >= listing.pages:
            return out
        page += 1


async def _all_items(ks: Any, base_id: str, *, everything: bool, type: str | None = None) -> list[KnowledgeItem]:
    out: list[KnowledgeItem] = []
    page = 1
    while True:
        listing = await ks.list_items(base_id, type=type, group_id=ANY_GROUP if everything else None,
                                      page=page, limit=100)
        out.extend(listing.items)
        if page >= listing.pages:
            return out
        page += 1


async def _group_setting(ks: Any, ref: str) -> dict[str, str]:
    """`--group REF` for base create/update: an existing group by id or name, else a new
    group of that name, which the facade creates together with the base (never alone)."""
    from ktui.core.errors import NotFoundError

    try:
        return {"group_id": (await ks.resolve_group(ref)).id}
    except NotFoundError:
        return {"group_name": ref}


SETTING_ATTRS = ("emoji", "group", "rerank_model", "chunk_size", "chunk_overlap", "threshold", "top_k", "mode", "alpha",
                 "ocr", "ocr_languages", "ocr_max_pages")


async def _base_config(ks: Any, args: argparse.Namespace) -> dict[str, Any]:
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
        config.update(await _group_setting(ks, args.group) if args.group is not None else {"group_id": None})
    return config


async def _wait(ks: Any, sub: Any, roots: Sequence[KnowledgeItem], args: argparse.Namespace) -> WaitOutcome:
    outcome = await follow(ks, sub, roots, Progress(sys.stderr))
    bases = [await ks.get_base(b) for b in dict.fromkeys(r.base_id for r in roots)]
    outcome.over_window = [i for b in bases for i in await ks.items_over_window(b.id) if i.id in outcome.completed_ids]
    if not args.json:
        summary = f"{outcome.completed} completed, {len(outcome.failed)} failed"
        if outcome.unfinished:
            summary += f", {outcome.unfinished} unfinished"
        err(f"{'stopped' if outcome.unfinished else 'done'}: {summary}")
        if outcome.paused:
            err(f"paused: {outcome.paused}; free some space, then run `ktui wait` to finish")
        for item in outcome.failed:
            if item.type.is_leaf or not item.error or "child" not in item.error:
                err(f"  failed  {item.type.value} {item.source}: {item.error}")
        for line in window_lines(ks, bases, outcome.over_window):
            err(line)
    outcome.skipped = await _walk_skips(ks, roots)
    if not args.json:
        for folder, skipped in outcome.skipped:
            summary = skipped_summary(skipped)
            err(f"skipped in {folder.display_name}: {summary}")
    return outcome


async def _walk_skips(ks: Any, roots: Sequence[KnowledgeItem]) -> list[tuple[KnowledgeItem, dict[str, Any]]]:
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


def _wait_json(outcome: WaitOutcome | None) -> dict[str, Any] | None:
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


def _not_waited_hint(args: argparse.Namespace) -> None:
    if not args.json:
        err("queued; indexing runs the next time ktui opens this data directory "
            "(use --wait, or run `ktui wait`, to index now)")


# --- base ...  ------------------------------------------------------------


async def cmd_base_create(settings: Settings, args: argparse.Namespace) -> int:
    async with service(settings) as ks:
        config = await _base_config(ks, args)
        config.pop("name", None)  # the positional NAME
        base = await ks.create_base(args.name, args.model, args.dimensions, **config)
        notice = ks.model_notice(base.embedding_model_id) if base.embedding_model_id else None
        if args.json:
            dump({**base_json(base, 0), "model_notice": notice})
        else:
            say(f"created {base.emoji} {base.name}  {base.id}  ({base.embedding_model_id}, {base.dimensions} dims)")
        if notice:
            err(f"warning: {notice}")
        _warn_window(ks, base)
    return EXIT_OK


def _warn_window(ks: Any, base: Any) -> None:
    """One stderr line when the base's chunks are longer than its model's input window."""
    if base.embedding_model_id:
        warning = ks.model_profile(base.embedding_model_id).window_warning(base.chunk_size)
        if warning:
            err(f"warning: {warning}")


async def cmd_base_list(settings: Settings, args: argparse.Namespace) -> int:
    async with service(settings, read_only=True) as ks:
        bases = await _all_bases(ks)
        counts = await ks.item_counts()
        if args.json:
            dump({"bases": [base_json(b, counts.get(b.id, 0)) for b in bases]})
        elif not bases:
            err("no knowledge bases yet; create one with `ktui base create NAME`")
        else:
            rows = [[f"{b.emoji} {b.name}", base_status_label(b), b.embedding_model_id or "-",
                     str(counts.get(b.id, 0)), b.id] for b in bases]
            table(rows, ["NAME", "STATUS", "MODEL", "ITEMS", "ID"])
    return EXIT_OK


async def cmd_base_show(settings: Settings, args: argparse.Namespace) -> int:
    async with service(settings, read_only=True) as ks:
        base = await ks.resolve_base(args.base)
        count = (await ks.item_counts()).get(base.id, 0)
        if args.json:
            dump(base_json(base, count))
        else:
            groups = {g.id: g.name for g in await ks.list_groups()}
            for line in base_lines(base, count, groups.get(base.group_id or "")):
                say(line)
            _warn_window(ks, base)
    return EXIT_OK


async def cmd_base_update(settings: Settings, args: argparse.Namespace) -> int:
    if not any(hasattr(args, attr) for attr in SETTING_ATTRS + ("name",)):
        raise UsageError("nothing to change: give at least one option (see `ktui base update --help`)")
    async with service(settings) as ks:
        base = await ks.resolve_base(args.base)
        patch = await _base_config(ks, args)
        base = await ks.update_base(base.id, patch)
        if args.json:
            dump(base_json(base))
        else:
            say(f"updated {base.emoji} {base.name}  {base.id}")
        _warn_window(ks, base)
    return EXIT_OK


async def cmd_base_delete(settings: Settings, args: argparse.Namespace) -> int:
    async with service(settings) as ks:
        bases = [await ks.resolve_base(ref) for ref in args.base]
        deleted = []
        for base in {b.id: b for b in bases}.values():
            await ks.delete_base(base.id)
            deleted.append(base.id)
            if not args.json:
                say(f"deleted {base.name}  {base.id}")
        if args.json:
            dump({"deleted": deleted})
    return EXIT_OK


async def cmd_base_restore(settings: Settings, args: argparse.Namespace) -> int:
    async with service(settings) as ks:
        source = await ks.resolve_base(args.base)
        model = args.model or settings.default_embedding_model
        dims = args.dimensions if args.dimensions is not None else await ks.detect_dimensions(model)
        sub = ks.subscribe()
        new = await ks.restore_base(source.id, model, dims, args.name)
        roots = await _all_items(ks, new.id, everything=False)
        outcome = await _wait(ks, sub, roots, args) if args.wait else None
        sub.close()
        if args.json:
            dump({"base": base_json(new, len(roots)), "source_id": source.id, "wait": _wait_json(outcome)})
        else:
            say(f"restored {source.name} as {new.emoji} {new.name}  {new.id}  "
                  f"({new.embedding_model_id}, {new.dimensions} dims, {len(roots)} items)")
            say(f"the source base {source.id} is kept; delete it with `ktui base delete {source.id}`")
            if outcome is None and roots:
                _not_waited_hint(args)
    return EXIT_FAILURE if outcome is not None and not outcome.ok else EXIT_OK


async def cmd_base_export(settings: Settings, args: argparse.Namespace) -> int:
    if bool(args.base) == bool(args.all):
        raise UsageError("name the bases to export, or give --all")
    async with service(settings, read_only=True) as ks:
        if args.all:
            ids = [b.id for b in await _all_bases(ks)]
            if not ids:
                raise ValidationError.field("base", "there are no knowledge bases to export")
        else:
            ids = list(dict.fromkeys([(await ks.resolve_base(ref)).id for ref in args.base]))
        document = await ks.export_bases(ids)
    text = json.dumps(document, ensure_ascii=False, indent=2) + "\n"
    if args.output and args.output != "-":
        _write_atomic(Path(args.output).expanduser(), text)
        items = sum(len(b["items"]) for b in document["bases"])
        if args.json:
            dump({"output": str(Path(args.output).expanduser()), "bases": len(document["bases"]), "items": items})
        else:
            say(f"exported {len(document['bases'])} base(s), {items} item(s) to {args.output}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _write_atomic(path: Path, text: str) -> None:
    """Write next to the target and rename, so a failed export never leaves half a file."""
    if path.is_dir():
        raise ValidationError.field("output", f"is a folder, not a file: {path}")
    if not path.parent.is_dir():  # a typo in the path must not create folders silently
        raise ValidationError.field("output", f"folder does not exist: {path.parent}")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # an ordinary file, not mkstemp's private 0600
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


async def cmd_base_import(settings: Settings, args: argparse.Namespace) -> int:
    from ktui.core.service import KnowledgeService

    document = KnowledgeService.read_document(args.file)
    async with service(settings) as ks:
        sub = ks.subscribe()
        report = await ks.import_bases(document, again=args.again)
        outcome = None
        queued = [b for b in report.bases if b.status == "completed" and b.item_ids]
        if args.wait and queued:
            roots = []
            for b in queued:
                roots.extend(await _all_items(ks, b.base_id, everything=False))
            outcome = await _wait(ks, sub, roots, args)
        sub.close()
    if args.json:
        dump({**report.to_dict(), "wait": _wait_json(outcome)})
    else:
        _print_import(report)
        if queued and outcome is None:
            _not_waited_hint(args)
    failed = not report.ok or (outcome is not None and not outcome.ok)
    return EXIT_FAILURE if failed else EXIT_OK


def _print_import(report: Any) -> None:
    kind = "ktui export" if report.format == "ktui-export" else "desktop-client backup"
    say(f"imported from a {kind}: {len(report.bases)} base(s)")
    for b in report.bases:
        skipped = f", {len(b.skipped)} skipped" if b.skipped else ""
        if b.status == "completed":
            say(f"  {b.name}  {b.base_id}: ready ({b.embedding_model_id}), {b.kept} item(s) queued{skipped}")
        elif b.status == "duplicate":
            say(f"  {b.name}: not imported again: {b.reason}")
        elif b.status == "failed":
            say(f"  {b.name}  {b.base_id}: FAILED missing_embedding_model ({b.reason}); "
                  f"{b.kept} item(s) kept as data{skipped}")
            say(f"    restore it: ktui base restore {b.base_id} --model PROVIDER::MODEL")
        else:
            say(f"  {b.name}: NOT imported: {b.reason}")
        for s in b.skipped:
            say(f"    skipped {s.label}: {s.reason}")
        for w in b.warnings:
            say(f"    warning: {w}")
    for s in report.skipped_bases:
        say(f"  skipped base {s.label}: {s.reason}")


# --- items ----------------------------------------------------------------


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
            raise ValidationError.field("path", f"does not exist: {source} (neither a file, a directory nor an http(s) URL)")
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
    outcome = await _wait(ks, sub, items, args) if args.wait else None
    sub.close()
    if args.json:
        dump({"base_id": base.id, "items": [item_json(i) for i in items], "wait": _wait_json(outcome)})
    elif outcome is None:
        _not_waited_hint(args)
    return EXIT_FAILURE if outcome is not None and not outcome.ok else EXIT_OK


async def cmd_add(settings: Settings, args: argparse.Namespace) -> int:
    inputs = _inputs(args)
    async with service(settings) as ks:
        base = await ks.resolve_base(args.base)
        sub = ks.subscribe()
        created: list[KnowledgeItem] = []
        for start in range(0, len(inputs), BATCH):
            created.extend(await ks.add_items(base.id, inputs[start : start + BATCH]))
        return await _report_queued(ks, sub, base, created, args, "added")


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
        items = await _all_items(ks, base.id, everything=args.all, type=args.type)
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
    async with service(settings) as ks:
        base = await ks.resolve_base(args.base)
        if args.all and args.items:
            raise UsageError("give ITEMs or --all, not both")
        if not args.all and not args.items:
            raise UsageError("name the items to reindex, or give --all")
        if args.all:
            items = await _all_items(ks, base.id, everything=False)
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


async def cmd_models(settings: Settings, args: argparse.Namespace) -> int:
    async with service(settings, read_only=True) as ks:
        listing = await ks.list_embedding_models()
    if args.json:
        dump({"default": settings.default_embedding_model, "models": [model_json(m) for m in listing.models],
              "errors": listing.errors})
        return EXIT_OK
    rows = [[m.id + (" (default)" if m.id == settings.default_embedding_model else ""),
             "-" if m.dimensions is None else str(m.dimensions), m.note or ""] for m in listing.models]
    table(rows, ["MODEL", "DIMENSIONS", "NOTE"])
    for provider, message in listing.errors.items():
        err(f"provider {provider}: {_first_line(message)}")
    return EXIT_OK


def _first_line(text: str) -> str:
    return " ".join(text.split())


async def cmd_doctor(settings: Settings, args: argparse.Namespace) -> int:
    async with service(settings) as ks:
        report = await ks.doctor(repair=args.repair)
        after = None  # with --repair --wait: a second check once the rebuilds are done
        if args.repair and args.wait and report.findings:
            await ks.wait_idle(timeout=None)
            after = await ks.doctor(repair=False)
    if args.json:
        dump({
            "repair": args.repair,
            "healthy": report.healthy,
            "checked": report.checked,
            "findings": [{"subject": f.subject, "problem": f.problem, "action": f.action, "repaired": f.repaired}
                         for f in report.findings],
            "after_repair": None if after is None else {"healthy": after.healthy,
                                                         "problems": [f.problem for f in after.findings]},
        })
    else:
        say(f"checked {len(report.checked)} file(s)")
        for f in report.findings:
            say(f"{'repaired' if f.repaired else 'problem'}  {f.subject}: {f.problem}")
            if f.action:
                say(f"    {f.action}")
        if report.healthy:
            say("no problems found")
        else:
            fixed = sum(1 for f in report.findings if f.repaired)
            say(f"{len(report.findings)} problem(s), {fixed} repaired"
                + ("" if args.repair else "; run `ktui doctor --repair` to fix them"))
        if after is not None:
            say("after the repairs: " + ("no problems found" if after.healthy else
                                         f"{len(after.findings)} problem(s) left"))
            for f in after.findings:
                say(f"problem  {f.subject}: {f.problem}")
    if after is not None:
        return EXIT_OK if after.healthy else EXIT_FAILURE
    return EXIT_OK if not report.unresolved else EXIT_FAILURE


async def cmd_wait(settings: Settings, args: argparse.Namespace) -> int:
    async with service(settings, recover=True) as ks:
        sub = ks.subscribe()
        await ks.wait_recovered()  # what recovery re-queues (failed by a shutdown or a full disk) is waited for too
        bases = [await ks.resolve_base(args.base)] if args.base else await _all_bases(ks)
        roots: list[KnowledgeItem] = []
        for base in bases:
            if base.is_usable:
                roots.extend(i for i in await _all_items(ks, base.id, everything=False)
                             if i.status == ItemStatus.PROCESSING)
        outcome = await _wait(ks, sub, roots, args) if roots else WaitOutcome()
        sub.close()
    if args.json:
        dump({"wait": _wait_json(outcome)})
    elif not roots:
        err("nothing to do")
    return EXIT_OK if outcome.ok else EXIT_FAILURE


async def cmd_watch(settings: Settings, args: argparse.Namespace) -> int:
    from ktui.tui.cli_watch import cmd_watch as watch

    return await watch(settings, args)


# --- rank (the Knowledge Engine) ------------------------------------------


def _read_records(path: str | None) -> list[dict[str, Any]]:
    label = path or "stdin"
    try:
        stream = open(path, encoding="utf-8") if path and path != "-" else sys.stdin  # noqa: SIM115
    except OSError as exc:
        raise ValidationError.field("input", f"cannot be read: {label}: {exc.strerror}") from None
    records: list[dict[str, Any]] = []
    with stream if stream is not sys.stdin else nullcontext(stream):
        try:
            lines = list(stream)
        except UnicodeDecodeError:
            raise ValidationError.field("input", f"{label} is not UTF-8 text (JSON lines expected)") from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValidationError.field("input", f"{label} line {number} is not JSON: {exc.msg}") from None
            if not isinstance(record, dict):
                raise ValidationError.field("input", f"{label} line {number} is not a JSON object")
            records.append(record)
    return records


async def cmd_rank(settings: Settings, args: argparse.Namespace) -> int:
    """JSON lines in, JSON lines out: `{"rank", "score", "degraded", "record"}` per match."""
    from ktui.core.engine import rank_docs_by_embedding, settings_embedder

    if not args.query.strip():
        raise ValidationError.field("query", "must not be empty")
    if args.top_k is not None and args.top_k < 1:
        raise ValidationError.field("top_k", "must be at least 1")
    if args.min_score is not None and not math.isfinite(args.min_score):
        raise ValidationError.field("min_score", "must be a finite number")
    records = _read_records(args.input)
    for number, record in enumerate(records, 1):
        if not isinstance(record.get(args.field), str):
            raise ValidationError.field("field", f"record {number} has no text field '{args.field}'")
    model = args.model or settings.default_embedding_model
    Path(settings.data_dir).mkdir(parents=True, exist_ok=True)  # the embedding cache lives there
    async with settings_embedder(settings, model) as embedder:
        field = args.field
        result = await rank_docs_by_embedding(
            args.query,
            records,
            content=lambda r: r[field],
            embedder=embedder,
            min_score=args.min_score,
            top_k=args.top_k,
        )
    if result.degraded:
        err(f"warning: ranked by keyword overlap instead of embeddings: {result.reason}")
    for match in result.matches:
        dump_line({"rank": match.rank, "score": round(match.score, 6), "degraded": result.degraded,
                   "record": match.candidate})
    return EXIT_OK


# --- groups ---------------------------------------------------------------


async def cmd_groups_list(settings: Settings, args: argparse.Namespace) -> int:
    async with service(settings, read_only=True) as ks:
        groups = await ks.list_groups()
    if args.json:
        dump({"groups": [group_json(g) for g in groups]})
    elif not groups:
        err("no groups")
    else:
        table([[g.name, g.id] for g in groups], ["NAME", "ID"])
    return EXIT_OK


async def cmd_groups_create(settings: Settings, args: argparse.Namespace) -> int:
    async with service(settings) as ks:
        group = await ks.create_group(args.name)
    dump(group_json(group)) if args.json else say(f"created group {group.name}  {group.id}")
    return EXIT_OK


async def cmd_groups_rename(settings: Settings, args: argparse.Namespace) -> int:
    async with service(settings) as ks:
        group = await ks.rename_group((await ks.resolve_group(args.group)).id, args.name)
    dump(group_json(group)) if args.json else say(f"renamed group to {group.name}  {group.id}")
    return EXIT_OK


async def cmd_groups_delete(settings: Settings, args: argparse.Namespace) -> int:
    async with service(settings) as ks:
        group_id = (await ks.resolve_group(args.group)).id
        await ks.delete_group(group_id)
    dump({"deleted": group_id}) if args.json else say(f"deleted group {group_id}")
    return EXIT_OK
