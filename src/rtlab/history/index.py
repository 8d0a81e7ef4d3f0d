"""What one run becomes in the store: pure functions of what its folder holds.

A run's board is what the user names it (--board), else the hostname its target reported,
else the device tree's model, else the CPU model; its kernel is the release and a hash of the
config options the target reported, so two builds of one release tell apart.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from rtlab.analysis.probes import series_name
from rtlab.boundary import values
from rtlab.boundary.shapes import Manifest, Sysinfo
from rtlab.boundary.summary_shapes import LoadEntry, StatsJSON, Summary
from rtlab.boundary.untrusted import printable
from rtlab.history import schema

TEXT_MAX = 200  # a board's strings are cut to this before they are stored
SERIES_MAX = 100  # the load column: a load's name, or a probe's series under it


@dataclass(frozen=True)
class Context:
    """Where a run sits among others: the study and stage, or the repeat of a campaign."""

    study: str | None = None
    stage: str | None = None
    repeat: int | None = None


@dataclass
class Rows:
    run: dict[str, Any]
    load_stats: list[dict[str, Any]] = field(default_factory=list)
    histograms: list[dict[str, Any]] = field(default_factory=list)
    block_maxima: list[dict[str, Any]] = field(default_factory=list)
    note: str | None = None  # what was not kept as the run said it (a start in the future, a failed load)

    def problem(self) -> str | None:
        """Why a row cannot be stored as it is (boundary/values.fit), None when all fit."""
        tables = ((schema.runs, [self.run]), (schema.load_stats, self.load_stats),
                  (schema.histograms, self.histograms), (schema.block_maxima, self.block_maxima))  # fmt: skip
        return next((why for table, rows in tables for row in rows if (why := values.fit(table, row))), None)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return printable(str(value))[:TEXT_MAX] or None


def config_hash(info: Sysinfo | None) -> str | None:
    options = ((info or {}).get("config") or {}).get("options") or {}
    if not options:
        return None
    return hashlib.sha256(json.dumps(sorted(options.items())).encode()).hexdigest()[:16]


def board_of(summary: Summary, info: Sysinfo | None, override: str | None = None) -> str:
    system = summary["system"]
    model = ((info or {}).get("board") or {}).get("model")
    for name in (override, system.get("hostname"), model, system.get("cpu_model")):
        text = _text(name)
        if text and text != "(none)":
            return text
    return "unknown"


def kernel_of(summary: Summary, info: Sysinfo | None) -> str:
    # the release, cut so that it and the config's hash fit the kernel column
    release = (_text(summary["system"].get("kernel_release")) or "unknown")[: TEXT_MAX - 10]
    digest = config_hash(info)
    return f"{release} #{digest[:8]}" if digest else release


def _stats_row(run_id: int, load: str, cpu: str, status: str, stats: StatsJSON) -> dict[str, Any]:
    row: dict[str, Any] = {"run_id": run_id, "load": load, "cpu": cpu, "status": status}
    row["samples"] = stats.get("samples")
    for name in schema.STAT_COLUMNS:
        row[name] = stats.get(name)
    row["overflows"] = stats.get("overflows")
    row["lower_bounds"] = ",".join(stats.get("lower_bounds") or [])
    return row


def _load_rows(rows: Rows, run_id: int, load: str, entry: LoadEntry) -> None:
    timeline = entry.get("timeline") or None
    spikes = timeline["spikes"] if timeline else None
    throughput = entry.get("throughput") or None
    extra = {
        "spike_threshold_us": spikes["threshold_us"] if spikes else None,
        "spikes": spikes["total"] if spikes else None,
        "ops_per_s": throughput["ops_per_s"] if throughput else None,
    }
    status = entry["status"]
    merged = entry.get("merged")
    if merged is None:
        rows.load_stats.append({"run_id": run_id, "load": load, "cpu": "all", "status": status, **extra})
    else:
        rows.load_stats.append({**_stats_row(run_id, load, "all", status, merged), **extra})
    for cpu, stats in sorted((entry.get("cpus") or {}).items()):
        rows.load_stats.append(_stats_row(run_id, load, cpu, status, stats))
    found = entry.get("histograms") or None
    if found:
        for cpu, h in [("all", found["merged"]), *sorted(found["cpus"].items())]:
            rows.histograms.append({
                "run_id": run_id, "load": load, "cpu": cpu, "limit_us": h["limit_us"],
                "overflows": h["overflows"], "values": json.dumps(h["values"]),
                "counts": json.dumps(h["counts"]),
            })  # fmt: skip
    _probe_rows(rows, run_id, load, entry)
    if timeline and timeline.get("merged"):
        maxima = [m if m is not None and m >= 0 else None for m in timeline["merged"]]
        rows.block_maxima.append(
            {"run_id": run_id, "load": load, "block_s": timeline["block_s"], "maxima": json.dumps(maxima)}
        )


def _probe_rows(rows: Rows, run_id: int, load: str, entry: LoadEntry) -> None:
    """The other probes (--probe) as series of their own, named as compare's verdicts name
    them ("idle oslat", "idle timerlat thread"): trends, regressions and limits read them as
    they read a load. No time axis: no block maxima."""
    for name, probe in sorted((entry.get("probes") or {}).items()):
        measures = list(dict.fromkeys([*(probe.get("merged") or {}), *(probe.get("histograms") or {})]))
        for measure in measures:
            key = series_name(load, name, measure, len(measures))[:SERIES_MAX]
            status = str(probe.get("status") or "failed")
            merged = (probe.get("merged") or {}).get(measure)
            if merged is None:
                rows.load_stats.append({"run_id": run_id, "load": key, "cpu": "all", "status": status})
            else:
                rows.load_stats.append(_stats_row(run_id, key, "all", status, merged))
            for cpu, stats in sorted(((probe.get("cpus") or {}).get(measure) or {}).items()):
                rows.load_stats.append(_stats_row(run_id, key, str(cpu), status, stats))
            h = (probe.get("histograms") or {}).get(measure)
            if h:
                rows.histograms.append({
                    "run_id": run_id, "load": key, "cpu": "all", "limit_us": h["limit_us"],
                    "overflows": h["overflows"], "values": json.dumps(h["values"]),
                    "counts": json.dumps(h["counts"]),
                })  # fmt: skip


def rows_of(
    path: str,
    uid: str,
    manifest: Manifest,
    info: Sysinfo | None,
    summary: Summary,
    context: Context,
    added: str,
    board: str | None = None,
) -> Rows:
    """The rows of one run; load rows carry run_id 0 until the run's row has its id."""
    system = summary["system"]
    plan = summary["plan"]
    started, rows_note = values.timestamp(summary.get("started") or manifest.get("started"))
    compatible = ((info or {}).get("board") or {}).get("compatible") or []
    run = {
        "uid": printable(uid)[:TEXT_MAX], "path": path, "board": board_of(summary, info, board),
        "hostname": _text(system.get("hostname")), "machine": _text(system.get("machine")),
        "board_model": _text(((info or {}).get("board") or {}).get("model")),
        "compatible": _text(",".join(str(c) for c in compatible)),
        "cpu_model": _text(system.get("cpu_model")),
        "kernel": kernel_of(summary, info), "kernel_release": _text(system.get("kernel_release")),
        "kernel_version": _text(system.get("kernel_version")), "preemption": _text(system.get("preemption")),
        "config_hash": config_hash(info), "started": started,
        "added": added, "status": _text(summary["status"]) or "unknown",
        "loads": ",".join(plan["loads"]), "interval_us": plan.get("interval_us"),
        "duration_s": plan.get("duration_s"), "cpu_count": system.get("cpu_count"),
        "tuned": bool(plan.get("tune")), "study": _text(context.study), "stage": _text(context.stage),
        "repeat": context.repeat, "rtlab_version": _text(manifest.get("rtlab_version")),
    }  # fmt: skip
    rows = Rows(run, note=rows_note)
    for load, entry in summary["loads"].items():
        _load_rows(rows, 0, load, entry)
    return rows
