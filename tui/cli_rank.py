"""`ktui rank`: the Knowledge Engine over records read from a file or stdin."""

from __future__ import annotations

import argparse
import json
import math
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from ktui.core import Settings
from ktui.core.errors import ValidationError
from ktui.tui.cli_render import (
    dump_line,
)
from ktui.tui.cli_shared import (
    EXIT_OK,
    err,
)

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
    from ktui.tui.cli import startup_over

    startup_over()  # the records are read and ranked with the collector on
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
