"""A provider that takes longer the more texts a request carries (one upstream call per
text, like ollama-proxy-plus): ktui must slow down and split, not re-send the batch
that timed out until the items fail (issue 16: six files failed that way).

Real HTTP on 127.0.0.1 (tests/support/embedding_server.py, `delay_per_text`). The
server's delays are chosen with a margin of a second or more on each side of the
client timeout, so the outcome does not depend on how busy the machine is.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ktui.core.config import EmbeddingSettings
from ktui.core.models import ANY_GROUP, ItemInput, ItemStatus
from tests.support.embedding_server import start_embedding_server
from tests.support.services import open_service

pytestmark = [pytest.mark.faults, pytest.mark.slow]

DIMS = 32
PER_TEXT = 0.5  # seconds the server spends per text
TIMEOUT = 3.0  # the client's: 8 texts (4 s) time out, 4 texts (2 s) do not


def note(n: int) -> ItemInput:
    paragraphs = "\n\n".join(f"Paragraph {p} of note {n}: kites{n}x{p} need steady wind and a long string."
                             for p in range(8))
    return ItemInput("note", {"content": f"# Note {n}\n\n{paragraphs}"})


async def test_a_provider_that_is_slow_per_text_gets_smaller_requests_and_every_item_completes(tmp_path: Path) -> None:
    server = start_embedding_server(DIMS)
    try:
        async with open_service(tmp_path / "data", server.url, max_retries=3, timeout=TIMEOUT,
                                embeddings=EmbeddingSettings(batch_size=8)) as ks:
            base = await ks.create_base("Slow", dimensions=DIMS, chunk_size=24, chunk_overlap=0)
            server.faults.delay_per_text(PER_TEXT)
            added = await ks.add_items(base.id, [note(n) for n in range(2)])
            assert await ks.wait_idle(base.id, timeout=240), "the queue did not drain"
            items = (await ks.list_items(base.id, group_id=ANY_GROUP, limit=10)).items
            assert [i.status for i in items] == [ItemStatus.COMPLETED] * len(added), [(i.status, i.error) for i in items]
            for item in added:
                assert len(await ks.list_item_chunks(base.id, item.id)) >= 8
            slow = ks.queue_stats().slow
            assert slow and "provider 'fake' is slow" in slow[0] and "text(s) per request" in slow[0], slow
            assert await ks.check_invariants() == []
    finally:
        server.faults.clear()
        server.stop()
