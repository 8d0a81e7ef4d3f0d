"""Limits from the history (rtlab history limit, rtlab run --deadline history) over real runs.

Six quiet runs of 3 s of one load "work" (a sleeping command beside cyclictest; a time axis of
100 ms blocks) are the accepted kernel; a limit is derived from them, and a run where
tests/spin.c, a SCHED_FIFO 99 busy loop, takes CPU 0 for 250 ms at a time must miss it.
18 s of history hold a limit for 1 s runs at 20 % false alarms whatever the host's noise (the
empirical bound needs about 3 D / alpha = 15 s when the fit fails its check); at 1 % for 3 s
runs they would be refused on a noisy host, as they should. The figures the
limit rests on (its windows, their maxima, the runs) are recomputed from the run folders; the
fit itself is scipy's and is checked in the bench (bench/bench_limit.py) against held-out runs.
"""

from __future__ import annotations

import json
import math
import re
import socket
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from conftest import needs_root, needs_tools, read_json, rtlab, spin_binary
from rtlab.history import limit
from rtlab.history.changes import Change

pytestmark = pytest.mark.spikes
RUN = ("--loads", "work", "--settle", "0s", "--block", "100ms")


@dataclass(frozen=True)
class Lab:
    quiet: Path  # a campaign of 6 repeats
    busy_loads: Path
    db: str


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Lab:
    base = tmp_path_factory.mktemp("limit")
    quiet, busy = base / "quiet.toml", base / "busy.toml"
    quiet.write_text('[loads.work]\ncommand = ["sleep", "3600"]\n')
    spin = spin_binary(base)
    # 250 ms of every 500: far beyond what a busy shared host does to the quiet runs (7 ms seen
    # while a kernel built beside them; 30 ms bursts once stayed under a limit that such a
    # host's hiccups in the quiet runs had raised, and 80 ms bursts under one of 142 ms, from
    # quiet runs whose maxima reached 20 ms beside guests booting)
    busy.write_text(f'[loads.work]\ncommand = ["{spin}", "0", "250", "0", "100000", "0.25"]\non = "all"\n')
    done = rtlab("run", "--loads-file", str(quiet), *RUN, "--duration", "3s", "--repeat", "6",
                 "--out", str(base / "quiet"), timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    db = str(base / "history.db")
    done = rtlab("history", "add", str(base / "quiet"), "--db", db)
    assert done.returncode == 0, done.stderr
    return Lab(base / "quiet", busy, db)


def _limit(db: str, *more: str) -> dict | None:
    """The limit, or None when the history cannot give one (said in one line, exit 2)."""
    done = rtlab("history", "limit", "--db", db, "--load", "work", "--format", "json", *more, timeout=300)
    if done.returncode == 2:
        # too uncertain (a hiccup), too short, or not stationary: the quiet runs' maxima rose run
        # after run once (Kendall tau 1.00) as the boards beside them started; each one line
        refusals = ("too uncertain", "too short", "not stationary")
        assert any(f"work: no limit: {why}" in done.stderr for why in refusals), done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        return None
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["limits"][0]


@pytest.mark.host
@needs_root
@needs_tools
def test_a_limit_from_real_runs_and_a_worse_run_misses_it(lab, tmp_path):
    found = _limit(lab.db, "--duration", "1s", "--false-alarm", "20%")
    if found is None:
        # a shared host's hiccup in the quiet runs (a 100 ms window was seen) makes the bound
        # many times the estimate: refused, and a run judged by it is refused before measuring
        never = tmp_path / "never"
        done = rtlab("run", "--loads-file", str(lab.busy_loads), *RUN, "--duration", "1s", "--deadline",
                     "history@20%", "--out", str(never), env={"RTLAB_HISTORY_DB": lab.db})  # fmt: skip
        assert done.returncode == 2 and "no limit for work" in done.stderr
        assert not never.exists()
        return
    assert found["refused"] is None, found
    # the quiet runs, less any before a change point the noise of a shared host made (said)
    quiet = sorted(str(r.resolve()) for r in lab.quiet.glob("repeat-*"))
    assert set(found["runs"]) <= set(quiet) and len(found["runs"]) >= limit.MIN_RUNS
    assert (len(found["runs"]) < len(quiet)) == bool(found["left_out"]), found["left_out"]
    runs = [Path(r) for r in found["runs"]]
    # the windows it rests on, recomputed from each run's time axis (CPUs merged)
    window = found["window_s"]
    blocks = round(window / 0.1)
    maxima, measured_s = [], 0.0
    for run in runs:
        axis = read_json(run / "summary.json")["loads"]["work"]["timeline"]
        merged = axis["merged"]
        assert axis["block_s"] == pytest.approx(0.1)
        maxima += [max(merged[k : k + blocks]) for k in range(0, len(merged) - blocks + 1, blocks)]
        measured_s += len(merged) * axis["block_s"]
    assert found["windows"] == len(maxima)
    assert found["method"] in ("gev", "empirical")
    low, high = found["interval_us"]
    if found["method"] == "gev":  # exceeded by one 1 s run in five: above most 100 ms windows' maxima
        assert found["limit_us"] >= np.median(maxima)
        assert low <= found["estimate_us"] <= found["limit_us"] <= high
    else:  # an order statistic of the windows, above the estimate
        assert found["limit_us"] in maxima and found["estimate_us"] <= found["limit_us"]
    # the hours its runs measured, block by block (a 3 s run on a starved host has fewer than 30)
    assert found["run_hours"] == pytest.approx(measured_s / 3600, abs=1e-4)

    # run --deadline history: the same limit judges a run where the busy loop makes it late
    out = tmp_path / "busy"
    done = rtlab("run", "--loads-file", str(lab.busy_loads), *RUN, "--duration", "1s", "--deadline",
                 "history@20%", "--out", str(out), env={"RTLAB_HISTORY_DB": lab.db}, timeout=300)  # fmt: skip
    assert done.returncode == 1, done.stderr
    kept = read_json(out / "deadline.json")
    assert kept["limits_us"] == {"work": found["limit_us"]}
    assert kept["board"] == socket.gethostname() and kept["false_alarm"] == 0.2
    worst = read_json(out / "summary.json")["loads"]["work"]["merged"]["max_us"]
    assert worst > found["limit_us"]
    assert f"work ({worst} µs > {found['limit_us']} µs)" in done.stderr
    assert "history (0.2 false alarms per run) missed" in done.stderr


@pytest.mark.host
@needs_root
@needs_tools
def test_history_limit_refuses_with_a_reason(lab, tmp_path):
    few = str(tmp_path / "few.db")
    done = rtlab("history", "add", *(str(p) for p in sorted(lab.quiet.glob("repeat-*"))[:3]), "--db", few)
    assert done.returncode == 0, done.stderr
    done = rtlab("history", "limit", "--db", few, "--load", "work")
    assert done.returncode == 2
    short = re.search(r"too short: (\d) accepted run\(s\)", done.stderr)
    assert short and "5 or more" in done.stderr, done.stderr
    # Three runs of one kernel; this VM's own hiccups (up to 27 ms) can make the third differ
    # from the first two enough to stand as a regression, which is then not accepted, and said.
    assert short[1] == "3" or (short[1] == "2" and "which stands (unaccepted)" in done.stderr), done.stderr
    for args, said in [
        (("--false-alarm", "60%"), "--false-alarm 60%"),
        (("--false-alarm", "x"), "--false-alarm 'x'"),
        (("--duration", "soon"), "bad duration"),
    ]:
        done = rtlab("history", "limit", "--db", lab.db, *args)
        assert done.returncode == 2 and said in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    done = rtlab("run", "--loads", "idle", "--duration", "1s", "--deadline", "history:nosuch",
                 "--out", str(tmp_path / "never"), env={"RTLAB_HISTORY_DB": lab.db})  # fmt: skip
    assert done.returncode == 2 and "no run of board 'nosuch'" in done.stderr
    assert not (tmp_path / "never").exists()  # refused before anything was measured
    done = rtlab("run", "--loads", "idle", "--duration", "1s", "--deadline", "history",
                 "--out", str(tmp_path / "never"), env={"RTLAB_HISTORY_DB": lab.db})  # fmt: skip
    assert done.returncode == 2 and "no limit for idle" in done.stderr
    done = rtlab("run", "--loads", "idle", "--duration", "1s", "--deadline", "history@90%",
                 "--out", str(tmp_path / "never"), env={"RTLAB_HISTORY_DB": lab.db})  # fmt: skip
    assert done.returncode == 2 and "--deadline history@90%: the rate 90%" in done.stderr


@pytest.mark.host
@needs_root
@needs_tools
def test_a_limit_for_month_long_runs_answers_and_one_beyond_a_year_is_refused(lab):
    """--duration 30d over six short runs answers (a limit, or one line saying why not); a
    duration no run can have is one line. The timeout only guards against a hang."""
    month = ("--load", "work", "--duration", "30d", "--format", "json")
    done = rtlab("history", "limit", "--db", lab.db, *month, timeout=60)
    assert "Traceback" not in done.stderr, done.stderr
    if done.returncode == 0:
        found = json.loads(done.stdout)["limits"][0]
        assert found["duration_s"] == 30 * 86400 and found["windows"] >= limit.MIN_WINDOWS, found
    else:
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "work: no limit: " in done.stderr, done.stderr
    done = rtlab("history", "limit", "--db", lab.db, "--duration", "367d", timeout=60)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "--duration 367d: a run lasts at most 366d" in done.stderr


# --- the runs a limit rests on, and its refusals (pure) ---------------------------------


def _rows(maxima: list[list[int]]) -> list[dict]:
    return [{"id": k, "uid": f"u{k}", "path": f"run-{k}", "started": f"2026-01-{k + 1:02d}", "duration_s": 60,
             "block_s": 1.0, "maxima": m, "max_us": max(m)} for k, m in enumerate(maxima)]  # fmt: skip


def _change(rows: list[dict], i: int, kind: str, holds: bool = False, accepted: bool = False) -> Change:
    c = Change("b", "idle", i, rows[i], kind, None, None, None, "")
    c.holds, c.accepted = holds, {"reason": "known"} if accepted else None
    return c


@pytest.mark.host
def test_the_runs_a_limit_rests_on():
    rows = _rows([[10] * 60] * 12)
    # a standing regression at 8: the limit is the level before it
    used, said = limit.accepted_runs(rows, [_change(rows, 8, "regression", holds=True)], None)
    assert [r["id"] for r in used] == list(range(8)) and "4 run(s) from the regression at run-8" in said
    # an accepted regression at 4 starts the level the board is at now
    used, said = limit.accepted_runs(rows, [_change(rows, 4, "regression", accepted=True)], None)
    assert [r["id"] for r in used] == list(range(4, 12)) and "4 run(s) before the change at run-4" in said
    # both: from the accepted one to the standing one
    found = [_change(rows, 3, "improvement"), _change(rows, 9, "regression", holds=True)]
    assert [r["id"] for r in limit.accepted_runs(rows, found, None)[0]] == list(range(3, 9))
    # a baseline set later than the last change
    used, said = limit.accepted_runs(rows, [], rows[6])
    assert [r["id"] for r in used] == list(range(6, 12)) and "before the baseline" in said


def _longest_window(rows: list[dict], duration_s: float) -> int:
    """Every window length from D down, as the limit once searched: the longest (in blocks)
    that gives MIN_WINDOWS windows."""
    for b in range(int(duration_s), 0, -1):
        if sum(len(limit._windows(r, b)) for r in rows) >= limit.MIN_WINDOWS:
            return b
    return 1


@pytest.mark.unit
def test_the_window_is_the_longest_that_gives_enough_maxima_whatever_the_duration():
    rows = _rows([[10] * 60] * 12)  # 12 runs of 60 one-second blocks
    for duration in (600, 30 * 86400, 366 * 86400):
        per_run, w, k = limit.window_maxima(rows, duration)
        assert w == _longest_window(rows, 600) == 6 and k == duration / 6
        assert sum(map(len, per_run)) == 120
    # blocks that measured nothing (None) leave windows out: fewer lengths give MIN_WINDOWS,
    # and below LADDER_STEP blocks the ladder tries every length, as the search once did
    holes = _rows([[10] * 60] * 12)
    for k, row in enumerate(holes):
        row["maxima"] = [None if i % 7 == k % 7 else 10 for i in range(60)]
    per_run, w, _ = limit.window_maxima(holes, 30 * 86400)
    assert sum(map(len, per_run)) >= limit.MIN_WINDOWS
    assert w == _longest_window(holes, 600) < 6


@pytest.mark.host
def test_a_drifting_history_or_a_short_one_is_refused():
    rng = np.random.default_rng(3)
    drifting = _rows([[int(v) for v in 20 + 2 * k + rng.integers(0, 3, 60)] for k in range(10)])
    found = limit.derive("b", "idle", drifting, [], None, 0.01)
    assert found.limit_us is None and found.refused.startswith("not stationary")
    short = _rows([[int(v) for v in 20 + rng.integers(0, 3, 60)] for _ in range(4)])
    found = limit.derive("b", "idle", short, [], None, 0.01)
    assert found.refused.startswith("too short: 4 accepted run(s)")


@pytest.mark.host
def test_a_limit_of_gev_maxima_bounds_the_true_quantile():
    """Block maxima drawn from a known GEV: for a 60 s run at 1 %, the estimate is near the
    true quantile (the 1 - 0.01 quantile of the maximum of 60 blocks), the interval holds it
    and the limit (the estimate's upper 95 % bound) is above the estimate."""
    from scipy import stats

    mu, sigma, xi = 50.0, 4.0, 0.05
    rng = np.random.default_rng(11)
    draw = lambda n: stats.genextreme.rvs(-xi, loc=mu, scale=sigma, size=n, random_state=rng)  # noqa: E731
    rows = _rows([[int(v) for v in np.floor(draw(60))] for _ in range(20)])
    found = limit.derive("b", "idle", rows, [], None, 0.01, 60)
    assert found.method == "gev" and found.windows >= limit.MIN_WINDOWS
    truth = stats.genextreme.ppf(0.99 ** (1 / 60), -xi, loc=mu, scale=sigma)
    assert math.isclose(found.estimate_us, truth, rel_tol=0.1), (found.estimate_us, truth)
    low, high = found.interval_us
    assert low <= truth <= high and low <= found.estimate_us <= found.limit_us <= high


@pytest.mark.host
def test_a_bound_far_above_its_estimate_is_refused():
    """Few maxima of a heavy tail: the bound can be many times the estimate (0.9 s from maxima
    of 3 to 7 ms was seen on a busy host); refused as too uncertain, never used as a limit."""
    found = limit.Limit("b", "idle", 0.01, 60, limit_us=899_486, estimate_us=9_000, windows=95)
    assert limit._settled(found, "a heavy tail").limit_us is None
    assert found.refused.startswith("too uncertain: the 95 % bound 899486 µs is 99.9 times the estimate")
    kept = limit.Limit("b", "idle", 0.01, 60, limit_us=12_000, estimate_us=9_000, windows=95)
    assert limit._settled(kept, "").limit_us == 12_000 and kept.refused is None
