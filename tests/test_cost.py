"""What real time costs: stress-ng's own throughput read from its real output (and checked
against a second reading of the same text), a half-loaded CPU doing about half the work of a
full one in `compare`, memory and power recorded or missing, and a campaign repeated with its
spread recomputed from the repeats themselves."""

from __future__ import annotations

import io
import json
import math
import statistics
import subprocess
from csv import DictReader
from pathlib import Path

import pytest

from conftest import needs_root, needs_tools, read_json, rtlab, run_args
from rtlab.analysis import cost
from rtlab.plan.loads import BUILTIN
from rtlab.rundir import stressng

pytestmark = pytest.mark.host


def second_reading(text: str) -> dict[str, list[float]]:
    """The metrics table read another way: the rows after the header, split at blanks."""
    rows: dict[str, list[float]] = {}
    lines = [line.split("] ", 1)[1] for line in text.splitlines() if "] " in line and ": metrc:" in line]
    start = next(i for i, line in enumerate(lines) if line.split()[:3] == ["stressor", "bogo", "ops"])
    for line in lines[start + 2 :]:
        words = line.split()
        try:
            rows[words[0]] = [float(w) for w in words[1:]]
        except ValueError:
            break  # past the table
    return rows


@needs_tools
@pytest.mark.parametrize("load", [name for name, load in BUILTIN.items() if load.stress_ng])
def test_each_builtin_load_has_its_throughput_from_stress_ng_itself(tmp_path, load):
    argv = BUILTIN[load].argv(workers=1, scratch=str(tmp_path), timeout_s=2, cpus=None)
    assert argv is not None and "--metrics-brief" in argv
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    text = done.stdout + done.stderr
    parsed = stressng.parse(text)
    again = second_reading(text)
    stressors = [a for a in BUILTIN[load].stress_ng or () if a.startswith("--")]
    named = {a.lstrip("-") for a in stressors if not a.startswith(("--cpu-load", "--temp-path"))}
    assert set(parsed) == set(again) == named
    for name, row in parsed.items():
        values = again[name]
        assert [row.bogo_ops, row.real_s, row.usr_s, row.sys_s, row.ops_per_s, row.ops_per_cpu_s] == values[
            :6
        ]
        assert row.ops_per_s == pytest.approx(row.bogo_ops / row.real_s, rel=0.02, abs=0.02)


def test_metrics_of_other_stress_ng_releases_and_ratios():
    newer = (
        "stress-ng: metrc: [9] stressor bogo ops real time usr time sys time bogo ops/s bogo ops/s"
        " CPU used per RSS Max\n"
        "stress-ng: metrc: [9]          (secs) (secs) (secs) (real time) (usr+sys time) instance (%) (KB)\n"
        "stress-ng: metrc: [9] sock     1000   10.00   1.00   4.00   100.00   200.00   50.00   4096\n"
        "stress-ng: metrc: [9] matrix   600115.62 mult matrix ops per sec (geometic mean of 1 instances)\n"
    )
    older = "stress-ng: info:  [7] timer    5000   10.01   0.10   1.00   499.50   4545.45\n"
    assert stressng.parse(newer)["sock"].rss_max_kb == 4096 and set(stressng.parse(newer)) == {"sock"}
    assert stressng.parse(older)["timer"].ops_per_s == 499.5
    assert stressng.parse("stress-ng: info:  [7] successful run completed in 2.00s\n") == {}

    def work(**rates: float) -> cost.ThroughputJSON:
        rows = {n: {"ops_per_s": r} for n, r in rates.items()}
        return {"ops_per_s": sum(rates.values()), "stressors": rows, "reason": None}  # type: ignore[typeddict-item]

    # stressors count in units of their own: the geometric mean of their ratios, never a sum
    assert cost.ratio(work(sock=100, timer=5000), work(sock=50, timer=40000)) == 2.0
    assert cost.ratio(work(sock=100), work(timer=1)) is None
    assert cost.ratio(work(sock=100), work(sock=0)) == 0.0
    assert math.isclose(cost.ratio(work(a=3), work(a=1)) or 0, 0.333, abs_tol=0.001)
    assert cost.throughput(["sh", "-c", "sleep 9"], "")["reason"].startswith("sh is not stress-ng")  # type: ignore[index]
    assert cost.throughput([], "") is None  # idle ran nothing


