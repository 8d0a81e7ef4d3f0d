"""When it happened: a spike injected at a known moment on a known CPU must appear in the
right block of that CPU's series and in the spike list within 100 ms, on the campaign's
time axis; the series agrees with the histogram; cyclictest's verbose output is parsed
robustly (cut, garbled, more spikes than nodes, none)."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from conftest import (
    event_seen,
    needs_root,
    needs_tools,
    processes_named,
    read_json,
    rtlab,
    run_args,
    start_rtlab,
    wait_for,
)
from rtlab.rundir import timeline

pytestmark = [pytest.mark.host, pytest.mark.spikes, needs_root, needs_tools]
CPU = os.cpu_count() - 1  # the CPU the spike is injected on
# above this VM's own hiccups on a busy host (53.7 ms seen on the injected CPU, where the block
# holding the spike must be the highest) and within the default histogram's 100 ms, where a
# neighbour's run measuring beside it counts it
SPIN_MS = 90

# Pins itself to CPU, says when (CLOCK_MONOTONIC), then spins SPIN_MS at SCHED_FIFO 99: the
# measuring thread on that CPU, also FIFO 99, cannot preempt it and wakes late by up to that.
INJECT = f"""
import os, time
os.sched_setaffinity(0, {{{CPU}}})
start = time.monotonic()
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(99))
while time.monotonic() - start < {SPIN_MS} / 1000:
    pass
print(start)
"""


def _measuring(run: Path) -> bool:
    """Whether the run's cyclictest is measuring: a thread of it at SCHED_FIFO. Its start (the
    main thread, SCHED_OTHER) once took 10 s on a host busy with two workers' tests, and a spin
    timed from the measure-start event alone ran before it measured."""
    if not event_seen(run / "events", "measure-start"):
        return False
    # the session's: a module's fixture runs before its first test has a mark of its own
    for pid in processes_named("cyclictest", session=True):
        with contextlib.suppress(OSError):
            if any(
                os.sched_getscheduler(int(t.name)) == os.SCHED_FIFO
                for t in Path(f"/proc/{pid}/task").iterdir()
            ):
                return True
    return False


def _inject(run: Path) -> float:
    """A run of idle with the spin injected 5 s into its 20 s of measuring: the spin's start."""
    proc = start_rtlab(*run_args(run, "idle", "20s", "--block", "500ms", "--spike-threshold", "5ms"))
    try:
        wait_for(lambda: _measuring(run))
        time.sleep(5)
        spun = subprocess.run([sys.executable, "-c", INJECT], capture_output=True, text=True, check=True)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    return float(spun.stdout)


@pytest.fixture(scope="module")
def injected(tmp_path_factory) -> tuple[Path, float]:
    """The injected run, measured once more (a warning in pytest's summary) when the host ran
    the spin too late to fall in the measurement, or kept cyclictest's main thread from printing
    the series (rtlab's time-axis warning says so): on a host busy with both workers' tests a
    spin asked for 5 s in once began 29.6 s in, 0.8 s before the end, and the series held 4 of
    40 blocks."""
    folder = tmp_path_factory.mktemp("timeline")
    for attempt in (1, 2):
        run = folder / f"run-{attempt}"
        start = _inject(run)
        summary = read_json(run / "summary.json")
        at, end = start - summary["clock"]["uptime_s"], summary["loads"]["idle"]["phases"]["measure_end"]
        why = (
            [f"the spin began {at:.1f} s in, {end - at:.1f} s before the measurement's end"]
            if at > end - 2
            else []
        )
        why += [w["message"] for w in summary["warnings"] if "fell behind" in w["message"]]
        if not why or attempt == 2:
            return run, start
        warnings.warn(f"measured again: {why[0]}", stacklevel=2)
    raise AssertionError("not reached")


def test_the_injected_spike_is_in_the_right_block_and_the_spike_list(injected):
    run, start_mono = injected
    summary = read_json(run / "summary.json")
    axis = summary["loads"]["idle"]["timeline"]
    at = start_mono - summary["clock"]["uptime_s"]  # the spin's start on the campaign's time axis
    assert axis["block_s"] == 0.5
    # the spike list: this CPU, about SPIN_MS late, within 100 ms of the spin's start
    found = [
        (t, us)
        for t, cpu, us in zip(
            axis["spikes"]["t_s"], axis["spikes"]["cpu"], axis["spikes"]["latency_us"], strict=True
        )
        if cpu == CPU and us >= SPIN_MS * 1000 * 0.6
    ]
    assert found, axis["spikes"]
    assert min(abs(t - at) for t, _ in found) < 0.1 + SPIN_MS / 1000
    # the series: the block holding that moment (± 1) holds the spike, on that CPU
    block = int((at - axis["start_s"]) / axis["block_s"])
    series = axis["cpus"][str(CPU)]
    near = series[max(block - 1, 0) : block + 2]
    assert max(near) >= SPIN_MS * 1000 * 0.6, (block, series)
    assert max(near) == max(series)  # and nowhere else as high


def test_series_and_histogram_agree(injected):
    run, _ = injected
    summary = read_json(run / "summary.json")
    entry = summary["loads"]["idle"]
    axis = entry["timeline"]
    assert axis["check"] in ("ok", "unverified")
    for cpu, stats in entry["cpus"].items():
        assert max(axis["cpus"][cpu]) <= stats["max_us"]
    assert not [w for w in summary["warnings"] if w["code"] == "time-axis"]
    # raw output is kept as cyclictest printed it
    raw = (run / "loads/idle/cyclictest.out").read_text()
    assert "Spike:" in raw and "spikes = " in raw


