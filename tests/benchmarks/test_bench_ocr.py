"""OCR accuracy and speed on generated scans (tests/support/ocr_pages.py), through the
same path files take when they are indexed: `read_and_chunk_file` with OCR options, in
two parse worker processes (a machine with `ingest.parse_workers = 2`).

For every condition (each clean font/size group; rotated, blurred, JPEG-damaged pages)
and every form (the pages as image files — PNG for clean renders, JPEG for noisy ones —
and as image-only PDFs of two pages each) it prints, on one line:

* the character error rate next to its target (issue 21: <= 2 % clean, <= 8 % noisy);
* pages per second on 2 cores through ktui (both workers busy, the OCR cache cold);
* the same-run peer: the `tesseract` CLI itself on the same page images, two processes
  at a time with one thread each (what ktui runs per page), its pages/s and CER, and
  ktui's speed as a ratio of it (below 1: ktui's own cost — decoding, greyscale, PDF
  rendering, chunking, process hops — on top of Tesseract's).

On a shared machine wall-clock pages/s fall with the load, so each line also gives the
CPU time a page cost (ktui: the parse workers and the Tesseract processes they ran, from
/proc; the peer: its Tesseract processes, from getrusage) and what that projects to on
two idle cores (2 / CPU seconds per page): the figure to compare across runs.

At the end: the OCR cache's speed (every file read again, unchanged) and the machine's
load average before and after, since the figures are only as quiet as the machine.

CER = Levenshtein distance / reference length, on text with whitespace runs collapsed
to one space (line and paragraph breaks are layout, not characters read).
Run: .venv/bin/python -m pytest tests/benchmarks/test_bench_ocr.py -m benchmark -s
Environment: KTUI_OCR_BENCH_PAGES (pages per condition and form, even, default 4).
"""

from __future__ import annotations

import asyncio
import os
import re
import resource
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from rapidfuzz.distance import Levenshtein

from ktui.core.config import IngestSettings
from ktui.core.ingest.ocr.engine import parse_tsv
from ktui.core.ingest.ocr.options import OcrOptions
from ktui.core.ingest.pipeline import read_and_chunk_file
from ktui.core.models import FileItemData
from ktui.core.runtime.parse_pool import ParsePool
from tests.support.ocr_pages import CLEAN, NOISY, render_page, save_image, save_multipage

pytestmark = [pytest.mark.benchmark, pytest.mark.timeout(0)]  # OCR on a busy machine is slow

