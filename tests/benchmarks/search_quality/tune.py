"""Compare fusion variants on the dev half (never the held-out half).

Run: .venv/bin/python -m tests.benchmarks.search_quality.tune [openai-url model]
Prints doc-level MRR@10 / recall@10 on the dev queries for each side alone and for
RRF / min-max fusion at several alphas and candidate pools.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

from ktui.core.config import ProviderConfig
from ktui.core.embeddings import EmbeddingService
from ktui.core.search.fusion import FusionMethod, fuse

from .corpus import cache_dir, english_set, multilingual_set
from .harness import IndexedSet, base_for_model, bench_settings, documents_in_order, embed_documents, item_id, metrics


async def main() -> None:
    if len(sys.argv) == 3:
        provider = ProviderConfig(name="bench", kind="openai", base_url=sys.argv[1], models=(sys.argv[2],),
                                  batch_size=32, timeout=300)
        settings = bench_settings(cache_dir() / "data-openai", providers={"bench": provider})
        model_id = f"bench::{sys.argv[2]}"
    else:
        settings, model_id = bench_settings(cache_dir() / "data-builtin"), "builtin::wordllama"
    async with EmbeddingService(settings) as embeddings:
        sets = [english_set(), multilingual_set()]
        if os.environ.get("TUNE_SETS") == "english":
            sets = sets[:1]
        for dataset in sets:
            base = await base_for_model(embeddings, model_id)
            with tempfile.TemporaryDirectory() as tmp:
                indexed = await IndexedSet.build(dataset, base, embeddings, Path(tmp), embed_documents)
                queries = dataset.dev
                answers = [item_id(p) for p in queries]
                qvecs = [await indexed.query_vector(p.query) for p in queries]
                sides = [(indexed.store.search_vector(v, 300), indexed.store.search_bm25(p.query, 300))
                         for p, v in zip(queries, qvecs, strict=True)]
                owner = {}
                for v, k in sides:
                    for cid, _ in v + k:
                        owner[cid] = None
                items = {r.id: r.item_id for r in indexed.store.fetch(list(owner))}

                def score(rankings, items=items, answers=answers):
                    return metrics([documents_in_order([items[c] for c, _ in r]) for r in rankings], answers)

                print(f"\n{dataset.name} dev ({len(queries)}), {model_id}")
                print("  vector", score([v[:50] for v, _ in sides]), " bm25", score([k[:50] for _, k in sides]))
                for method in FusionMethod:
                    for pool in (200,):
                        row = []
                        for alpha in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
                            fused = [fuse(v[:pool], k[:pool], method=method, alpha=alpha, limit=50) for v, k in sides]
                            row.append(f"a{alpha}: {score(fused)}")
                        print(f"  {method.value:<6} pool {pool:<3} " + "  ".join(row), flush=True)
                indexed.close()


if __name__ == "__main__":
    asyncio.run(main())
