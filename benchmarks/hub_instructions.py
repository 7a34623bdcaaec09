"""The in-process hub's cost per event in CPU instructions (callgrind), against another checkout.

    .venv/bin/python -m benchmarks.hub_instructions --against ../before [--subscribers 1 10 100]

One run published to S in-process subscribers (``benchmarks.fanout`` (a)), run twice under
``valgrind --tool=callgrind`` with a small and a large event count; the difference over the
difference in events is the instructions each event costs (publish, wake-up, delivery, each
subscriber's read), start-up cancelled out. Instruction counts do not depend on what else the
machine is doing, so two checkouts compare on a busy machine where timings would not. The
delivery window is 0 (a wake-up per publish), since with a window the number of wake-ups
depends on wall time. ``--against`` is another checkout with its own ``.venv``; the ratio is
this checkout's over it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD = """
import sys
sys.path.insert(0, ".")
import anyio
import loopgate.gateway.settings as settings_module
from benchmarks.fanout import hub_fanout

real = settings_module.Settings
settings_module.Settings = lambda **kw: real(delivery_window_s=0, **kw)
anyio.run(hub_fanout, int(sys.argv[2]), int(sys.argv[1]))
"""


def instructions(checkout: Path, events: int, subscribers: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={tmp}/cg.out",
                str(checkout / ".venv" / "bin" / "python"),
                "-c",
                CHILD,
                str(events),
                str(subscribers),
            ],
            cwd=checkout,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},
            check=True,
        )
    found = re.search(r"Collected : (\d+)", out.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no total: {out.stderr[-500:]}")
    return int(found.group(1))


def per_event(checkout: Path, subscribers: int, small: int, large: int) -> float:
    # Once first, so that neither measured run compiles the checkout's bytecode.
    instructions(checkout, small, subscribers)
    return (
        instructions(checkout, large, subscribers) - instructions(checkout, small, subscribers)
    ) / (large - small)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, required=True, help="another checkout")
    parser.add_argument("--subscribers", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--events", type=int, default=4000, help="events beyond the small run")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is needed (apt-get install valgrind)")
    print("subscribers  this checkout  --against  ratio (instructions per event)")
    for subscribers in args.subscribers:
        small = 1002
        ours = per_event(ROOT, subscribers, small, small + args.events)
        theirs = per_event(args.against.resolve(), subscribers, small, small + args.events)
        print(f"{subscribers:>11}  {ours:>13,.0f}  {theirs:>9,.0f}  {ours / theirs:.3f}")


if __name__ == "__main__":
    main()