LOADS_FILE = """
[loads.busy]
stress-ng = ["--cpu", "{workers}", "--cpu-method", "int64"%s]
"""


@pytest.mark.alone  # the work a load did is this machine's share of the CPU: a neighbour's changes it
@needs_root
@needs_tools
def test_half_the_load_does_about_half_the_work_in_compare(tmp_path):
    runs = []
    for name, extra in (("full", ""), ("half", ', "--cpu-load", "50"')):
        loads = tmp_path / f"{name}.toml"
        loads.write_text(LOADS_FILE % extra)
        out = tmp_path / name
        done = rtlab(*run_args(out, "busy", "6s", "--loads-file", str(loads), settle="1s"))
        assert done.returncode == 0, done.stderr
        runs.append(out)
    csv = rtlab("compare", *map(str, runs), "--labels", "full,half", "--format", "csv")
    assert csv.returncode == 0, csv.stderr
    rows = {r["label"]: r for r in DictReader(io.StringIO(csv.stdout)) if r["cpu"] == "all"}
    full, half = (read_json(p / "summary.json")["loads"]["busy"] for p in runs)
    rate = (
        half["throughput"]["stressors"]["cpu"]["ops_per_s"]
        / full["throughput"]["stressors"]["cpu"]["ops_per_s"]
    )
    assert float(rows["half"]["ops_ratio"]) == pytest.approx(rate, abs=0.006)
    # half the duty cycle: on a quiet machine about half the work; on one busy with other
    # work the full load loses more of its CPU to it than the half one does (seen: 76 %)
    assert 0.3 <= rate <= 0.85, f"--cpu-load 50 did {rate:.0%} of the full load's work"
    assert float(rows["full"]["ops_per_s"]) == full["throughput"]["ops_per_s"]
    # this machine has memory figures and no power sensor: the one is kept, the other missing
    used = full["resources"]
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    assert used["mem_total_kb"] == float(meminfo["MemTotal"].split()[0])
    assert 0 < used["mem_available_min_kb"] <= used["mem_total_kb"] and used["cyclictest_hwm_kb"] > 0
    if not list(Path("/sys/class/hwmon").glob("hwmon*/power*_input")):
        assert used["power_mw"] is None and "power_mw" in used["missing"]


@needs_root
@needs_tools
def test_a_repeated_campaign_pools_its_samples_and_shows_the_spread(tmp_path):
    out = tmp_path / "x3"
    # (a terminal wide enough for the spread's columns beside the sparkline)
    done = rtlab(*run_args(out, "idle,cpu", "1s", "--repeat", "3", settle="1s"), env={"COLUMNS": "250"})
    assert done.returncode == 0, done.stderr
    assert read_json(out / "repeats.json")["n"] == 3
    each = [read_json(out / f"repeat-{k}" / "summary.json") for k in (1, 2, 3)]
    combined = json.loads(rtlab("report", str(out), "--format", "json").stdout)
    assert combined["run"] == "x3" and combined["status"] == "complete"
    for load in ("idle", "cpu"):
        entry = combined["loads"][load]
        maxima = [s["loads"][load]["merged"]["max_us"] for s in each]
        assert entry["repeats"]["max_us"] == maxima
        assert entry["repeats"]["max_us_median"] == statistics.median(maxima)
        assert (entry["repeats"]["max_us_min"], entry["repeats"]["max_us_max"]) == (min(maxima), max(maxima))
        # the samples of every repeat, pooled: as many, and the worst of them
        assert entry["merged"]["samples"] == sum(s["loads"][load]["merged"]["samples"] for s in each)
        assert entry["merged"]["max_us"] == max(maxima)
    work = [s["loads"]["cpu"]["throughput"]["ops_per_s"] for s in each]
    assert combined["loads"]["cpu"]["repeats"]["ops_per_s"] == work
    assert combined["loads"]["cpu"]["throughput"]["ops_per_s"] == statistics.median(work)
    assert f"{statistics.median(work):.0f} ({min(work):.0f}–{max(work):.0f})" in done.stdout
