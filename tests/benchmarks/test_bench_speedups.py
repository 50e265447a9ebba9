"""Do the indexing speed-ups pay on the default path? Each one ON vs OFF, same run.

Issue 14: the read-ahead (64 files), the group commit of phase writes and the
embedding linger / learned burst were tuned against a zero-latency embedding server.
This indexes one folder with the built-in model (builtin::wordllama, the default)
and the default settings, once with everything on and once with each speed-up off,
interleaved and repeated. The measurement decided: the linger / burst was removed,
read-ahead and the phase group commit went behind `ingest.pipelining` (off by
default); this benchmark now compares pipelining on, each half of it off, and the
default (both off). Figures: docs/benchmarks.md.

Method: REPEATS rounds, the order alternating between rounds so drift in the
machine's load falls on both sides. It prints each configuration's
median chunks/s with its spread (min..max) and the ON/OFF ratio of the medians; a
speed-up pays when its ratio is above 1 by more than the spread.

Because the machine's load drifts between runs, each round also gives a paired
ratio (the ON run over the OFF run next to it); the median of those and their
spread are printed too. KTUI_BENCH_PROVIDER=server runs the same through the
zero-latency OpenAI-compatible test server (a subprocess on 127.0.0.1) instead.

KTUI_BENCH_PROVIDER=infinity runs it through a real server (infinity-emb with
all-MiniLM-L6-v2, /work/shared/realpeers: KTUI_BENCH_INFINITY_URL, default
http://127.0.0.1:7997, model all-minilm) with the provider's default settings.

KTUI_BENCH_SMALL=1 makes every file one small note (one chunk, like the folders of
issue 17) instead of a few sections; KTUI_BENCH_CONFIGS=pair compares only
pipelining on with the default. Each configuration prints its embedding requests
and texts per request (counted at the coalescer, whatever the provider).

Run: .venv/bin/python -m pytest tests/benchmarks/test_bench_speedups.py -m benchmark -s -p no:randomly
(KTUI_BENCH_REPEATS / KTUI_BENCH_FILES change the rounds / corpus size.)
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from ktui.core.config import ProviderConfig, Settings
from ktui.core.embeddings.builtin import load_model
from ktui.core.embeddings.coalesce import Coalescer
from ktui.core.models import ItemInput
from ktui.core.service import KnowledgeService
from tests.support.embedding_server import start_embedding_server
from tests.support.services import fake_settings

pytestmark = pytest.mark.benchmark

FILES = int(os.environ.get("KTUI_BENCH_FILES", "400"))
REPEATS = int(os.environ.get("KTUI_BENCH_REPEATS", "3"))
PROVIDER = os.environ.get("KTUI_BENCH_PROVIDER", "builtin")
SMALL = os.environ.get("KTUI_BENCH_SMALL", "") == "1"
INFINITY_URL = os.environ.get("KTUI_BENCH_INFINITY_URL", "http://127.0.0.1:7997")
WORDS = ("knowledge base search vector chunk embedding terminal keyboard folder sitemap note "
         "python sqlite index query ranking hybrid fusion model server local offline fast").split()


def make_corpus(root: Path, n: int) -> None:
    rng = random.Random(11)
    if SMALL:
        for i in range(n):
            path = root / f"d{i // 1000:03d}" / f"n{i:06d}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"# Note {i}\n\n" + " ".join(rng.choice(WORDS) for _ in range(60)) + ".\n")
        return
    for i in range(n):
        sections = "".join(
            f"\n## Section {s}\n\n" + " ".join(rng.choice(WORDS) for _ in range(rng.randint(60, 160))) + ".\n"
            for s in range(rng.randint(2, 6))
        )
        path = root / f"d{i // 50:02d}" / f"doc{i:04d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Document {i}\n{sections}")


Toggle = Callable[[KnowledgeService], None]


def _default(ks: KnowledgeService) -> None:
    _no_read_ahead(ks)
    _no_phase_group_commit(ks)


def _no_read_ahead(ks: KnowledgeService) -> None:
    ks._runtime.read_ahead.depth = 0  # noqa: SLF001 - the knob under measurement


def _no_phase_group_commit(ks: KnowledgeService) -> None:
    ks._runtime.indexer.group_phase_writes = False  # noqa: SLF001


CONFIGS: dict[str, Toggle | None] = {
    "all on (pipelining)": None,
    "read-ahead off": _no_read_ahead,
    "phase group commit off": _no_phase_group_commit,
    "both off (the default)": _default,
}
ON = "all on (pipelining)"
if os.environ.get("KTUI_BENCH_CONFIGS") == "pair":
    CONFIGS = {ON: None, "both off (the default)": _default}

REQUESTS: dict[str, list[int]] = {}  # configuration -> [requests, texts], counted at the coalescer


def _count_requests(config: str) -> None:
    counts = REQUESTS.setdefault(config, [0, 0])
    original = Coalescer._run

    async def counted(self: Coalescer, group: list) -> None:  # type: ignore[type-arg]
        counts[0] += 1
        counts[1] += sum(len(w.texts) for w in group)
        await original(self, group)

    Coalescer._run = counted  # type: ignore[method-assign]
    _restore.append(lambda: setattr(Coalescer, "_run", original))


_restore: list[Callable[[], None]] = []


def _settings(data_dir: Path, server_url: str | None) -> Settings:
    if PROVIDER == "infinity":
        provider = ProviderConfig(name="infinity", kind="openai", base_url=INFINITY_URL + "/v1")
        settings = Settings(data_dir=data_dir, auto_ollama=False, providers={"infinity": provider},
                            default_embedding_model="infinity::all-minilm")
    elif server_url is None:
        settings = Settings(data_dir=data_dir, auto_ollama=False)
    else:
        settings = fake_settings(data_dir, server_url)
    return settings.with_(ingest=replace(settings.ingest, pipelining=True))


async def _index_once(data_dir: Path, corpus: Path, toggle: Toggle | None,
                      server_url: str | None, config: str = "") -> tuple[float, int]:
    ks = await KnowledgeService.open(settings=_settings(data_dir, server_url))
    _count_requests(config)
    try:
        if toggle is not None:
            toggle(ks)
        base = await ks.create_base("Bench")
        t0 = time.perf_counter()
        await ks.add_items(base.id, [ItemInput("directory", {"path": str(corpus)})])
        assert await ks.wait_idle(timeout=900)
        elapsed = time.perf_counter() - t0
        root = (await ks.list_items(base.id)).items[0]
        chunks = len(await ks.list_item_chunks(base.id, root.id))
        assert await ks.check_invariants() == []
    finally:
        while _restore:
            _restore.pop()()
        await ks.close()
    return elapsed, chunks


@pytest.mark.timeout(4 * 3600)
async def test_each_speed_up_on_vs_off_with_the_builtin_model(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    make_corpus(corpus, FILES)
    server = start_embedding_server(384, subprocess=True) if PROVIDER == "server" else None
    if PROVIDER == "builtin":
        load_model()  # loaded once per process: no configuration pays for it
    rates: dict[str, list[float]] = {name: [] for name in CONFIGS}
    paired: dict[str, list[float]] = {name: [] for name in CONFIGS}
    chunks = 0
    runs = 0
    try:
        for round_ in range(REPEATS):
            # ON next to each OFF, the order alternating: ON, A, ON, B, ON, C | C, ON, B, ON, ...
            for name in (list(CONFIGS)[1:] if round_ % 2 == 0 else list(reversed(list(CONFIGS)[1:]))):
                pair = [ON, name] if round_ % 2 == 0 else [name, ON]
                got: dict[str, float] = {}
                for config in pair:
                    runs += 1
                    elapsed, chunks = await _index_once(tmp_path / f"data{runs}", corpus, CONFIGS[config],
                                                        server.url if server else None, config)
                    got[config] = chunks / elapsed
                    rates[config].append(got[config])
                paired[name].append(got[ON] / got[name])
    finally:
        if server is not None:
            server.stop()
    print()
    model = ("builtin::wordllama" if PROVIDER == "builtin" else "the zero-latency test server (fake::deterministic)"
             if PROVIDER == "server" else f"infinity-emb all-MiniLM-L6-v2 at {INFINITY_URL}")
    print(f"{model}, {FILES} Markdown files, {chunks} chunks, default settings, "
          f"{REPEATS} rounds (order alternating)")
    on = statistics.median(rates[ON])
    for name, values in rates.items():
        median = statistics.median(values)
        spread = f"{min(values):7.1f}..{max(values):7.1f}"
        ratio = "" if name == ON else f"   ON/OFF of medians {on / median:5.2f}x"
        requests, texts = REQUESTS.get(name, [0, 0])
        per = f"   {requests / len(values):.0f} requests/run, {texts / max(requests, 1):.1f} texts/request"
        print(f"  {name:28s} median {median:7.1f} chunks/s  spread {spread}{ratio}{per}")
        if paired[name]:
            pairs = paired[name]
            print(f"  {'':28s} paired ON/OFF median {statistics.median(pairs):.2f}x "
                  f"(spread {min(pairs):.2f}..{max(pairs):.2f}; pays when the whole spread is above 1)")