def test_csv_series_and_the_html_figure_show_it(injected, tmp_path):
    run, start_mono = injected
    done = rtlab("report", str(run), "--format", "csv", "--series")
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    summary = read_json(run / "summary.json")
    at = start_mono - summary["clock"]["uptime_s"]
    worst = max((r for r in rows if r["cpu"] == str(CPU)), key=lambda r: int(r["max_us"]))
    assert abs(float(worst["t_s"]) - at) <= 1.0 and int(worst["max_us"]) >= SPIN_MS * 1000 * 0.6
    assert worst["wall_utc"].endswith("+00:00")
    page = tmp_path / "r.html"
    assert (
        rtlab("report", str(run), "--format", "html", "-o", str(page), "--deadline", "10ms").returncode == 1
    )
    assert 'id="fig-timeline-' in page.read_text()
    table = rtlab("report", str(run))
    assert any(c in table.stdout for c in "▁▂▃▄▅▆▇█")


def test_parsing_cut_garbled_and_overflowing_output():
    text = (
        "Max CPUs = 2\nOnline CPUs = 2\n# /dev/cpu_dma_latency set to 0us\nThread 0 Interval: 200\n"
        "       0:    4999:      12\n       1:    3012:      15\n       0:    9000:      40\n"
        "       1:    70\x00garbage\n"  # cut by a crash, then garbage
        "\nT: 0 Spike:     132: TS:   2204808715\nT: 1 Spike:     212: TS:   2205032794\n"
        "spikes = 216\n\n"
    )
    parsed = timeline.parse(text)
    assert parsed.blocks == {0: [(4999, 12), (9000, 40)], 1: [(3012, 15)]}
    assert parsed.spikes == [(0, 132, 2204808715), (1, 212, 2205032794)]
    assert parsed.spikes_total == 216 and parsed.garbled == 1
    none = timeline.parse("Max CPUs = 2\n       0:     100:       9\n")
    assert none.spikes == [] and none.spikes_total is None and none.garbled == 0


def test_more_spikes_than_nodes_are_said_to_be_cut(tmp_path):
    run = tmp_path / "run"
    done = rtlab(*run_args(run, "idle", "2s", "--spike-threshold", "1us"))
    assert done.returncode == 0, done.stderr
    spikes = read_json(run / "summary.json")["loads"]["idle"]["timeline"]["spikes"]
    # every sample is above 1 µs: cyclictest kept its first 10,000 and counted the rest
    assert spikes["kept"] == 10_000 and spikes["cut"] and spikes["total"] > spikes["kept"]


def test_a_soak_run_killed_in_its_third_segment_keeps_the_first_two(tmp_path):
    run = tmp_path / "run"
    proc = start_rtlab(*run_args(run, "idle", "60s", "--segment", "4s"))
    wait_for(lambda: event_seen(run / "events", "segment-start", n="3"), 60)
    time.sleep(1)
    # A power loss, as near as a test gets: everything dies at once, nothing is told.
    third = run / "loads/idle/segments/003"
    for pid_file in (run / "agent.pid", third / "cyclictest.pid"):
        os.kill(int(pid_file.read_text().split()[0]), 9)
    proc.kill()
    proc.communicate(timeout=30)

    done = rtlab("report", str(run), "--format", "json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    entry = summary["loads"]["idle"]
    assert entry["status"] == "partial"
    # the two whole segments, merged exactly
    parts = [read_json(run / f"loads/idle/segments/00{n}/cyclictest.json") for n in (1, 2)]
    cycles = sum(t["cycles"] for p in parts for t in p["thread"].values())
    assert entry["merged"]["samples"] == cycles
    assert entry["merged"]["max_us"] == max(t["max"] for p in parts for t in p["thread"].values())
    counts: dict[int, int] = {}
    for part in parts:
        for thread in part["thread"].values():
            for value, count in thread["histogram"].items():
                counts[int(value)] = counts.get(int(value), 0) + count
    merged = entry["histograms"]["merged"]
    assert dict(zip(merged["values"], merged["counts"], strict=True)) == counts
    assert any(w["code"] == "segments-lost" and "003" in w["message"] for w in summary["warnings"])
    assert [s["n"] for s in entry["timeline"]["segments"]] == [1, 2]
    assert "the host process ended without finishing this run" in rtlab("report", str(run)).stderr


def test_report_while_a_soak_run_measures_shows_the_segments_done(tmp_path):
    run = tmp_path / "run"
    proc = start_rtlab(*run_args(run, "idle,cpu", "12s", "--segment", "3s"))
    wait_for(lambda: event_seen(run / "events", "segment-end", n="2", status="complete"), 60)
    done = rtlab("report", str(run), "--format", "json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    idle = summary["loads"]["idle"]
    assert idle["status"] == "partial" and idle["reason"].startswith("still measuring: 2 segments done")
    assert idle["merged"]["samples"] > 0
    assert summary["loads"]["cpu"]["status"] == "not-run"
    assert any("still measuring" in w["message"] for w in summary["warnings"])
    proc.communicate(timeout=120)
    assert proc.returncode == 0
    final = read_json(run / "summary.json")["loads"]["idle"]
    assert final["status"] == "complete" and len(final["timeline"]["segments"]) == 4
