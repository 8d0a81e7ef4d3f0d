"""Helpers shared by the benchmarks: running rtlab in-process and reading its CPU time, a
rate with its interval and a mean of seconds with its interval."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# Runs rtlab's CLI in this interpreter, then prints the CPU time of the rtlab
# process itself (not of the agent, cyclictest or stress-ng, its children).
_WRAPPER = """
import json, resource, sys
from rtlab.cli import main
sys.argv = ["rtlab", *sys.argv[1:]]
try:
    main()
except SystemExit as e:
    code = e.code
else:
    code = 0
u = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"cpu_s": u.ru_utime + u.ru_stime, "exit": code}), file=sys.stderr)
"""


def rtlab_cpu(*args: str) -> tuple[float, int]:
    """(CPU seconds used by the rtlab process, its exit code)."""
    done = subprocess.run(
        [sys.executable, "-c", _WRAPPER, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    last = done.stderr.strip().splitlines()[-1]
    data = json.loads(last)
    return float(data["cpu_s"]), int(data["exit"] or 0)


def start_rtlab(*args: str) -> subprocess.Popen[bytes]:
    """rtlab from this checkout, in the background, its output discarded."""
    return subprocess.Popen(
        [sys.executable, "-m", "rtlab", *args],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wilson(k: int, n: int) -> str:
    """K of N as a share with its 95 % Wilson interval (every rate a bench claims)."""
    from scipy import stats

    if n == 0:
        return "0/0"
    ci = stats.binomtest(k, n).proportion_ci(0.95, method="wilson")
    return f"{k}/{n} = {k / n:.1%} [{ci.low:.1%}, {ci.high:.1%}]"


def seconds_interval(values: list[float]) -> str:
    """The mean of VALUES (seconds) with its 95 % interval (Student's t)."""
    import statistics

    from scipy import stats

    mean = statistics.mean(values)
    if len(values) < 2:
        return f"{mean:.2f} s"
    half = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
    return f"{mean:.2f} s [{mean - half:.2f}, {mean + half:.2f}]"
