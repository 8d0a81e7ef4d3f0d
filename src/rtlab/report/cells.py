"""What every format shares: the order of loads and how one value is written."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

from rtlab.analysis import cost, probes
from rtlab.analysis.stats import FIELD_BY_KEY, Field
from rtlab.boundary.summary_shapes import LoadEntry, StatsJSON, Summary
from rtlab.plan.loads import BUILTIN

LOWER_BOUND = "≥"


def loads_in_order(summaries: Sequence[Summary]) -> list[str]:
    """Every load of every run, in catalogue order, then any other in order of appearance."""
    seen: list[str] = []
    for summary in summaries:
        for load in summary["loads"]:
            if load not in seen:
                seen.append(load)
    order = list(BUILTIN)
    return sorted(seen, key=lambda n: order.index(n) if n in order else len(order))


def clusters_in_order(summaries: Sequence[Summary]) -> list[str]:
    """Every cluster any run reports (heterogeneous CPUs), in CPU order, each once."""
    seen: dict[str, None] = {}
    for summary in summaries:
        for cluster in summary["system"].get("clusters") or []:
            seen.setdefault(cluster["name"])
    return list(seen)


def cluster_stats(summary: Summary, load: str) -> dict[str, StatsJSON]:
    """A load's per-cluster statistics in one run ({}: none)."""
    entry = summary["loads"].get(load)
    return entry.get("clusters", {}) if entry is not None else {}


def round_half_up(value: float) -> int:
    # The seed rounds to the nearest microsecond; Python's round() would send 12.5 to 12.
    return math.floor(value + 0.5)


def value(stats: StatsJSON | None, field: Field, rounded: bool = True) -> str:
    """One statistic as text: '' when unmeasured, '≥' before a lower bound."""
    raw = stats.get(field.key) if stats else None
    if stats is None or raw is None:
        return ""
    assert isinstance(raw, int | float)
    if rounded or field.decimals == 0:
        text = str(round_half_up(float(raw)))
    else:
        text = f"{float(raw):.{field.decimals}f}"
    if field.key in stats["lower_bounds"]:
        text = LOWER_BOUND + text
    return text


SPARKS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[int], width: int = 24) -> str:
    """The series in `width` characters, each the maximum of its share of the blocks, on a log
    scale between the series' own minimum and maximum (latency spans decades)."""
    if not values:
        return ""
    step = max(len(values) / width, 1)
    buckets = [
        max(values[int(i * step) : max(int((i + 1) * step), int(i * step) + 1)])
        for i in range(min(width, len(values)))
    ]
    logs = [math.log10(max(v, 1)) for v in buckets]
    low, high = min(logs), max(logs)
    span = (high - low) or 1.0
    return "".join(SPARKS[min(int((x - low) / span * len(SPARKS)), len(SPARKS) - 1)] for x in logs)


def heading(field: Field) -> str:
    return f"{field.label} ({field.unit})" if field.unit else field.label


def status_mark(entry: LoadEntry | None) -> str:
    """'' for a complete load, its status (and why) otherwise."""
    if entry is None:
        return "not run"
    if entry["status"] == "complete":
        return ""
    return f"{entry['status']}: {entry['reason']}" if entry["reason"] else entry["status"]


def verdict(summary: Summary, load: str) -> str:
    """'pass (+margin)' / 'MISS (-margin)' against the summary's deadline; '' without one."""
    deadline = summary.get("deadline")
    if not deadline:
        return ""
    v = deadline["loads"].get(load)
    if not v or v["verdict"] == "no-data" or v["margin_us"] is None:
        return "no data"
    word = "pass" if v["verdict"] == "pass" else "MISS"
    return f"{word} ({v['margin_us']:+d})"


def ops_per_s(entry: LoadEntry | None) -> float | None:
    """The load's bogo ops per second; None when it has none (or the run predates them)."""
    work = entry.get("throughput") if entry else None
    return work["ops_per_s"] if work else None


