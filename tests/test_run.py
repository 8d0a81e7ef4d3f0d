"""`rtlab run` on this machine with real cyclictest and stress-ng: the statistics must
equal those recomputed here from cyclictest's raw JSON, and cyclictest's own figures."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from conftest import needs_root, needs_tools, processes_in, read_json, rtlab, run_args
from rtlab.analysis.stats import PERCENTILES

pytestmark = [pytest.mark.host, needs_root, needs_tools]
LOADS = ["idle", "cpu", "os", "memory", "storage"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("runs") / "this-host"
    done = rtlab("run", "--duration", "2s", "--settle", "1s", "--out", str(out), "--name", "host")
    assert done.returncode == 0, done.stderr
    return out, done.stdout


def raw_samples(thread: dict) -> np.ndarray:
    values = np.array([int(v) for v in thread["histogram"]], dtype=np.int64)
    counts = np.array(list(thread["histogram"].values()), dtype=np.int64)
    return np.repeat(values, counts)


def expected(samples: np.ndarray) -> dict:
    out = {
        "samples": len(samples),
        "min_us": int(samples.min()),
        "max_us": int(samples.max()),
        "avg_us": float(samples.mean()),
        "stdev_us": float(samples.std()),
    }
    for key, q in PERCENTILES.items():
        out[key] = int(np.percentile(samples, q, method="inverted_cdf"))
    return out


def assert_stats(got: dict, want: dict) -> None:
    for key, value in want.items():
        assert got[key] == pytest.approx(value, abs=1e-3), key


def test_every_load_is_measured_on_every_cpu(run):
    out, stdout = run
    manifest = read_json(out / "run.json")
    assert manifest["status"] == "complete"
    assert {k: v["status"] for k, v in manifest["loads"].items()} == dict.fromkeys(LOADS, "complete")
    assert manifest["plan"]["cpu_count"] == os.cpu_count()
    for load in LOADS:
        data = read_json(out / "loads" / load / "cyclictest.json")
        assert data["num_threads"] == os.cpu_count()
        assert sorted(t["cpu"] for t in data["thread"].values()) == list(range(os.cpu_count()))
        assert load in stdout
    # N = online CPUs, as the study's `stress-ng --matrix 4` on a 4-core board.
    assert f"dispatching hogs: {os.cpu_count()} matrix" in (out / "loads/cpu/load.log").read_text()
    assert not (out / "loads/storage/scratch").exists()
    assert processes_in(out) == []


def test_statistics_equal_an_independent_computation(run):
    out, _ = run
    summary = read_json(out / "summary.json")
    for load in LOADS:
        data = read_json(out / "loads" / load / "cyclictest.json")
        threads = sorted(data["thread"].values(), key=lambda t: t["cpu"])
        merged_samples = []
        for t in threads:
            got = summary["loads"][load]["cpus"][str(t["cpu"])]
            samples = raw_samples(t)
            merged_samples.append(samples)
            overflows = t["cycles"] - len(samples)
            assert got["overflows"] == overflows
            assert got["samples"] == t["cycles"]
            if overflows:
                assert "stdev_us" in got["lower_bounds"] and got["max_us"] == t["max"]
                continue
            assert_stats(got, expected(samples))
            # and cyclictest's own figures, which it computes without the histogram
            assert (got["min_us"], got["max_us"]) == (t["min"], t["max"])
            assert got["avg_us"] == pytest.approx(t["avg"], abs=0.006)
        merged = summary["loads"][load]["merged"]
        if merged["overflows"] == 0:
            assert_stats(merged, expected(np.concatenate(merged_samples)))
            assert merged["lower_bounds"] == []


def test_sysinfo_describes_this_kernel(run):
    out, _ = run
    info = read_json(out / "sysinfo.json")
    assert info["kernel"]["release"] == os.uname().release
    assert info["kernel"]["version"] == Path("/proc/version").read_text().strip()
    assert info["kernel"]["cmdline"] == Path("/proc/cmdline").read_text().strip()
    assert info["cpus"]["count"] == os.cpu_count()
    assert info["tools"]["cyclictest"] and info["tools"]["stress-ng"]
    realtime = Path("/sys/kernel/realtime")
    if realtime.exists():
        assert info["kernel"]["realtime"] == realtime.read_text().strip()
    else:
        assert info["kernel"]["realtime"] is None and "/sys/kernel/realtime" in info["missing"]
    assert info["derived"]["preemption"]["model"] in {"PREEMPT_RT", "PREEMPT", "VOLUNTARY", "NONE", "DYNAMIC"}


def test_report_formats_agree_with_the_summary(run):
    out, _ = run
    summary = read_json(out / "summary.json")

    done = rtlab("report", str(out), "--format", "json")
    assert done.returncode == 0
    assert json.loads(done.stdout)["loads"] == summary["loads"]

    rows = list(csv.DictReader(io.StringIO(rtlab("report", str(out), "--format", "csv").stdout)))
    assert len(rows) == len(LOADS) * (1 + os.cpu_count())
    for row in rows:
        entry = summary["loads"][row["load"]]
        stats = entry["merged"] if row["cpu"] == "all" else entry["cpus"][row["cpu"]]
        assert int(row["max_us"]) == stats["max_us"] and int(row["samples"]) == stats["samples"]
        assert float(row["stdev_us"]) == pytest.approx(stats["stdev_us"])

    md = rtlab("report", str(out), "--format", "md").stdout.splitlines()
    for load in LOADS:
        row = next(line for line in md if line.startswith(f"| {load} |"))
        m = summary["loads"][load]["merged"]
        cells = [c.strip().lstrip("≥") for c in row.strip("|").split("|")][1:]
        want = [int(np.floor(m[k] + 0.5)) for k in ("avg_us", "stdev_us", "min_us", "max_us")]
        assert [int(c) for c in cells] == want


def test_compare_puts_runs_side_by_side(run, tmp_path):
    out, _ = run
    done = rtlab("compare", str(out), str(out), "--labels", "Real-time,Mainline", "--format", "md")
    assert done.returncode == 0
    head = done.stdout.splitlines()[0]
    assert "Real-time Avg (µs)" in head and "Mainline Max (µs)" in head
    bad = rtlab("compare", str(out), str(out), "--labels", "only-one")
    assert bad.returncode == 2 and "one per run" in bad.stderr


def test_deadline_gate_exit_code_and_junit(tmp_path):
    # 1 µs cannot be met: the gate must fail with exit code 1 and say which loads missed.
    junit = tmp_path / "results.xml"
    run = tmp_path / "gate"
    done = rtlab(*run_args(run, "idle", "1s", "--deadline", "1us", "--junit", str(junit)))
    assert done.returncode == 1, done.stderr
    assert "deadline 1 µs missed: gate idle" in done.stderr
    case = ET.parse(junit).getroot().find("testsuite/testcase")
    assert case is not None and case.get("name") == "idle"
    failure = case.find("failure")
    max_us = read_json(run / "summary.json")["loads"]["idle"]["merged"]["max_us"]
    assert failure is not None and f"max latency {max_us} µs exceeds the deadline 1 µs" in failure.get(
        "message", ""
    )
    # the same run against a deadline it meets: exit 0
    ok = rtlab("report", str(run), "--deadline", f"{max_us}us")
    assert ok.returncode == 0 and "pass (+0)" in ok.stdout


def test_a_study_that_misses_its_deadline_shows_and_writes_its_verdicts_first(tmp_path):
    """The deadline's exit 1 comes after the study's reports and verdict table, as compare's
    does (cli/campaigns.py: present's deferred exit), not in their place."""
    study = tmp_path / "study.toml"
    study.write_text(
        '[study]\nname = "gate"\nloads = ["idle"]\nduration = "1s"\nsettle = "0s"\ndeadline = "1us"\n'
        '[targets]\nHost = "local"\n[stages.first]\n[stages.second]\n'
    )
    out = tmp_path / "study"
    done = rtlab("study", str(study), "--out", str(out), timeout=600)
    assert done.returncode == 1, done.stderr
    assert "deadline 1 µs missed: " in done.stderr, done.stderr
    # the verdicts: the second stage against the first, in the table and in each report
    table, verdicts = done.stdout.split("Against first: is the difference real?")
    assert table.count("MISS") == 2, done.stdout
    row = r"second\s*│\s*idle\s*│\s*(same|better|worse|unknown|refused)\s*│"
    assert re.search(row, verdicts), done.stdout
    runs = read_json(out / "study.json")["runs"]
    assert sorted(r["status"] for r in runs.values()) == ["complete", "complete"]
    report = read_json(out / "report.json")
    assert len(report["runs"]) == 2, report.keys()
    for name in ("report.md", "report.html"):
        assert "second" in (out / name).read_text()


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs a housekeeping CPU besides the RT one")
def test_rt_cpus_measure_there_and_load_the_others(tmp_path):
    last = os.cpu_count() - 1
    out = tmp_path / "split"
    done = rtlab(*run_args(out, "cpu", "1s", "--rt-cpus", str(last)))
    assert done.returncode == 0, done.stderr
    data = read_json(out / "loads/cpu/cyclictest.json")
    assert [t["cpu"] for t in data["thread"].values()] == [last]
    assert list(read_json(out / "summary.json")["loads"]["cpu"]["cpus"]) == [str(last)]
    stress = (out / "loads/cpu/load.argv").read_text().split()
    assert stress[stress.index("--taskset") + 1] == ("0" if last == 1 else f"0-{last - 1}")
    assert stress[stress.index("--matrix") + 1] == str(last)  # N = the housekeeping CPUs


@needs_root
@needs_tools
def test_a_board_without_an_applet_the_agent_needs_is_refused_in_one_line(busybox_path, tmp_path):
    # A Buildroot-like PATH of busybox applets with no `stat`, and dash as sh: busybox's own ash
    # would find its applets without the PATH.
    board = tmp_path / "bin"
    board.mkdir()
    for entry in Path(busybox_path).iterdir():
        if entry.name not in ("stat", "sh"):
            os.symlink(os.readlink(entry), board / entry.name)
    os.symlink(shutil.which("dash") or "/bin/dash", board / "sh")
    out = tmp_path / "run"
    done = rtlab(*run_args(out, "idle", "1s"), env={"PATH": str(board)})
    assert done.returncode == 2, done.stderr
    said = done.stderr.strip().splitlines()
    assert "lacks stat, which rtlab's agent runs" in said[-1] and "busybox" in said[-1], said
    assert not (out / "summary.json").exists()
