"""How often `rtlab bisect` names the right revision, a wrong one, or says it cannot tell, and
what it costs: over many planted ranges, through rtlab's whole path (a real git repository and
worktree, the prepare command, run folders read back, compare's verdicts), the runs synthetic
(tests/evt_data.py: cyclictest's JSON and time axis as the agent leaves them).

Each range has 16 to 64 revisions and one culprit from which the tail is four times as
frequent (tail_p 2e-3 -> 8e-3); a quarter of the ranges have no change at all. Every run of
either kind has a spread of its own (the body slower or faster by a few per cent, as runs on
one board are), so whole runs are what varies, and the machine drifts: each run's body is
0.2 % slower than the one before (BENCH_DRIFT), so what is measured late differs from what
was measured early for no fault of the revision's.

Goals: right >= 95 % of the planted ranges, wrong <= 2 % of all ranges, revisions measured
between the ends within log2(N) + 2. BENCH_BURST=3 puts a noisy hour in each range: three runs
in a row, wherever they fall, with the culprit's tail (a revision they fall on is placed bad,
a wrong turn the confirmation undoes); wrong must stay <= 2 % there too.

    BENCH_RANGES=40 .venv/bin/python bench/bench_bisect.py
    BENCH_WORSE=4e-3 BENCH_DRIFT=0.01 .venv/bin/python bench/bench_bisect.py   # harder: x2, 1 %/run
    BENCH_BURST=3 .venv/bin/python bench/bench_bisect.py   # a noisy hour in every range
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _common import wilson  # noqa: E402
from evt_data import write_run  # noqa: E402
from rtlab.bisect import drive  # noqa: E402
from rtlab.bisect.measured import Settings  # noqa: E402

RANGES = int(os.environ.get("BENCH_RANGES", "40"))
SECONDS = 20  # per synthetic run: 2 CPUs x 100,000 samples
TAIL = 2e-3
WORSE = float(os.environ.get("BENCH_WORSE", "8e-3"))  # the culprit's tail rate: x4 by default
SPREAD = 0.03  # run-to-run spread of the body (log-normal sigma)
DRIFT = float(
    os.environ.get("BENCH_DRIFT", "0.002")
)  # the body slower by this much per run: a warming machine
# a noisy hour: this many runs in a row, from a run drawn at random in each range, have the
# culprit's tail whatever they measure (a host busy with other work); 0: none
BURST = int(os.environ.get("BENCH_BURST", "0"))
warnings.simplefilter("ignore")


def _repo(path: Path, n: int, culprit: int | None) -> list[str]:
    path.mkdir()
    git = ["git", "-C", str(path)]
    subprocess.run([*git, "init", "-q"], check=True)
    for i in range(n):
        (path / "level").write_text("worse\n" if culprit is not None and i >= culprit else "as before\n")
        (path / "change").write_text(f"{i}\n")
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run(
            [*git, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", f"c{i}"], check=True
        )
    return subprocess.run([*git, "rev-list", "--reverse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.split()  # fmt: skip


def bisect(base: Path, n: int, culprit: int | None, seed: int) -> tuple[str, int | None, int, int]:
    """(result kind, the revision named, revisions measured between the ends, runs)."""
    shas = _repo(base / "repo", n, culprit)
    state, rng = base / "installed", np.random.default_rng(seed)
    made = iter(range(10**6))
    noisy = int(rng.integers(6, 30))  # the first run of the noisy hour (the ends take 6 or more)

    def measure(where: Path, name: str, subject: object) -> str:
        k = next(made)
        worse = state.read_text().startswith("worse") or noisy <= k < noisy + BURST
        body = float(np.exp(rng.normal(0, SPREAD))) * (1 + DRIFT * k)
        tail = WORSE if worse else TAIL
        run = write_run(base / "made", seed * 10**6 + k, 0.1, seconds=SECONDS, tail_p=tail, body=body)
        shutil.move(run, where)
        return "complete"

    doc = drive.index(base / "repo", shas[0], shas[-1], f"cp level {state}", "synthetic", {})
    (base / "out").mkdir()
    bisection = drive.Bisection(
        base / "out", base / "repo", drive.revisions_of(doc), f"cp level {state}", None, Settings(), measure,
        lambda line: None, doc,
    )  # fmt: skip
    result = bisection.run()
    named = shas.index(result["first"]) if result["kind"] == "culprit" else None
    between = sum(1 for s in doc["steps"] if 0 < s["index"] < n - 1)
    return result["kind"], named, between, result["measured"]["runs"]


def main() -> None:
    rng = np.random.default_rng(2026)
    right = wrong = cannot = none_said = over_steps = planted = 0
    runs, steps, start = [], [], time.perf_counter()
    for r in range(RANGES):
        n = int(rng.integers(16, 65))
        culprit = None if r % 4 == 3 else int(rng.integers(1, n))
        with tempfile.TemporaryDirectory() as tmp:
            kind, named, between, used = bisect(Path(tmp), n, culprit, r)
        planted += culprit is not None
        if kind == "culprit":
            right += named == culprit
            wrong += named != culprit
        elif kind == "cannot-tell":
            cannot += 1
        else:
            none_said += 1
        over_steps += between > math.log2(n) + 2
        runs.append(used)
        steps.append(between)
        said = f"culprit {named}" if kind == "culprit" else kind
        print(f"range {r + 1:3d}: {n} revisions, planted {culprit}, {said}, "
              f"{between} measured between, {used} runs", flush=True)  # fmt: skip
    took = time.perf_counter() - start
    print(f"\n{RANGES} ranges ({planted} planted, {RANGES - planted} with no change) in {took:.0f} s")
    print(f"right culprit of the planted ranges: {wilson(right, planted)} (goal >= 95 %)")
    print(f"wrong culprit of all ranges: {wilson(wrong, RANGES)} (goal <= 2 %)")
    print(
        f"cannot tell: {cannot}; no difference: {none_said} "
        f"(the {RANGES - planted} unchanged ranges should say so)"
    )
    print(f"revisions measured between the ends: median {np.median(steps):g}, max {max(steps)}; "
          f"over log2(N) + 2: {over_steps} of {RANGES}")  # fmt: skip
    print(f"runs per bisection: median {np.median(runs):g}, max {max(runs)}; per revision measured: "
          f"{sum(runs) / max(sum(steps) + 2 * RANGES, 1):.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
