"""The sample stdio loop, flooding its stderr meanwhile:
``python -m tests.plugs.stderr_flood COUNT_FILE STOP_FILE``.

Until STOP_FILE exists (at most a minute) it writes to its stderr as fast as it can: one line
of 100,000 bytes, then lines of 100; then the number of bytes it wrote goes to COUNT_FILE. It
serves runs all the while.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import anyio

from tests.plugs.sample_stdio import main

LONG_LINE = b"L" * 100_000 + b"\n"
LINE = b"flood " + b"x" * 93 + b"\n"
MAX_S = 60.0


def write_all(data: bytes) -> int:
    view = memoryview(data)
    while view:
        view = view[os.write(2, view) :]
    return len(data)


def flood(count_file: Path, stop_file: Path) -> None:
    block = LINE * 655  # whole lines, about 64 KiB a write
    written = write_all(LONG_LINE)
    deadline = time.monotonic() + MAX_S
    while not stop_file.exists() and time.monotonic() < deadline:
        written += write_all(block)
    partial = count_file.with_suffix(".partial")
    partial.write_text(str(written))
    partial.rename(count_file)  # whole when it appears


if __name__ == "__main__":
    count_file, stop_file = Path(sys.argv[1]), Path(sys.argv[2])
    threading.Thread(target=flood, args=(count_file, stop_file), daemon=True).start()
    anyio.run(main, False)
