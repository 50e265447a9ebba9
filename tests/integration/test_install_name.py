"""ktui installs under one import name and ignores foreign `core` / `tui` packages.

Built as a user gets it: a real wheel of this checkout, installed into a fresh
virtual environment (its dependencies come from the test environment's
site-packages through a .pth line, so nothing is downloaded but the build
backend). Every command then runs from a folder that holds decoy `core/` and
`tui/` packages, as a Django project or a monorepo does; before the import-name
move, the parse worker imported the decoy and every file failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

import ktui.core

ROOT = Path(__file__).resolve().parents[2]
DECOY = 'raise ImportError("decoy package imported instead of ktui\'s")\n'

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the built wheel of this checkout installed (no editable finder)."""
    work = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(work / "dist"), str(ROOT)],
        check=True, timeout=600, capture_output=True,
    )
    (wheel,) = (work / "dist").glob("ktui-*.whl")
    env_dir = work / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    # The dependencies, not ktui: the test venv holds ktui only as an editable
    # finder, which a .pth *path* line does not activate.
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, timeout=600, capture_output=True)
    return env_dir


@pytest.fixture
def decoy_project(tmp_path: Path) -> Path:
    project = tmp_path / "my-django-site"
    for package in ("core", "tui"):
        (project / package).mkdir(parents=True)
        (project / package / "__init__.py").write_text(DECOY)
        (project / package / "config.py").write_text(DECOY)
    (project / "notes.md").write_text("# Backups\n\nThe nightly backup runs restic against the NAS at 02:00.\n")
    return project


def _run(args: list[str], cwd: Path, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "KTUI_"))}
    env.update(KTUI_HOME=str(data_dir), HOME=str(data_dir.parent), XDG_CONFIG_HOME=str(data_dir.parent / "config"))
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=240)


def test_the_wheel_installs_ktui_packages_only(wheel_env: Path) -> None:
    site = next((wheel_env / "lib").glob("python*/site-packages"))
    top_level = {p.name for p in site.iterdir() if not p.name.endswith((".dist-info", ".pth"))}
    assert "ktui" in top_level
    assert "core" not in top_level and "tui" not in top_level
    assert (site / "ktui" / "tui" / "ktui.tcss").exists()  # package data travels with the mapping
    assert (site / "ktui" / "tui" / "demo").is_dir()


def test_cli_indexes_and_searches_from_a_folder_with_decoy_packages(
    wheel_env: Path, decoy_project: Path, tmp_path: Path
) -> None:
    ktui_cmd = str(wheel_env / "bin" / "ktui")
    data_dir = tmp_path / "data"
    created = _run([ktui_cmd, "base", "create", "Site notes"], decoy_project, data_dir)
    assert created.returncode == 0, created.stderr
    added = _run([ktui_cmd, "add", "Site notes", "notes.md", "--wait"], decoy_project, data_dir)
    assert added.returncode == 0, added.stderr
    assert "1 completed" in added.stderr + added.stdout
    found = _run([ktui_cmd, "--json", "search", "Site notes", "nightly backup restic"], decoy_project, data_dir)
    assert found.returncode == 0, found.stderr
    results = json.loads(found.stdout)["results"]
    assert results and "restic" in results[0]["text"]


def test_facade_and_python_m_ktui_from_a_folder_with_decoy_packages(
    wheel_env: Path, decoy_project: Path, tmp_path: Path
) -> None:
    python = str(wheel_env / "bin" / "python")
    script = (
        "import asyncio, sys\n"
        "from ktui.core import KnowledgeService\n"
        "async def main():\n"
        "    async with await KnowledgeService.open(sys.argv[1]) as ks:\n"
        "        base = await ks.create_base('Facade')\n"
        "        await ks.add_items(base.id, [{'type': 'file', 'data': {'path': 'notes.md'}}])\n"
        "        assert await ks.wait_idle(timeout=120)\n"
        "        (item,) = (await ks.list_items(base.id)).items\n"
        "        assert item.status.value == 'completed', (item.status, item.error)\n"
        "        import ktui.core.config as config\n"
        "        print(config.__file__)\n"
        "asyncio.run(main())\n"
    )
    done = _run([python, "-c", script, str(tmp_path / "facade-data")], decoy_project, tmp_path / "unused")
    assert done.returncode == 0, done.stderr
    assert str(decoy_project) not in done.stdout
    version = _run([python, "-m", "ktui", "--version"], decoy_project, tmp_path / "unused")
    assert version.returncode == 0 and version.stdout.startswith("ktui "), version.stderr


def test_the_editable_checkout_is_the_same_package() -> None:
    """The test run itself imports ktui from this checkout's folders."""
    assert Path(ktui.core.__file__).resolve().parent == ROOT / "core"
