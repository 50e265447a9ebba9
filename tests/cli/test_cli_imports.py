"""Start-up: a search or a listing imports neither the parsers nor unused providers (issue 17), nor on SQLite the PostgreSQL driver.

Each command runs as a real `ktui` process on a real data directory; a small
wrapper runs the CLI's `main` and then reports which heavy packages ended up in
`sys.modules`.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.cli.test_cli import Ktui, server  # noqa: F401 - the module's embedding server fixture

INGEST = {"lxml", "pathspec", "trafilatura", "pypdf", "docx", "defusedxml", "justext", "charset_normalizer"}
UNUSED = {"wordllama", "watchfiles", "textual", "psycopg", "pgvector"}  # an HTTP model, nothing watched, SQLite
# what used to come along although a search never needs it: httpx's own command-line
# client (rich, click, pygments), the `regex` module of emoji validation, numpy.random
# of the store's spot check
NEEDLESS = {"rich", "click", "pygments", "regex", "numpy.random"}

# ktui's own modules a search or a listing does not need: the --wait follower, the
# Knowledge Engine (similar items, `ktui rank`), the doctor
NEEDLESS_KTUI = {"ktui.tui.cli_progress", "ktui.core.engine", "ktui.core.search.similar", "ktui.core.doctor"}

PROBE = """
import gc, json, sys
from ktui.tui.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
names = [m for m, module in sys.modules.items() if module is not None]  # None: an import blocked on purpose
keyword = sys.modules.get("ktui.core.search.keyword")
print(json.dumps({
    "modules": sorted({m.split(".")[0] for m in names} | {m for m in names if m.startswith(("numpy.random", "ktui."))}),
    "cjk_compiled": keyword is not None and keyword._cjk_run_re is not None,
    "gc": [gc.isenabled(), gc.get_freeze_count() > 0],
}), file=sys.stderr)
"""


def probe(ktui: Ktui, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=ktui.work, env=ktui.env(),
                          capture_output=True, text=True, timeout=60, check=True)
    return json.loads(proc.stderr.strip().splitlines()[-1])


def imported(ktui: Ktui, *args: str) -> set[str]:
    return set(probe(ktui, *args)["modules"])


@pytest.mark.slow
def test_search_and_list_import_no_parser_and_no_unused_provider(tmp_path, server):  # noqa: F811
    ktui = Ktui(tmp_path, server.url)
    (ktui.work / "otters.md").write_text("# Otters\nSea otters hold hands while they sleep.", encoding="utf-8")
    ktui("base", "create", "Notes")
    ktui("add", "Notes", "otters.md", "--wait")
    assert INGEST & imported(ktui, "add", "Notes", "--note", "Badgers dig", "--wait")  # the probe sees imports

    probed = probe(ktui, "search", "Notes", "sea otters")
    searched = set(probed["modules"])
    assert not searched & (INGEST | UNUSED | NEEDLESS | NEEDLESS_KTUI), searched & (INGEST | UNUSED | NEEDLESS | NEEDLESS_KTUI)
    # CJK-free text never compiles the CJK expression (~5 ms); start-up ran without the
    # collector, froze what it built once the facade was open (cli.startup_over), and the
    # collector is on again
    assert probed["cjk_compiled"] is False and probed["gc"] == [True, True], probed
    # the base's model is served over plain HTTP on 127.0.0.1: the standard library's http.client, not httpx
    assert "httpx" not in searched and "anyio" not in searched, searched & {"httpx", "anyio"}
    listed = imported(ktui, "base", "list")
    unwanted = INGEST | UNUSED | NEEDLESS | NEEDLESS_KTUI | {"httpx"}
    assert not listed & unwanted, listed & unwanted
