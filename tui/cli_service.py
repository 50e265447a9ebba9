"""`ktui models`, `doctor`, `migrate`, `wait` and `watch`: the providers' models, a health
check of the data directory, moving it to another backend, and waiting for or following
the queue."""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from ktui.core import Settings
from ktui.core.models import ItemStatus, KnowledgeItem
from ktui.tui.cli_render import (
    UsageError,
    dump,
    model_json,
    table,
)
from ktui.tui.cli_shared import (
    EXIT_FAILURE,
    EXIT_OK,
    all_bases,
    all_items,
    err,
    service,
    wait_for,
    wait_json,
)
from ktui.tui.cli_text import say


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
        waiting = args.repair and args.wait
        sub = ks.subscribe() if waiting else None  # before the repair queues anything: no event missed
        report = await ks.doctor(repair=args.repair)
        after = None  # with --repair --wait: a second check once the rebuilds are done
        if waiting and report.findings:
            # the progress line of `ktui wait` over what the repair queued (it sat silent for
            # as long as 15,000 re-queued items took), then the queue's last stragglers
            roots = await processing_roots(ks, await all_bases(ks))
            if roots:
                await wait_for(ks, sub, roots, args)
            await ks.wait_idle(timeout=None)
            after = await ks.doctor(repair=False)
        if sub is not None:
            sub.close()
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
        for line in finding_lines(report.findings):
            say(line)
        if report.healthy:
            say("no problems found")
        else:
            fixed = sum(1 for f in report.findings if f.repaired)
            say(f"{len(report.findings):,} problem(s), {fixed:,} repaired"
                + ("" if args.repair else "; run `ktui doctor --repair` to fix them"))
        if after is not None:
            say("after the repairs: " + ("no problems found" if after.healthy else
                                         f"{len(after.findings):,} problem(s) left"))
            for line in finding_lines(after.findings, actions=False):
                say(line)
    if after is not None:
        return EXIT_OK if after.healthy else EXIT_FAILURE
    return EXIT_OK if not report.unresolved else EXIT_FAILURE


SHOWN_ALIKE = 3  # findings of one kind shown one by one before the rest are counted


def finding_lines(findings: Sequence[Any], *, actions: bool = True) -> Iterator[str]:
    """The text report's lines: each finding (and what repair does about it), except that
    of many alike (the same problem and action: the thousands of items a crash left
    `processing`) only the first SHOWN_ALIKE are named and the rest counted in one line,
    so the report stays readable; `--json` lists every one."""
    seen: Counter[tuple[bool, str, str | None]] = Counter()
    for f in findings:
        kind = (f.repaired, f.problem, f.action)
        seen[kind] += 1
        if seen[kind] > SHOWN_ALIKE:
            continue
        yield f"{'repaired' if f.repaired else 'problem'}  {f.subject}: {f.problem}"
        if actions and f.action:
            yield f"    {f.action}"
    for (repaired, problem, _), count in seen.items():
        if count > SHOWN_ALIKE:
            yield (f"{'repaired' if repaired else 'problem'}  … and {count - SHOWN_ALIKE:,} more like the above "
                   f"({problem}; `ktui doctor --json` lists every one)")


async def cmd_migrate(settings: Settings, args: argparse.Namespace) -> int:
    from ktui.core.service import KnowledgeService
    from ktui.tui.cli import startup_over

    startup_over()  # a long copy: with the collector on (cli.main)

    if args.batch < 1:
        raise UsageError("--batch must be at least 1")
    def progress(name: str, done: int, total: int) -> None:
        if done == 0:  # one line per base on stderr (stdout is the report)
            err(f"copying {name}: {total} chunk(s)")

    report = await KnowledgeService.migrate(settings, args.to, schema=args.schema, merge=args.merge,
                                            batch=args.batch, progress=progress)
    if args.json:
        dump(report.to_dict())
        return EXIT_OK if report.ok else EXIT_FAILURE
    say(f"from {report.source}")
    say(f"to   {report.target}")
    for b in report.bases:
        counts = f"{b.target_items} item(s), {b.target_chunks} chunk(s), {b.target_vectors} vector(s)"
        if b.status == "moved" and b.verified:
            say(f"  {b.name}  {b.id}: copied, {counts}: counts verified")
        elif b.status == "kept" and b.verified:
            say(f"  {b.name}  {b.id}: already in the target, {counts}: counts verified")
        else:
            say(f"  {b.name}  {b.id}: NOT verified: {b.reason or 'counts differ'}: source "
                f"{b.items}/{b.chunks}/{b.vectors}, target {b.target_items}/{b.target_chunks}/{b.target_vectors} "
                "(items/chunks/vectors)")
    for base_id in report.cleaned:
        say(f"  dropped the unfinished copy of base {base_id} left by an interrupted migrate")
    rate = f" ({report.chunks / report.seconds:,.0f} chunks/s)" if report.chunks and report.seconds > 0 else ""
    moved = sum(1 for b in report.bases if b.status == "moved")
    say(f"copied {moved} base(s), {report.groups} group(s), {report.chunks} chunk(s) in {report.seconds:.1f} s{rate}; "
        + ("every base's items, chunks and vectors verified" if report.ok else "SOME COUNTS DIFFER (see above)"))
    return EXIT_OK if report.ok else EXIT_FAILURE


async def cmd_wait(settings: Settings, args: argparse.Namespace) -> int:
    async with service(settings, recover=True) as ks:
        sub = ks.subscribe()
        await ks.wait_recovered()  # what recovery re-queues (failed by a shutdown or a full disk) is waited for too
        bases = [await ks.resolve_base(args.base)] if args.base else await all_bases(ks)
        roots = await processing_roots(ks, bases)
        from ktui.tui.cli_progress import WaitOutcome

        outcome = await wait_for(ks, sub, roots, args) if roots else WaitOutcome()
        sub.close()
    if args.json:
        dump({"wait": wait_json(outcome)})
    elif not roots:
        err("nothing to do")
    return EXIT_OK if outcome.ok else EXIT_FAILURE


async def processing_roots(ks: Any, bases: Sequence[Any]) -> list[KnowledgeItem]:
    """The roots still `processing` in the usable ones of `bases`: what a wait follows
    (everything below them comes with them)."""
    roots: list[KnowledgeItem] = []
    for base in bases:
        if base.is_usable:
            roots.extend(i for i in await all_items(ks, base.id, everything=False) if i.status == ItemStatus.PROCESSING)
    return roots


async def cmd_watch(settings: Settings, args: argparse.Namespace) -> int:
    from ktui.tui.cli_watch import cmd_watch as watch

    return await watch(settings, args)
