"""`ktui base ...` and `ktui groups ...`: create, list, show, update, delete, restore,
export and import bases; list, create, rename and delete groups."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

from ktui.core import Settings
from ktui.core.errors import ValidationError
from ktui.tui.cli_render import (
    UsageError,
    base_json,
    base_lines,
    base_status_label,
    dump,
    group_json,
    table,
)
from ktui.tui.cli_shared import (
    EXIT_FAILURE,
    EXIT_OK,
    SETTING_ATTRS,
    all_bases,
    all_items,
    base_config,
    err,
    not_waited_hint,
    service,
    wait_for,
    wait_json,
)
from ktui.tui.cli_text import say

# --- base ...  ------------------------------------------------------------


async def cmd_base_create(settings: Settings, args: argparse.Namespace) -> int:
    async with service(settings) as ks:
        config = await base_config(ks, args)
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
        bases = await all_bases(ks)
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
        patch = await base_config(ks, args)
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
    async with service(settings, wait=args.wait) as ks:
        source = await ks.resolve_base(args.base)
        model = args.model or settings.default_embedding_model
        dims = args.dimensions if args.dimensions is not None else await ks.detect_dimensions(model)
        sub = ks.subscribe()
        new = await ks.restore_base(source.id, model, dims, args.name)
        roots = await all_items(ks, new.id, everything=False)
        outcome = await wait_for(ks, sub, roots, args) if args.wait else None
        sub.close()
        if args.json:
            dump({"base": base_json(new, len(roots)), "source_id": source.id, "wait": wait_json(outcome)})
        else:
            say(f"restored {source.name} as {new.emoji} {new.name}  {new.id}  "
                  f"({new.embedding_model_id}, {new.dimensions} dims, {len(roots)} items)")
            say(f"the source base {source.id} is kept; delete it with `ktui base delete {source.id}`")
            if outcome is None and roots:
                not_waited_hint(ks, args)
    return EXIT_FAILURE if outcome is not None and not outcome.ok else EXIT_OK


async def cmd_base_export(settings: Settings, args: argparse.Namespace) -> int:
    if bool(args.base) == bool(args.all):
        raise UsageError("name the bases to export, or give --all")
    async with service(settings, read_only=True) as ks:
        if args.all:
            ids = [b.id for b in await all_bases(ks)]
            if not ids:
                raise ValidationError.field("base", "there are no knowledge bases to export")
        else:
            ids = list(dict.fromkeys([(await ks.resolve_base(ref)).id for ref in args.base]))
        document = await ks.export_bases(ids, vectors=args.vectors)
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
    async with service(settings, wait=args.wait) as ks:
        sub = ks.subscribe()
        report = await ks.import_bases(document, again=args.again)
        outcome = None
        queued = [b for b in report.bases if b.status == "completed" and b.item_ids and not b.vectors]
        if args.wait and queued:
            roots = []
            for b in queued:
                roots.extend(await all_items(ks, b.base_id, everything=False))
            outcome = await wait_for(ks, sub, roots, args)
        sub.close()
    if args.json:
        dump({**report.to_dict(), "wait": wait_json(outcome)})
    else:
        _print_import(report, args.file)
        if queued and outcome is None:
            not_waited_hint(ks, args)
    failed = not report.ok or (outcome is not None and not outcome.ok)
    return EXIT_FAILURE if failed else EXIT_OK


def _print_import(report: Any, file: str) -> None:
    kind = "ktui export" if report.format == "ktui-export" else "desktop-client backup"
    made = sum(1 for b in report.bases if b.status in ("completed", "failed"))  # failed: kept as data
    say(f"read a {kind}: {len(report.bases)} base(s), {made} imported")
    for b in report.bases:
        skipped = f", {len(b.skipped)} skipped" if b.skipped else ""
        if b.status == "completed" and b.vectors:
            say(f"  {b.name}  {b.base_id}: ready ({b.embedding_model_id}), {b.kept} item(s) restored with "
                f"{b.vectors} chunk(s) and their vectors, nothing to index{skipped}")
        elif b.status == "completed":
            say(f"  {b.name}  {b.base_id}: ready ({b.embedding_model_id}), {b.kept} item(s) queued{skipped}")
        elif b.status == "duplicate":
            say(f"  {b.name}: not imported again: {b.reason}")
            say(f"    a second copy: ktui base import {shlex.quote(file)} --again")
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
