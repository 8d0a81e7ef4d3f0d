"""The JSON documents keep their field names: a real run's run.json, sysinfo.json and
summary.json hold exactly the fields that rtlab.boundary.shapes and summary_shapes define (and mypy
checks readers by)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from conftest import needs_root, needs_tools, read_json, rtlab, run_args
from rtlab.analysis.stats import FIELDS
from rtlab.boundary.shapes import LoadJSON, Manifest, PlanJSON, Sysinfo
from rtlab.boundary.summary_shapes import (
    CausesJSON,
    FindingJSON,
    HistogramJSON,
    LoadEntry,
    PhasesJSON,
    ProbeJSON,
    StatsJSON,
    Summary,
    SuspectJSON,
    SystemJSON,
    TracedSpikeJSON,
    WarningJSON,
)
from rtlab.plan import Plan
from rtlab.plan.loads import Load

pytestmark = pytest.mark.host


def keys(shape: Any) -> set[str]:
    return set(shape.__required_keys__ | shape.__optional_keys__)


def required(shape: Any) -> set[str]:
    return set(shape.__required_keys__)


def test_plan_and_stats_shapes_match_their_classes():
    # the user's own loads are written out with the built-in ones, as every load's definition
    fields = {f.name for f in dataclasses.fields(Plan)} - {"custom_loads"} | {"load_definitions"}
    assert keys(PlanJSON) == fields
    assert set(LoadJSON.__annotations__) == set(Load("x", stress_ng=(), command=()).to_json())
    assert list(StatsJSON.__annotations__) == [f.key for f in FIELDS] + ["lower_bounds"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("shapes") / "run"
    # with a trace pass (level c on this host: no tracefs mounted) and another probe, so causes
    # and probes have their shape too
    done = rtlab(
        *run_args(out, "idle,cpu", "1s", "--deadline", "100ms", "--trace", "1ms", "--trace-duration", "1s",
                  "--probe", "oslat")
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


@needs_root
@needs_tools
def test_a_real_run_has_exactly_the_defined_fields(run):
    summary = read_json(run / "summary.json")
    assert required(Summary) <= set(summary) <= keys(Summary)
    assert set(summary["system"]) == keys(SystemJSON)
    assert all(set(w) == keys(WarningJSON) for w in summary["warnings"])
    assert summary["audit"] and all(set(f) == keys(FindingJSON) for f in summary["audit"])
    for entry in summary["loads"].values():
        # clusters only on heterogeneous CPUs (not this machine's), repeats only with --repeat;
        # causes: this run traced; probes: it measured with oslat too; a disagreement only when
        # oslat and cyclictest disagree (a spike one of them caught)
        fields = set(entry) - {"disagreement"}
        assert required(LoadEntry) | {"causes", "probes"} == fields
        assert fields == keys(LoadEntry) - {"clusters", "repeats", "disagreement"}
        assert set(entry.get("disagreement") or {"metric", "figures", "reason", "parts"}) == {
            "metric", "figures", "reason", "parts"
        }  # fmt: skip
        assert set(entry["probes"]["oslat"]) == keys(ProbeJSON) - {
            "counts",
            "test_failed",
        }  # a functional test's only
        assert set(entry["probes"]["oslat"]["merged"]["latency"]) == keys(StatsJSON)
        assert set(entry["phases"]) == keys(PhasesJSON)
        assert set(entry["causes"]) == keys(CausesJSON)
        assert all(set(spike) == keys(TracedSpikeJSON) for spike in entry["causes"]["spikes"])
        assert all(set(s) == keys(SuspectJSON) for x in entry["causes"]["spikes"] for s in x["suspects"])
        assert set(entry["merged"]) == keys(StatsJSON)
        assert all(set(stats) == keys(StatsJSON) for stats in entry["cpus"].values())
        assert set(entry["histograms"]["merged"]) == keys(HistogramJSON)
    assert set(summary["plan"]) == keys(PlanJSON)
    assert set(read_json(run / "run.json")) <= keys(Manifest)
    assert set(read_json(run / "sysinfo.json")) <= keys(Sysinfo)


@needs_root
@needs_tools
def test_report_json_is_the_saved_summary_with_the_deadline(run):
    import json

    done = rtlab("report", str(run), "--format", "json", "--deadline", "100ms")
    assert done.returncode == 0
    shown = json.loads(done.stdout)
    saved = read_json(run / "summary.json")
    assert set(shown) == set(saved) | {"deadline"}
    assert set(shown["deadline"]) == {"deadline_us", "pass", "loads"}
