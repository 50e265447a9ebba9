"""Index a known-item set the way ktui does and measure ktui's search next to a baseline.

ktui side: the real chunker, the real EmbeddingService (documents embedded as a base
would embed them), a real BaseStore, and the real search execution
(`ktui.core.search.run_search`) for each mode with the base's own settings.

Baseline (same run, same chunks, same model): SQLite FTS5 with its default tokenizer
and an OR of every query term, exact cosine over the same model's vectors of the raw
texts, and RRF (k = 60, equal weights) over the top 50 of each side.

Metrics are per document: a page's rank is the rank of its first chunk in the
result list; MRR@10 and recall@10 over the set's queries.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ktui.core.config import Settings
from ktui.core.embeddings import EmbeddingService
from ktui.core.embeddings.profiles import fitted_chunking
from ktui.core.ingest.chunking import chunk_documents
from ktui.core.models import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE, BaseStatus, Document, KnowledgeBase, SearchMode
from ktui.core.search import run_search  # noqa: F401 - the search under test
from ktui.core.store import BaseStore

from .corpus import KnownItemSet, Page

RESULT_CHUNKS = 50  # chunks asked for per query; collapsed to documents
CUTOFF = 10
_TERM = re.compile(r"[^\W_]+")


@dataclass(frozen=True, slots=True)
class Scores:
    mrr: float
    recall: float

    def __str__(self) -> str:
        return f"{self.mrr:.3f} / {self.recall:.3f}"


def item_id(page: Page) -> str:
    return hashlib.sha1(page.key.encode()).hexdigest()[:16]


def make_base(model_id: str, dimensions: int, **config) -> KnowledgeBase:
    now = "2026-01-01T00:00:00Z"
    fields = dict(
        id="bench", name="bench", group_id=None, emoji="📁", dimensions=dimensions, embedding_model_id=model_id,
        status=BaseStatus.COMPLETED, error=None, rerank_model_id=None, chunk_size=1024, chunk_overlap=200,
        threshold=None, document_count=None, search_mode=SearchMode.HYBRID, hybrid_alpha=None,
        created_at=now, updated_at=now,
    )
    fields.update(config)
    return KnowledgeBase(**fields)


def metrics(rankings: list[list[str]], answers: list[str]) -> Scores:
    rr, hit = 0.0, 0
    for ranking, answer in zip(rankings, answers, strict=True):
        top = ranking[:CUTOFF]
        if answer in top:
            rr += 1.0 / (top.index(answer) + 1)
            hit += 1
    n = max(1, len(answers))
    return Scores(rr / n, hit / n)


def documents_in_order(item_ids: list[str]) -> list[str]:
    return list(dict.fromkeys(item_ids))


class IndexedSet:
    """One known-item set indexed in a ktui store plus the baseline's own FTS table."""

    def __init__(self, dataset: KnownItemSet, base: KnowledgeBase, store: BaseStore, embeddings: EmbeddingService,
                 chunk_items: list[str], chunk_texts: list[str], vectors: np.ndarray, seconds: float):
        self.dataset, self.base, self.store, self.embeddings = dataset, base, store, embeddings
        self.chunk_items, self.chunk_texts = chunk_items, chunk_texts
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        self.vectors = vectors / np.where(norms == 0, 1, norms)
        self.index_seconds = seconds
        self.fts = sqlite3.connect(":memory:")
        self.fts.execute("CREATE VIRTUAL TABLE t USING fts5(text)")
        self.fts.executemany("INSERT INTO t(rowid, text) VALUES (?, ?)", enumerate(chunk_texts))

    @classmethod
    async def build(cls, dataset: KnownItemSet, base: KnowledgeBase, embeddings: EmbeddingService,
                    store_dir: Path, embed_documents) -> IndexedSet:
        started = time.perf_counter()
        entries, texts, owners = [], [], []
        for page in dataset.pages:
            chunks = chunk_documents([Document(page.body)], chunk_size=base.chunk_size,
                                     chunk_overlap=base.chunk_overlap, item_id=item_id(page), item_type="file",
                                     source=page.key)
            entries.append((item_id(page), chunks))
            texts += [c.text for c in chunks]
            owners += [item_id(page)] * len(chunks)
        vectors = await embed_documents(embeddings, base, texts)
        store = BaseStore.open(store_dir / f"{dataset.name}.sqlite", base.dimensions, create=True)
        at = 0
        batch = []
        for iid, chunks in entries:
            batch.append((iid, chunks, vectors[at : at + len(chunks)]))
            at += len(chunks)
        for start in range(0, len(batch), 200):
            store.replace_items(batch[start : start + 200])
        return cls(dataset, base, store, embeddings, owners, texts, vectors, time.perf_counter() - started)

    # ---------------------------------------------------------------- ktui

    async def ktui(self, queries: list[Page], mode: SearchMode, **base_changes) -> Scores:
        base = replace(self.base, **base_changes) if base_changes else self.base
        rankings = []
        for page in queries:
            response = await run_search(base, self.store, self.embeddings, page.query, top_k=RESULT_CHUNKS, mode=mode)
            rankings.append(documents_in_order([r.item_id for r in response.results]))
        return metrics(rankings, [item_id(p) for p in queries])

    # ------------------------------------------------------------ baseline

    async def baseline(self, queries: list[Page]) -> dict[str, Scores]:
        vec_rank, kw_rank, hyb_rank = [], [], []
        # the baseline knows no profiles: raw query text
        qvecs = await self.embeddings.embed(self.base.embedding_model_id, [p.query for p in queries],
                                            dimensions=self.base.dimensions)
        for page, q in zip(queries, qvecs, strict=True):
            q = q / (np.linalg.norm(q) or 1.0)
            sims = self.vectors @ q
            top = np.argsort(-sims, kind="stable")[:RESULT_CHUNKS].tolist()
            terms = dict.fromkeys(t.lower() for t in _TERM.findall(page.query))
            expr = " OR ".join('"' + t + '"' for t in terms)
            kw = [r[0] for r in self.fts.execute(
                "SELECT rowid FROM t WHERE t MATCH ? ORDER BY rank LIMIT ?", (expr, RESULT_CHUNKS))] if expr else []
            fused: dict[int, float] = {}
            for rank, row in enumerate(top, 1):
                fused[row] = fused.get(row, 0.0) + 0.5 / (60 + rank)
            for rank, row in enumerate(kw, 1):
                fused[row] = fused.get(row, 0.0) + 0.5 / (60 + rank)
            hyb = sorted(fused, key=lambda r: -fused[r])
            vec_rank.append(documents_in_order([self.chunk_items[r] for r in top]))
            kw_rank.append(documents_in_order([self.chunk_items[r] for r in kw]))
            hyb_rank.append(documents_in_order([self.chunk_items[r] for r in hyb]))
        answers = [item_id(p) for p in queries]
        return {"default": metrics(vec_rank, answers), "bm25": metrics(kw_rank, answers),
                "hybrid": metrics(hyb_rank, answers)}

    async def query_vector(self, query: str) -> np.ndarray:
        """The query's vector as ktui's search embeds it."""
        return await embed_query(self.embeddings, self.base, query)

    def close(self) -> None:
        self.store.close()
        self.fts.close()


async def embed_documents(embeddings: EmbeddingService, base: KnowledgeBase, texts: list[str]) -> np.ndarray:
    """Chunk vectors as the runtime embeds them for this base (document role: its prefix)."""
    return await embeddings.embed(base.embedding_model_id, texts, dimensions=base.dimensions, role="document")


async def embed_query(embeddings: EmbeddingService, base: KnowledgeBase, query: str) -> np.ndarray:
    return await embeddings.embed_query(base.embedding_model_id, query, dimensions=base.dimensions)


async def base_for_model(embeddings: EmbeddingService, model_id: str) -> KnowledgeBase:
    """A base with the settings a new base gets for this model (its profile's defaults)."""
    dims = await embeddings.detect_dimensions(model_id)
    profile = embeddings.profile(model_id)
    size, overlap = fitted_chunking(profile, DEFAULT_CHUNK_SIZE, DEFAULT_CHUNK_OVERLAP)
    return make_base(model_id, dims, chunk_size=size, chunk_overlap=overlap, search_mode=profile.search_mode,
                     hybrid_alpha=profile.hybrid_alpha)


def bench_settings(data_dir: Path, **changes) -> Settings:
    return Settings(data_dir=data_dir, auto_ollama=False, **changes)