def has_throughput(summaries: Sequence[Summary]) -> bool:
    """Whether any run's load got work done that rtlab measured (a throughput column's worth)."""
    return any(ops_per_s(e) is not None for s in summaries for e in s["loads"].values())


def ops(summary: Summary, load: str) -> str:
    """The load's bogo ops per second as text, '' when it has none."""
    found = ops_per_s(summary["loads"].get(load))
    return f"{found:.0f}" if found is not None else ""


def ops_ratio(first: Summary, summary: Summary, load: str) -> str:
    """The load's throughput as a multiple of the first run's, e.g. '0.82×' ('' without both)."""
    a, b = first["loads"].get(load), summary["loads"].get(load)
    found = cost.ratio(a.get("throughput"), b.get("throughput")) if a and b else None
    return f"{found:.2f}×" if found is not None else ""


def cost_table(summaries: Sequence[Summary], labels: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    """Throughput per load and run, each run after the first also as a multiple of the first's:
    the head and the rows, for the formats that show it as a table of its own."""
    head = ["Load"]
    for i, label in enumerate(labels):
        head += [f"{label} Ops/s"] + ([f"{label} ×{labels[0]}"] if i else [])
    rows = []
    for load in loads_in_order(summaries):
        row = [load]
        for i, summary in enumerate(summaries):
            row += [ops(summary, load)] + ([ops_ratio(summaries[0], summary, load)] if i else [])
        rows.append(row)
    return head, rows


PROBE_FIELDS = tuple(
    FIELD_BY_KEY[k] for k in ("samples", "min_us", "avg_us", "max_us", "p99_us", "p99_99_us")
)


def has_probes(summaries: Sequence[Summary]) -> bool:
    return any(probes.of(s, load) for s in summaries for load in s["loads"])


def probe_table(
    summaries: Sequence[Summary], labels: Sequence[str]
) -> tuple[list[str], list[list[str]], list[str]]:
    """The other probes (--probe): a row per load, probe, measure (timerlat's irq and thread)
    and run with the probe's own statistics; and the notes: what a probe cannot say, and why
    one has no numbers."""
    several = len(summaries) > 1
    head = ["Load", "Probe", *(["Run"] if several else []), *(f.label for f in PROBE_FIELDS)]
    rows: list[list[str]] = []
    notes: dict[str, None] = {}
    for load in loads_in_order(summaries):
        found = [(label, probes.of(s, load)) for s, label in zip(summaries, labels, strict=True)]
        for name in dict.fromkeys(name for _, of_run in found for name in of_run):
            measures = dict.fromkeys(
                m for _, of_run in found if name in of_run for m in of_run[name]["merged"]
            )
            for measure in measures or {"": None}:
                for label, of_run in found:
                    probe = of_run.get(name)
                    if probe is None:
                        continue
                    if probe["note"]:
                        notes[probe["note"]] = None
                    if probe["status"] != "complete":
                        run = f"{label} " if several else ""
                        notes[
                            f"{run}{load} {name}: {probe['status']}, {probe['reason'] or 'no reason given'}"
                        ] = None
                    stats = probe["merged"].get(measure)
                    shown = f"{name} {measure}" if len(measures) > 1 else name
                    numbers = [value(stats, f) for f in PROBE_FIELDS]
                    rows.append([load, shown, *([label] if several else []), *numbers])
    return head, rows, list(notes)


def repeated(summaries: Sequence[Summary]) -> bool:
    """Whether any run is a campaign measured several times (a spread's worth of columns)."""
    return any("repeats" in e for s in summaries for e in s["loads"].values())


def spread(entry: LoadEntry | None, key: str) -> str:
    """A value across the repeats as 'median (min–max)', e.g. '812 (790–845)'; '' without."""
    found = cast(dict[str, float | None], entry.get("repeats") or {}) if entry else {}
    middle, low, high = (found.get(f"{key}_{part}") for part in ("median", "min", "max"))
    if middle is None or low is None or high is None:
        return ""
    return f"{middle:.0f} ({low:.0f}–{high:.0f})"
