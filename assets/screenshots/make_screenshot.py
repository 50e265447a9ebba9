"""Regenerate the README screenshot: the demo base, indexed, with a search run.

    .venv/bin/python assets/screenshots/make_screenshot.py

Runs the real app headless (Textual's pilot) on a throw-away data directory with
the built-in model, waits for the demo corpus to be indexed, searches it, and
saves the screen as SVG next to this script.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from ktui.core.config import Settings  # noqa: E402
from ktui.tui.app import KtuiApp  # noqa: E402

QUERY = "how do I repair a torn sail"


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        app = KtuiApp(Settings(data_dir=Path(tmp) / "data", auto_ollama=False), demo=True)
        async with app.run_test(size=(150, 42)) as pilot:
            for _ in range(600):
                if app.ready and app.tree.nodes_by_id:
                    break
                await pilot.pause(0.1)
            assert await app.ks.wait_idle(timeout=120)
            await pilot.pause(1.0)
            app.tree.focus()
            app.tree.root.children[0].expand()  # show the indexed files
            await pilot.pause(1.0)
            await pilot.press("slash")
            for ch in QUERY:
                await pilot.press("space" if ch == " " else ch)
            await pilot.press("enter")
            await pilot.pause(2.0)
            app.save_screenshot(str(HERE / "ktui.svg"))
    print(f"wrote {HERE / 'ktui.svg'}")


if __name__ == "__main__":
    asyncio.run(main())
