"""`ktui --demo`: the demo corpus and the base that indexes it live.

The corpus (the handbook of a fictional kite workshop) ships inside the
`ktui.tui` package as package data (`tui/demo/`), so the demo works from a
checkout, an editable install and an installed wheel alike.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from ktui.core.errors import KnowledgeError
from ktui.core.models import ItemInput, KnowledgeBase
from ktui.core.service import KnowledgeService

DEMO_BASE_NAME = "ktui demo"
DEMO_GROUP = "Demo"
DEMO_MODEL = "builtin::wordllama"


def demo_corpus_dir() -> Path:
    return Path(__file__).resolve().parent / "demo"


async def ensure_demo(ks: KnowledgeService, data_dir: Path) -> KnowledgeBase:
    """Reuse the demo base, or create it and index a copy of the demo corpus live."""
    page = await ks.list_bases(page=1, limit=100)
    for base in page.items:
        if base.name == DEMO_BASE_NAME and base.is_usable:
            return base
    source = demo_corpus_dir()
    if not source.is_dir():
        raise KnowledgeError(f"The demo corpus is missing: {source}")
    target = Path(data_dir) / "demo-corpus"
    await asyncio.to_thread(shutil.copytree, source, target, dirs_exist_ok=True)
    group_id = next((g.id for g in await ks.list_groups() if g.name == DEMO_GROUP), None)
    if group_id is None:
        group_id = (await ks.create_group(DEMO_GROUP)).id
    base = await ks.create_base(DEMO_BASE_NAME, DEMO_MODEL, None, emoji="🎓", group_id=group_id,
                                chunk_size=256, chunk_overlap=32)
    await ks.add_items(base.id, [ItemInput("directory", {"path": str(target)})])
    return base
