"""A real Tesseract that can be held between two pages, so a test sees OCR progress
mid-file without depending on how fast the machine is.

`GatedTesseract(folder, hold=n)` writes a tiny shell script to use as the settings'
`ocr.tesseract`: it counts its page calls, and before the `n`-th one waits on a FIFO
(the shell's own `read`, so no helper process is left behind) until `release()`
writes to it; then it `exec`s the real `tesseract` with the same arguments and
stdin. `--version` and `--list-langs` pass straight through.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
from pathlib import Path


class GatedTesseract:
    def __init__(self, folder: Path, hold: int):
        real = shutil.which("tesseract")
        assert real, "the OCR tests need Tesseract (.ci/run installs tesseract-ocr)"
        folder.mkdir(parents=True, exist_ok=True)
        self.gate = folder / "gate"
        self.counter = folder / "calls"
        os.mkfifo(self.gate)
        self.command = folder / "tesseract"
        self.command.write_text(
            "#!/bin/sh\n"
            f'case "$1" in --version|--list-langs) exec {shlex.quote(real)} "$@";; esac\n'
            f"n=$(cat {shlex.quote(str(self.counter))} 2>/dev/null || echo 0); n=$((n + 1))\n"
            f"echo $n > {shlex.quote(str(self.counter))}\n"
            f'if [ "$n" -eq {hold} ]; then read _ < {shlex.quote(str(self.gate))}; fi\n'
            f'exec {shlex.quote(real)} "$@"\n',
            encoding="utf-8",
        )
        self.command.chmod(0o755)
        self.released = False

    async def release(self) -> None:
        """Let the held page through (opening the FIFO waits for the held call to read it)."""
        if self.released:
            return
        self.released = True

        def write() -> None:
            with open(self.gate, "w", encoding="utf-8") as fh:
                fh.write("go\n")

        await asyncio.to_thread(write)
