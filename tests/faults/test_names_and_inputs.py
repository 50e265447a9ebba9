"""Names and inputs: base names unique ignoring case, restore picks a free name;
dangerous directory items (system roots, the home folder) are refused. The facade's
cases run on both backends (tests/support/facades.py)."""

from __future__ import annotations

import pytest

from tests.support.embedding_server import embedding_server_fixture
from tests.support.facades import BACKENDS, backend_overrides
from tests.support.services import open_service

pytestmark = pytest.mark.faults

DIMS = 16
server = embedding_server_fixture(DIMS)


@pytest.fixture(params=BACKENDS)
def store(request):
    """The settings overrides of the backend the test runs on."""
    return backend_overrides(request.param, request)


async def test_base_names_are_unique_ignoring_case_and_restore_picks_a_free_name(tmp_path, server, store):
    from ktui.core.errors import ValidationError

    async with open_service(tmp_path / "d", server.url, **store) as ks:
        first = await ks.create_base("My notes")
        for taken in ("My notes", "MY NOTES", "my notes "):
            with pytest.raises(ValidationError, match="a base named 'My notes' already exists"):
                await ks.create_base(taken)
        other = await ks.create_base("Ärger")
        with pytest.raises(ValidationError, match="already exists"):
            await ks.create_base("ärger")
        with pytest.raises(ValidationError, match="already exists"):
            await ks.update_base(other.id, {"name": "my NOTES"})
        restored = await ks.restore_base(first.id, "fake::other-model", DIMS)
        again = await ks.restore_base(first.id, "fake::third-model", DIMS)
        assert (restored.name, again.name) == ("My notes (2)", "My notes (3)")
        assert (await ks.resolve_base("my notes")).id == first.id


async def test_system_roots_and_the_home_folder_are_refused_as_folder_items(tmp_path, server, monkeypatch, store):
    from ktui.core.errors import ValidationError
    from ktui.core.models import ItemInput

    home = tmp_path / "home-of-user"
    (home / "notes").mkdir(parents=True)
    (home / "notes" / "a.md").write_text("Kestrels hover over fields.", encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    async with open_service(tmp_path / "d", server.url, **store) as ks:
        base = await ks.create_base("B")
        for path, why in (("/", "the root of a file system"), ("/usr", "a system folder"),
                          ("/etc/", "a system folder"), (str(home), "your home folder itself"),
                          ("~", "your home folder itself")):
            with pytest.raises(ValidationError, match="add the folders inside it") as caught:
                await ks.add_items(base.id, [ItemInput("directory", {"path": path})])
            assert why in str(caught.value)
        [ok] = await ks.add_items(base.id, [ItemInput("directory", {"path": str(home / "notes")})])
        assert await ks.wait_idle(timeout=30)
        assert (await ks.get_item(ok.id)).status.value == "completed"


def test_an_import_of_an_endless_file_is_refused_at_the_size_limit(tmp_path, server):
    from tests.cli.test_cli import Ktui, one_error_line

    ktui = Ktui(tmp_path, server.url)
    proc = ktui("base", "import", "/dev/zero", rc=1, env=ktui.env(KTUI_IMPORT_MAX_MB="1"))
    line = one_error_line(proc.stderr)
    assert line == ("ktui: error: file: /dev/zero is larger than the import limit of 1 MiB "
                    "(an export of ktui is far smaller; is this the right file?)")


def test_a_parse_worker_memory_limit_is_a_real_rlimit(tmp_path):
    import subprocess
    import sys

    code = (
        "from ktui.core.ingest.worker import limit_memory\n"
        "limit_memory(300)\n"
        "try:\n"
        "    block = bytearray(1 << 30)\n"
        "    print('allocated')\n"
        "except MemoryError:\n"
        "    print('MemoryError')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "MemoryError"


async def test_a_spreadsheet_claiming_the_whole_grid_is_read_quickly(tmp_path, server):
    import openpyxl

    from ktui.core.models import ItemInput

    book = openpyxl.Workbook()
    sheet = book.active
    sheet["A1"] = "Gannets dive from great heights"
    sheet["B2"] = "into cold seas"
    path = tmp_path / "claims.xlsx"
    book.save(path)
    import zipfile

    # rewrite the sheet's dimension to claim A1:XFD1048576, as the hostile 4.7 KB file did
    with zipfile.ZipFile(path) as zin:
        parts = {n: zin.read(n) for n in zin.namelist()}
    name = "xl/worksheets/sheet1.xml"
    parts[name] = parts[name].replace(b'<dimension ref="A1:B2"/>', b'<dimension ref="A1:XFD1048576"/>')
    assert b"XFD1048576" in parts[name]
    with zipfile.ZipFile(path, "w") as zout:
        for n, data in parts.items():
            zout.writestr(n, data)
    async with open_service(tmp_path / "d", server.url) as ks:
        base = await ks.create_base("B")
        [item] = await ks.add_items(base.id, [ItemInput("file", {"path": str(path)})])
        assert await ks.wait_idle(timeout=60)
        item = await ks.get_item(item.id)
        assert item.status.value == "completed", item.error
        hits = await ks.search(base.id, "gannets dive", mode="bm25")
        assert hits.results and "into cold seas" in hits.results[0].page_content
