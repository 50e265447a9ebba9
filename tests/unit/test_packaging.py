"""pyproject lists every package folder: the package-dir mapping (core/ -> ktui.core,
tui/ -> ktui.tui) rules out automatic discovery, so a new sub-package that is not
listed would be missing from the wheel while the editable checkout still works."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_folder_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    folders = {"ktui"} | {
        "ktui." + ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("core", "tui")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert folders - listed == set(), "add these to [tool.setuptools] packages"
    assert listed - folders == set(), "these listed packages have no folder"
