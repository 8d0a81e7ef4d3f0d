"""Memory of reading a run back: `rtlab report RUN --format json` of a saved 5-load run, its
peak of traced Python memory and its peak virtual size (VmPeak, what a memory limit such as
`ulimit -v` counts). Every file of a run is read within a cap (512 MiB for cyclictest's JSON);
the cap must bound what is read, not be what is reserved. Goals: traced peak under 64 MiB,
VmPeak under 400 MiB.

    .venv/bin/python bench/bench_read_memory.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import SRC
from bench_summarise import write_run

GOALS_MIB = {"traced": 64, "vm_peak": 400}

# rtlab's CLI in this interpreter under tracemalloc; its peaks printed last, as JSON
_WRAPPER = """
import json, sys, tracemalloc
from rtlab.cli import main
tracemalloc.start()
sys.argv = ["rtlab", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
traced = tracemalloc.get_traced_memory()[1]
vm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmPeak:"))
print(json.dumps({"traced": traced / 2**20, "vm_peak": vm / 1024}), file=sys.stderr)
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run = write_run(Path(tmp), 0)
        done = subprocess.run(
            [sys.executable, "-c", _WRAPPER, "report", str(run), "--format", "json"],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(SRC)},
        )
        peaks = json.loads(done.stderr.strip().splitlines()[-1])
    for name, goal in GOALS_MIB.items():
        found = peaks[name]
        verdict = "met" if found <= goal else "MISSED"
        print(
            f"report RUN, {name} peak: {found:.0f} MiB; goal {goal} MiB: {found / goal:.2f} of it ({verdict})"
        )


if __name__ == "__main__":
    main()
