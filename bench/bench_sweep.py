"""A sweep's table as one decision: how often a sweep of harmless options calls one of them
worse or better (goal: at most 5 % of the sweeps), with each comparison on its own at 5 % and
with the family of every variant at every look (bisect/sweep.py: family_size), and how often
a real effect among them is still found (the price of the family).

The sweep's schedule as `rtlab sweep` runs it: every variant measured with the base for
`repeats` rounds and judged against the base runs of its rounds; a variant still unknown on
some load gets another round, up to `most`. Synthetic runs whose runs differ from each other
as a real machine's do (tests/evt_data.write_varied_run: each run its own body scale and tail
rate), 2 minutes, 2 CPUs at 200 µs, through rtlab's whole path. Rates with 95 % Wilson
intervals.

    BENCH_SWEEPS=100 BENCH_VARIANTS=3 nice -n 19 .venv/bin/python bench/bench_sweep.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _common import wilson  # noqa: E402
from evt_data import write_varied_run  # noqa: E402
from rtlab.analysis import verdicts  # noqa: E402
from rtlab.bisect.sweep import family_size  # noqa: E402
from rtlab.rundir import readback  # noqa: E402

SWEEPS = int(os.environ.get("BENCH_SWEEPS", "100"))
VARIANTS = int(os.environ.get("BENCH_VARIANTS", "3"))
REPEATS, MOST = 3, 6  # rtlab sweep's defaults (--repeats, --max-repeats)
SECONDS = 120
warnings.simplefilter("ignore")


def sweep(run: Callable[[int, int], Any], variants: int, family: int) -> dict[int, str]:
    """Each variant's verdict on the idle load (variant 0 is the base), looks as rtlab sweep takes them."""
    found: dict[int, str] = {}
    open_, k = list(range(1, variants + 1)), REPEATS
    while True:
        base = [run(0, r) for r in range(1, k + 1)]
        for v in open_:
            said = verdicts.compare(base, [run(v, r) for r in range(1, k + 1)], family=family)
            found[v] = said["loads"]["idle"]["verdict"]
        open_ = [v for v in open_ if found[v] == "unknown"]
        if not open_ or k >= MOST:
            return found
        k += 1


def trials(label: str, effect: dict[str, float] | None) -> None:
    """SWEEPS sweeps of VARIANTS options, all harmless (EFFECT None) or the last with EFFECT."""
    size = family_size(VARIANTS, REPEATS, MOST)
    alarms = {1: 0, size: 0}
    found = {1: 0, size: 0}
    for t in range(SWEEPS):
        with tempfile.TemporaryDirectory() as tmp:
            cache: dict[tuple[int, int], Any] = {}

            def run(side: int, r: int, t: int = t, tmp: str = tmp, cache: dict = cache) -> Any:
                if (side, r) not in cache:
                    kind = effect if effect and side == VARIANTS else {}
                    seed = 1_000_000 * (t + 1) + 1000 * side + r
                    path = write_varied_run(Path(tmp), seed, 0.1, seconds=SECONDS, **kind)
                    cache[side, r] = readback.summary(path)
                return cache[side, r]

            for family in alarms:
                said = sweep(run, VARIANTS, family)
                harmless = [said[v] for v in said if effect is None or v != VARIANTS]
                alarms[family] += any(s in ("worse", "better") for s in harmless)
                found[family] += effect is not None and said[VARIANTS] == "worse"
    for family in alarms:
        how = "each comparison at 5 %" if family == 1 else f"the family of {family}"
        line = f"{label}, {how}: sweeps with a false alarm {wilson(alarms[family], SWEEPS)}"
        if effect is not None:
            line += f"; the real effect found worse {wilson(found[family], SWEEPS)}"
        print(line, flush=True)


if __name__ == "__main__":
    trials(f"{VARIANTS} harmless options", None)
    trials(f"{VARIANTS - 1} harmless options and one whose tail is 4x as frequent", {"tail_p": 8e-3})