PAGES = max(2, int(os.environ.get("KTUI_OCR_BENCH_PAGES", "4")) // 2 * 2)
TARGETS = {"clean": 2.0, "noisy": 8.0}
LINES = 24  # a full page of text
WORKERS = 2


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def error_rate(truth: list[str], read: list[str]) -> float:
    """CER over all pages, weighted by their length; a missing page counts as all wrong."""
    read = read + [""] * (len(truth) - len(read))
    errors = sum(Levenshtein.distance(normalise(t), normalise(h)) for t, h in zip(truth, read, strict=False))
    return 100.0 * errors / max(1, sum(len(normalise(t)) for t in truth))


@dataclass
class Case:
    kind: str  # clean | noisy
    condition: str
    images: list[Path]  # one page each
    pdfs: list[Path]  # image-only, two pages each, the same pages
    truth: list[str]  # true text of each page, in order


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> list[Case]:
    root = tmp_path_factory.mktemp("ocr-bench")
    out = []
    for kind, conditions in (("clean", CLEAN), ("noisy", NOISY)):
        for c, (condition, spec) in enumerate(conditions.items()):
            pages = [render_page(100 * c + s + (0 if kind == "clean" else 50), spec, lines=LINES) for s in range(PAGES)]
            suffix = "png" if kind == "clean" else "jpg"
            images = [save_image(p.image, root / f"{kind}-{c}-{s}.{suffix}") for s, p in enumerate(pages)]
            pdfs = [save_multipage([p.image for p in pages[s:s + 2]], root / f"{kind}-{c}-{s // 2}.pdf")
                    for s in range(0, PAGES, 2)]
            out.append(Case(kind, condition, images, pdfs, [p.text for p in pages]))
    return out


def chunk_pages(chunks) -> list[str]:
    by_page: dict[int, list[str]] = {}
    for chunk in chunks:
        by_page.setdefault(chunk.metadata.get("page", 1), []).append(chunk.text)
    return [" ".join(by_page[p]) for p in sorted(by_page)]


TICKS = os.sysconf("SC_CLK_TCK")


def workers_cpu(pool: ParsePool) -> float:
    """CPU seconds of the pool's worker processes and of the children they waited for
    (their Tesseract runs): utime + stime + cutime + cstime from /proc/PID/stat."""
    total = 0
    for worker in pool._all:
        stat = Path(f"/proc/{worker.process.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()
        total += sum(int(v) for v in fields[11:15])  # fields 14-17 of proc(5), after pid and comm
    return total / TICKS


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def through_ktui(pool: ParsePool, files: list[Path], ocr: OcrOptions) -> tuple[float, float, list[str], list[dict]]:
    """Read `files` at once through the pool: wall time, CPU time, page texts in order, OCR summaries."""
    cpu, start = workers_cpu(pool), time.perf_counter()
    answers = await asyncio.gather(*(pool.run(str(f), "read_and_chunk_file", read_and_chunk_file,
                                              FileItemData(str(f), str(f)), "bench", IngestSettings(), 4096, 0, ocr)
                                     for f in files))
    elapsed, cpu = time.perf_counter() - start, workers_cpu(pool) - cpu
    texts = [text for chunks, _ in answers for text in chunk_pages(chunks)]
    return elapsed, cpu, texts, [recorded.ocr or {} for _, recorded in answers]


async def through_tesseract_cli(files: list[Path]) -> tuple[float, float, list[str]]:
    """The peer: `tesseract FILE stdout --psm 3 tsv`, WORKERS processes at a time, one thread each."""
    command = shutil.which("tesseract")
    assert command, "the OCR benchmark needs Tesseract (.ci/run installs tesseract-ocr)"
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    slots = asyncio.Semaphore(WORKERS)

    async def one(path: Path) -> str:
        async with slots:
            proc = await asyncio.create_subprocess_exec(
                command, str(path), "stdout", "-l", "eng", "--psm", "3", "tsv",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env)
            out, _ = await proc.communicate()
            return parse_tsv(out.decode("utf-8", "replace")).text

    cpu, start = children_cpu(), time.perf_counter()
    texts = await asyncio.gather(*(one(f) for f in files))
    return time.perf_counter() - start, children_cpu() - cpu, list(texts)


def test_cer_and_pages_per_second_per_condition(cases, tmp_path) -> None:
    cache = OcrOptions(cache_path=str(tmp_path / "ocr-cache.sqlite"))  # cold: the real path writes it

    async def run() -> None:
        pool = ParsePool(workers=WORKERS, timeout=600)
        try:
            # start both workers first: interpreter start-up is not OCR
            warm = cases[0].images[0]
            await asyncio.gather(*(pool.run("warm-up", "read_and_chunk_file", read_and_chunk_file,
                                            FileItemData(str(warm), str(warm)), "w", IngestSettings(), 4096, 0,
                                            replace(cache, enabled=False)) for _ in range(WORKERS)),
                                 return_exceptions=True)
            load_before = os.getloadavg()
            print(f"\nOCR per condition: {PAGES} pages of {LINES} lines each, as images and as PDFs of 2 pages; "
                  f"{WORKERS} parse workers (2 cores); peer: the tesseract CLI on the same images, "
                  f"{WORKERS} at a time; load average {load_before[0]:.1f} / {load_before[1]:.1f} (1 / 5 min)")
            print("  pages/s: wall clock on 2 cores at this load; CPU s/p: CPU seconds per page; "
                  "idle p/s: 2 / CPU s/p, what 2 idle cores would do")
            print(f"  {'kind':5} {'condition':32} {'form':5} {'CER':>7} {'target':>8}      "
                  f"{'conf':>5} {'pages/s':>7} {'CPU s/p':>7} {'idle p/s':>8} | "
                  f"{'CLI p/s':>7} {'CPU s/p':>7} {'CLI CER':>7} | {'ratio':>5} {'CPU':>5}")
            worst = {"clean": 0.0, "noisy": 0.0}
            totals = {"ktui": [0.0, 0, 0.0], "cli": [0.0, 0, 0.0]}
            by_form: dict[str, list[float]] = {"image": [0.0, 0, 0.0], "PDF": [0.0, 0, 0.0]}
            for case in cases:
                cli_time, cli_cpu, cli_texts = await through_tesseract_cli(case.images)
                cli_rate, cli_cer = PAGES / cli_time, error_rate(case.truth, cli_texts)
                totals["cli"][0] += cli_time
                totals["cli"][1] += PAGES
                totals["cli"][2] += cli_cpu
                for form, files in (("image", case.images), ("PDF", case.pdfs)):
                    elapsed, cpu, texts, summaries = await through_ktui(pool, files, cache)
                    rate = error_rate(case.truth, texts)
                    worst[case.kind] = max(worst[case.kind], rate)
                    confidences = [s["confidence"] for s in summaries if s.get("confidence") is not None]
                    confidence = sum(confidences) / len(confidences) if confidences else float("nan")
                    for row in (totals["ktui"], by_form[form]):
                        row[0] += elapsed
                        row[1] += PAGES
                        row[2] += cpu
                    verdict = "ok  " if rate <= TARGETS[case.kind] else "OVER"
                    per_page, cli_per_page = cpu / PAGES, cli_cpu / PAGES
                    print(f"  {case.kind:5} {case.condition:32} {form:5} {rate:6.2f}% {'<= ' + str(TARGETS[case.kind]):>7}% "
                          f"{verdict} {confidence:5.1f} {PAGES / elapsed:7.2f} {per_page:7.2f} {2 / per_page:8.2f} | "
                          f"{cli_rate:7.2f} {cli_per_page:7.2f} {cli_cer:6.2f}% | "
                          f"{PAGES / elapsed / cli_rate:5.2f} {cli_per_page / per_page:5.2f}")
            for kind, rate in worst.items():
                print(f"  worst {kind}: CER {rate:.2f} % (target <= {TARGETS[kind]:g} %)")
            ktui_rate = totals["ktui"][1] / totals["ktui"][0]
            cli_rate = totals["cli"][1] / totals["cli"][0]

            def idle(row: list[float]) -> float:
                return 2 * row[1] / row[2]

            print(f"  all conditions: ktui {ktui_rate:.2f} pages/s on 2 cores at this load, {idle(totals['ktui']):.2f} on "
                  f"2 idle cores (images {idle(by_form['image']):.2f}, PDFs {idle(by_form['PDF']):.2f}); "
                  f"tesseract CLI {cli_rate:.2f} pages/s, {idle(totals['cli']):.2f} idle; "
                  f"ratio {ktui_rate / cli_rate:.2f} (wall), {idle(totals['ktui']) / idle(totals['cli']):.2f} (CPU)")
            files = [f for case in cases for f in case.images + case.pdfs]
            again, _, _, summaries = await through_ktui(pool, files, cache)  # unchanged files: all from the cache
            cached = sum(s.get("cached_pages", 0) for s in summaries)
            print(f"  reindexing the same {len(files)} files ({cached} pages from the OCR cache): "
                  f"{cached / again:.1f} pages/s, {cached / again / ktui_rate:.0f}x recognising")
            load_after = os.getloadavg()
            print(f"  load average after: {load_after[0]:.1f} / {load_after[1]:.1f} (1 / 5 min)")
        finally:
            await pool.close()

    asyncio.run(run())
