"""A lab's years in the history store: BENCH_RUNS runs (default 100,000, 5 loads x 4 CPUs)
over BENCH_BOARDS boards, and a month of 5-minute monitor blocks (8,640 a board, one load x 4
CPUs) for each, on SQLite or a PostgreSQL (BENCH_DB=postgresql://USER@HOST/DB, or
BENCH_DB=postgresql for a server of the bench's own: Debian's, as `make test-setup` installs it).

Printed: the rate of adding (runs a second, one transaction a run as `history add` does), a
trend query of one board's load over its whole series (goal under 1 s), `regressions` over one
board's whole series of one load (Otava's change points and the newest run's comparison; the
runs' folders are synthetic, so compare's confirmations read nothing and say so: the cost
measured is the store's and Otava's; goal under 5 s), and the store's size (SQLite).

    BENCH_RUNS=20000 .venv/bin/python bench/bench_lab_years.py            # a quicker look
    BENCH_DB=postgresql BENCH_RUNS=10000 BENCH_BOARDS=1 BENCH_MONITOR_BLOCKS=0 \
        .venv/bin/python bench/bench_lab_years.py                         # one board, PostgreSQL
    .venv/bin/python bench/bench_lab_years.py                             # the goal's size
"""

from __future__ import annotations

import copy
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bench_history import KERNELS, five_loads  # noqa: E402
from evt_data import write_run  # noqa: E402
from rtlab.history import changes, trend  # noqa: E402
from rtlab.history.db import Store  # noqa: E402
from rtlab.history.index import Context, rows_of  # noqa: E402
from rtlab.rundir import readback  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "100000"))
BOARDS = int(os.environ.get("BENCH_BOARDS", "10"))
BLOCKS = int(os.environ.get("BENCH_MONITOR_BLOCKS", "8640"))  # a month of 5-minute blocks
DB = os.environ.get("BENCH_DB")


def stamp(n: int, step_s: int) -> str:
    t = 1_767_225_600 + n * step_s  # from 2026-01-01
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def add(history: Store, base: Path, summary: dict, uid: str, board: str, started: str) -> None:
    summary["started"] = started
    summary["system"]["hostname"] = board
    rows = rows_of(str(base / uid), uid, {"uid": uid}, None, summary, Context(),
                   "2026-11-25T00:00:00Z")  # type: ignore[arg-type]  # fmt: skip
    history.insert(base / uid, rows)


def main() -> None:
    if DB == "postgresql":  # a server of the bench's own, as the tests start one
        from conftest import postgres

        with postgres("rtlab", "history") as port:
            measure(f"postgresql://rtlab@127.0.0.1:{port}/history")
    else:
        measure(DB)


def measure(db: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        runs = [
            five_loads(readback.summary(write_run(base, k, 0.1, seconds=600, cpus=2)), k)
            for k in range(KERNELS)
        ]
        block = copy.deepcopy(runs[0])
        block["loads"] = {"idle": block["loads"]["idle"]}
        block["plan"]["loads"], block["plan"]["duration_s"] = ["idle"], 300
        history = Store(db or str(base / "history.db"))
        started = time.perf_counter()
        for n in range(RUNS):
            kernel = runs[n // (RUNS // KERNELS or 1) % KERNELS]  # a new kernel every tenth of the years
            add(history, base, kernel, f"run-{n:06d}", f"board-{n % BOARDS}", stamp(n // BOARDS, 3600))
        runs_s = time.perf_counter() - started
        started = time.perf_counter()
        for n in range(BLOCKS * BOARDS):
            add(history, base, block, f"block-{n:07d}", f"board-{n % BOARDS}", stamp(n // BOARDS, 300))
        blocks_s = time.perf_counter() - started
        started = time.perf_counter()
        series = history.series("board-0", "cpu", maxima=False)  # as trend and regressions read it
        points = trend.points(series, "p99.99", None)
        trend_s = time.perf_counter() - started
        started = time.perf_counter()
        series = history.series("board-0", "cpu", maxima=False)  # as trend and regressions read it
        found = changes.regressions("board-0", "cpu", series, "p99.99", None, lambda r: None)
        regressions_s = time.perf_counter() - started
        history.close()
        size = sum(f.stat().st_size for f in base.glob("history.db*"))
    total = RUNS + BLOCKS * BOARDS
    print(f"store: {'PostgreSQL' if db else 'SQLite'}; {RUNS} runs (5 loads x 4 CPUs) and {BLOCKS * BOARDS} "
          f"monitor blocks over {BOARDS} boards")  # fmt: skip
    print(f"adding: runs {RUNS / runs_s:.0f}/s ({runs_s:.0f} s), blocks {BLOCKS * BOARDS / blocks_s:.0f}/s "
          f"({blocks_s:.0f} s)")  # fmt: skip
    print(f"trend of one board's load ({len(series)} runs, {len(points)} kernels, intervals over runs): "
          f"{trend_s:.2f} s; goal < 1 s: ratio {trend_s:.2f}")  # fmt: skip
    print(f"regressions over that series ({len(found)} change(s) and the newest): {regressions_s:.2f} s; "
          f"goal < 5 s: ratio {regressions_s / 5:.2f}")  # fmt: skip
    if not db:
        print(f"store size: {size / 2**20:.0f} MiB, {size / total / 1024:.1f} kB a run or block")


if __name__ == "__main__":
    main()
