"""Compare fusion variants on the dev half (never the held-out half).

Run: .venv/bin/python -m tests.benchmarks.search_quality.tune [openai-url model]
Prints doc-level MRR@10 / recall@10 on the dev queries for each side alone and for
each fusion method at several alphas (the candidate pool of core.search.fusion), and
the alpha that is best on dev. With TUNE_HELD_OUT=1 it then prints the held-out
figures at the profile's alpha and at the dev-chosen one (acceptance, not tuning).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

from ktui.core.config import ProviderConfig
from ktui.core.embeddings import EmbeddingService
from ktui.core.search.fusion import CANDIDATE_POOL, DEFAULT_FUSION, FusionMethod, fuse

from .corpus import cache_dir, english_set, multilingual_set
from .harness import IndexedSet, base_for_model, bench_settings, documents_in_order, embed_documents, item_id, metrics

ALPHAS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


async def sides_of(indexed: IndexedSet, queries):
    """Each query's vector and bm25 candidates (the pool run_search uses), and a scorer."""
    qvecs = [await indexed.query_vector(p.query) for p in queries]
    sides = [(indexed.store.search_vector(v, CANDIDATE_POOL), indexed.store.search_bm25(p.query, CANDIDATE_POOL))
             for p, v in zip(queries, qvecs, strict=True)]
    owner = {cid: None for v, k in sides for cid, _ in v + k}
    items = {r.id: r.item_id for r in indexed.store.fetch(list(owner))}
    answers = [item_id(p) for p in queries]

    def score(rankings):
        return metrics([documents_in_order([items[c] for c, _ in r]) for r in rankings], answers)

    return sides, score


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

                sides, score = await sides_of(indexed, dataset.dev)
                print(f"\n{dataset.name} dev ({len(dataset.dev)}), {model_id}, chunks {base.chunk_size}/{base.chunk_overlap}")
                print("  vector", score([v[:50] for v, _ in sides]), " bm25", score([k[:50] for _, k in sides]))
                best: dict[float, float] = {}
                for method in FusionMethod:
                    row = []
                    for alpha in ALPHAS:
                        fused = [fuse(v, k, method=method, alpha=alpha, limit=50) for v, k in sides]
                        figure = score(fused)
                        if method == DEFAULT_FUSION:
                            best[alpha] = figure.mrr
                        row.append(f"a{alpha}: {figure}")
                    print(f"  {method.value:<6} pool {CANDIDATE_POOL} " + "  ".join(row), flush=True)
                chosen = max(best, key=lambda a: (best[a], -abs(a - 0.5)))
                print(f"  best alpha on dev ({DEFAULT_FUSION.value}): {chosen}; the profile's: {base.hybrid_alpha}")
                if os.environ.get("TUNE_HELD_OUT"):  # acceptance figures for the profile's and the dev-chosen alpha
                    sides, score = await sides_of(indexed, dataset.held_out)
                    print(f"  held-out ({len(dataset.held_out)}): vector {score([v[:50] for v, _ in sides])}"
                          f"  bm25 {score([k[:50] for _, k in sides])}")
                    for alpha in dict.fromkeys(a for a in (base.hybrid_alpha, chosen) if a is not None):
                        fused = [fuse(v, k, method=DEFAULT_FUSION, alpha=alpha, limit=50) for v, k in sides]
                        print(f"    hybrid a{alpha}: {score(fused)}", flush=True)
                indexed.close()


if __name__ == "__main__":
    asyncio.run(main())
