"""Known-item search-quality benchmarks over real corpora (see corpus.py and harness.py)."""
