"""CSV: one row per run, load and CPU (`all` = merged), every statistic; for spreadsheets.
What the load cost (throughput and its ratio to the first run's, memory, power) is on the
`all` row: it belongs to the load, not to a CPU. The last column names the probe: cyclictest,
then the other probes' rows (--probe; timerlat's as `timerlat irq` and `timerlat thread`).
The run's platform facts and what ran where (the other formats' facts lines) are the last two
columns of each load's `all` row: `placement` (the measuring CPUs, this load's CPUs) and
`platform` (DMI, BIOS, clock source, ...), each "name: value; ..."."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import cast

from rtlab.analysis import placement, timeline
from rtlab.analysis.stats import FIELDS
from rtlab.analysis.summary import platform_lines
from rtlab.boundary.summary_shapes import StatsJSON, Summary
from rtlab.report import cells, escape


class Writer:
    """csv.writer whose every cell passes through escape.csv (quoted where a spreadsheet would
    evaluate it): every CSV rtlab writes goes through it."""

    def __init__(self, buffer: io.StringIO):
        self._writer = csv.writer(buffer, lineterminator="\n")

    def writerow(self, row: Iterable[object]) -> None:
        self._writer.writerow([escape.csv(v) for v in row])


COST = ("ops_per_s", "ops_ratio", "mem_available_min_kb", "cyclictest_hwm_kb", "power_mw")
# --repeat: the spread across the repeats of the maximum latency and the throughput
SPREAD = tuple(f"{k}_{p}" for k in ("max_us", "ops_per_s") for p in ("median", "min", "max"))


def render(summaries: Sequence[Summary], labels: Sequence[str]) -> str:
    buffer = io.StringIO()
    writer = Writer(buffer)
    head = [
        "run",
        "label",
        "load",
        "status",
        "cpu",
        *(f.key for f in FIELDS),
        "lower_bounds",
        *COST,
        *SPREAD,
        "reason",
        "probe",
        "placement",
        "platform",
    ]
    writer.writerow(head)
    blank = [""] * (len(COST) + len(SPREAD))
    for summary, label in zip(summaries, labels, strict=True):
        where = dict(placement.lines(summary.get("placement")))
        platform = _joined(platform_lines(summary["system"]))
        for load in cells.loads_in_order([summary]):
            entry = summary["loads"][load]
            facts = [
                _joined([(n, v) for n, v in where.items() if n in ("measured on", f"load {load} on")]),
                platform,
            ]
            used = cast(dict[str, float | None], entry.get("resources") or {})
            first = summary is summaries[0]
            spent = [
                cells.ops_per_s(entry),
                "" if first else cells.ops_ratio(summaries[0], summary, load).rstrip("×"),
                *(used.get(k) for k in COST[2:]),
                *(cast(dict[str, float | None], entry.get("repeats") or {}).get(k) for k in SPREAD),
            ]
            scopes: list[tuple[str, StatsJSON | None]] = [("all", entry["merged"]), *entry["cpus"].items()]
            scopes += [(f"cluster:{name}", stats) for name, stats in (entry.get("clusters") or {}).items()]
            for cpu, stats in scopes:
                values = [stats.get(f.key) if stats else None for f in FIELDS]
                writer.writerow(
                    [summary["run"], label, load, entry["status"], cpu]
                    + ["" if v is None else v for v in values]
                    + [" ".join(stats["lower_bounds"]) if stats else ""]
                    + (["" if v is None else v for v in spent] if cpu == "all" else blank)
                    + [entry["reason"] or "", "cyclictest"]
                    + (facts if cpu == "all" else ["", ""])
                )
            for name, probe in (entry.get("probes") or {}).items():
                measures: dict[str, StatsJSON | None] = {**probe["merged"]} or {"": None}
                for measure, merged in measures.items():
                    shown = f"{name} {measure}" if len(measures) > 1 else name
                    per_cpu = probe["cpus"].get(measure, {})
                    for cpu, stats in [("all", merged), *per_cpu.items()]:
                        values = [stats.get(f.key) if stats else None for f in FIELDS]
                        writer.writerow(
                            [summary["run"], label, load, probe["status"], cpu]
                            + ["" if v is None else v for v in values]
                            + [" ".join(stats["lower_bounds"]) if stats else ""]
                            + blank
                            + [probe["reason"] or probe["note"] or "", shown, "", ""]
                        )
    return buffer.getvalue()


def _joined(lines: Sequence[tuple[str, str]]) -> str:
    return "; ".join(f"{name}: {value}" for name, value in lines)


def render_series(summaries: Sequence[Summary], labels: Sequence[str]) -> str:
    """The time axis: one row per run, load, CPU (`all` = the maximum over CPUs) and block,
    with the block's start in seconds since the campaign began and on the wall clock (UTC)."""
    buffer = io.StringIO()
    writer = Writer(buffer)
    writer.writerow(["run", "label", "load", "cpu", "block", "t_s", "wall_utc", "max_us"])
    for summary, label in zip(summaries, labels, strict=True):
        clock = summary.get("clock")
        for load in cells.loads_in_order([summary]):
            axis = summary["loads"][load]["timeline"]
            if axis is None or axis["start_s"] is None:
                continue
            starts = timeline.block_starts(axis)
            for cpu, series in [("all", axis["merged"]), *axis["cpus"].items()]:
                for k, (t, value) in enumerate(zip(starts, series, strict=True)):
                    wall = ""
                    if clock is not None:
                        moment = datetime.fromtimestamp(clock["wall_s"] + t, UTC)
                        wall = moment.isoformat(timespec="milliseconds")
                    writer.writerow([summary["run"], label, load, cpu, k, f"{t:.3f}", wall, value])
    return buffer.getvalue()
