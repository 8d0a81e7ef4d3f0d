"""How sure are we: a statistical worst case from one histogram and its time axis, or a
reasoned refusal (measurement-based probabilistic timing analysis with extreme values).

1. The tail: a GPD above a threshold u, fitted to the binned histogram. Candidates leave
   100 to 5,000 samples above them; each is tested by a binned chi-square, and ForwardStop
   over the candidates, lowest first, picks the threshold; its shape must not step away from
   the next candidate's (a test at 5 %). ForwardStop rejecting every candidate refuses only
   when the highest one's fit fails its own test too (bootstrap-calibrated, at 1 %).
2. The time axis must look stationary and free of storms (analysis.stationarity: every row
   of the run, merged and per CPU, every load, in one family); any rejection refuses the
   row's estimate and names the check.
3. A GEV on maxima of blocks long enough to hold several tail events cross-checks the
   shape; disjoint intervals refuse. A run too short for such blocks says so (the "block
   size trap") instead of fitting blocks that hold no tail.
4. The latency exceeded with probability p per sample, with its profile-likelihood interval.
5. The shape decides the message: xi's interval above 0, a heavy tail with no bound (the
   expected maximum grows with run time); straddling 0, treated as unbounded; below 0, the
   endpoint only as an indication.
6. Over a horizon T of N_T wake-ups: P(X exceeded within T) <= N_T * zeta_u * S(X - u),
   which needs stationarity, not independence.
7. With no model: seeing the (1-p) quantile with 95 % confidence needs n >= ln(20)/p samples.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rtlab.analysis import stationarity, tail
from rtlab.boundary.summary_shapes import HistogramJSON, Summary

MIN_GEV_BLOCKS = 50
MIN_AXIS_BLOCKS = 40  # the stationarity checks' least time axis
TAIL_EVENTS_PER_BLOCK = 3
REFUSE_ALPHA = 0.01  # the GPD fit's refusal (_threshold)
# A row is refused by any of three parts; their shares add up (Bonferroni) to at most 5 % of
# stationary runs with a GPD tail: the GPD's threshold REFUSE_ALPHA (1 %), the GEV cross-check
# (two 95 % intervals of one shape that do not meet: 5 rows in 900 on such runs,
# bench_calibration) and the time axis's family, given the rest.
GATE_ALPHA = 0.035
STEP_ALPHA = 0.05  # the shape's step to the next threshold (_threshold)
SHOWN_HORIZONS = {"10 min": 600, "1 h": 3600, "24 h": 86400, "1 week": 604800}


def run_length(p: float, samples: int, interval_us: int) -> dict[str, Any]:
    needed = math.ceil(math.log(20) / p)
    return {
        "samples_needed": needed,
        "samples": samples,
        "hours_needed": round(needed * interval_us / 3.6e9, 1),
        "fraction": round(samples / needed, 6),
    }


def _gev_blocks(series: np.ndarray, u: int) -> tuple[np.ndarray | None, str]:
    """Maxima of the smallest blocks (in series blocks) that hold several tail events each
    and still number at least MIN_GEV_BLOCKS; None and why when the run is too short."""
    above = series >= u
    n = len(series)
    for size in range(1, n // MIN_GEV_BLOCKS + 1):
        count = n // size
        if above[: count * size].sum() / count >= TAIL_EVENTS_PER_BLOCK:
            return series[: count * size].reshape(count, size).max(axis=1), ""
    return None, (
        f"no block length gives {MIN_GEV_BLOCKS} blocks holding {TAIL_EVENTS_PER_BLOCK} tail events each "
        f"({int(above.sum())} of {n} blocks of the time axis reach u = {u} µs): the GEV cross-check is "
        "not made (measure longer)"
    )


def _overlap(a: tuple[float | None, float | None], b: tuple[float | None, float | None]) -> bool:
    lo = max(x for x in (a[0], b[0], -math.inf) if x is not None)
    hi = min(x for x in (a[1], b[1], math.inf) if x is not None)
    return lo <= hi


@dataclass
class _Row:
    """One histogram of a run (a CPU's, or all CPUs' merged: `threads` of them) on its way to
    a worst case: fitted first, then put to the stationarity checks with every other row of
    the run in one family, then extrapolated."""

    histogram: HistogramJSON
    observed_max_us: int
    series: list[int]
    block_s: float
    threads: int
    out: dict[str, Any] = field(default_factory=dict)
    fit: tail.GpdFit | None = None

    def refuse(self, reason: str) -> None:
        self.out["refused"] = f"{reason} (observed max {self.observed_max_us} µs)"


def _begin(row: _Row, interval_us: int, probability: float) -> None:
    """The row's tail fitted (row.fit), or its refusal."""
    h = row.histogram
    v = np.asarray(h["values"], dtype=np.int64)
    c = np.asarray(h["counts"], dtype=np.int64)
    samples = int(c.sum()) + h["overflows"]
    row.out = {
        "probability": probability,
        "observed_max_us": row.observed_max_us,
        "samples": samples,
        "run_length": run_length(probability, samples // max(row.threads, 1), interval_us),
        "checks": [],
        "refused": None,
        "threshold_us": None,
        "exceedances": None,
        "xi": None,
        "xi_ci": None,
        "sigma": None,
        "quantile_us": None,
        "quantile_ci_us": None,
        "horizon_bound": None,
        "expected_max_us": None,
        "tail": None,
        "gev": None,
    }
    found = tail.candidates(v, c, h["overflows"])
    if not found:
        row.refuse(f"too few samples in the tail: no threshold leaves 100 to 5,000 of the {samples}")
        return
    row.fit = _threshold(v, c, h["overflows"], h["limit_us"], found, row.out["checks"])
    if row.fit is None:
        if not row.out["checks"]:
            row.refuse("no generalised Pareto fit converged")
        else:
            p = row.out["checks"][-1]["p_value"]
            row.refuse(f"no threshold gives a generalised Pareto tail that fits: ForwardStop rejects every "
                       f"candidate and the highest fails its own test (bootstrap p = {p:.2f})")  # fmt: skip
        return
    fit = row.fit
    row.out.update(
        threshold_us=fit.u, exceedances=fit.exceedances, xi=round(fit.xi, 4), sigma=round(fit.sigma, 3)
    )
    row.out["xi_ci"] = [None if x is None else round(x, 4) for x in fit.xi_ci]


def _end(row: _Row, checks: list[stationarity.Check] | None, interval_us: int, probability: float,
         horizon_s: float) -> dict[str, Any]:  # fmt: skip
    """The row's worst case from its fit and its share of the run's stationarity family."""
    out, fit = row.out, row.fit
    if fit is None:
        return out
    why = _stationary(row.series, checks, out["checks"]) or _gev_agrees(row.series, fit, out, out["checks"])
    if why is not None:
        row.refuse(why)
        return out
    h = row.histogram
    v, c = np.asarray(h["values"], dtype=np.int64), np.asarray(h["counts"], dtype=np.int64)
    _extrapolate(out, fit, tail.tail_of(v, c, h["overflows"], h["limit_us"], fit.u), out["samples"],
                 probability, row.threads, interval_us, horizon_s)  # fmt: skip
    out["tail"] = _tail_kind(fit)
    return out


def _threshold(
    v: np.ndarray,
    c: np.ndarray,
    overflows: int,
    limit_us: int,
    found: list[int],
    checks: list[dict[str, Any]],
) -> tail.GpdFit | None:
    """The lowest candidate threshold whose generalised Pareto fit passes its goodness of fit
    (ForwardStop over the candidates, lowest first) and whose shape the next candidate's keeps
    (tail.shape_step at alpha STEP_ALPHA; the highest has no next); its check appended (none
    when no fit converged at all).

    When ForwardStop rejects every candidate, that alone does not refuse: the candidates share
    their samples (each holds about 70 % of the one below), so their p-values move together
    and ForwardStop rejects all of them on about 1.5 % of rows whose tail is a GPD. The highest
    candidate's own test decides then, calibrated by a bootstrap (tail.gof_bootstrap): the GPD
    above it is the least every candidate assumes, so the row is refused at most REFUSE_ALPHA
    of the time when the tail is a GPD above it; otherwise the highest candidate is used."""
    fits = [tail.fit_gpd(tail.tail_of(v, c, overflows, limit_us, u), u, interval=False) for u in found]
    usable = [f for f in fits if f is not None]
    if not usable:
        return None
    rejected = tail.forward_stop([f.gof_p for f in usable])
    chosen = None
    if rejected == len(usable):
        top = usable[-1]
        p_value = tail.gof_bootstrap(tail.tail_of(v, c, overflows, limit_us, top.u), top)
        if p_value > REFUSE_ALPHA:
            chosen = tail.fit_gpd(tail.tail_of(v, c, overflows, limit_us, top.u), top.u)
    else:
        for i in range(rejected, len(usable)):
            fit = tail.fit_gpd(tail.tail_of(v, c, overflows, limit_us, usable[i].u), usable[i].u)
            if fit is None:
                continue
            if i + 1 == len(usable) or tail.shape_step(fit, usable[i + 1]) >= STEP_ALPHA:
                chosen = fit
                break
        p_value = chosen.gof_p if chosen else 0.0
    checks.append(
        {
            "name": "gpd-threshold",
            "statistic": float(rejected),
            "p_value": p_value,
            "passed": chosen is not None,
        }
    )
    return chosen


def _axis(row: _Row, run: str) -> stationarity.Series | None:
    """The row's time axis as a member of the run's stationarity family; None when too short."""
    # a block cyclictest did not print (None, -1) is left out, as compare's gate leaves it
    axis = np.asarray([m for m in row.series if m is not None and m >= 0], dtype=float)
    if row.fit is None or len(axis) < MIN_AXIS_BLOCKS:
        return None
    # Tail events: blocks whose maximum is above u, or, when almost every block's is (a
    # threshold far below a block's share of samples), above the blocks' upper decile,
    # so that a storm shows as a crowded window.
    events_above = max(float(row.fit.u), float(np.quantile(axis, 0.9)))
    return stationarity.Series(axis, events_above, row.block_s, run)


def _stationary(
    series: list[int], family: list[stationarity.Check] | None, checks: list[dict[str, Any]]
) -> str | None:
    """The time axis's share of the run's stationarity family appended; why the axis cannot
    carry a worst case."""
    if family is None:
        return (
            f"the time axis has {len(series)} blocks: the stationarity checks need {MIN_AXIS_BLOCKS} or more"
        )
    for check in family:
        checks.append(
            {
                "name": check.name,
                "statistic": round(check.statistic, 4),
                "p_value": round(check.p_value, 4),
                "p_adjusted": round(check.p_adjusted, 4),
                "passed": check.passed,
            }
        )
    failed = [ch["name"] for ch in checks if not ch["passed"] and ch["name"] in stationarity.NAMES]
    if failed:
        return (
            f"the time axis fails {', '.join(failed)} (adjusted across every row of the run: "
            f"{stationarity.METHOD}, alpha {GATE_ALPHA}): not stationary, or bursts"
        )
    return None


def _gev_agrees(
    series: list[int], fit: tail.GpdFit, out: dict[str, Any], checks: list[dict[str, Any]]
) -> str | None:
    """The GEV on block maxima as a cross-check of the GPD's shape (out["gev"]); why not."""
    blocks, trap = _gev_blocks(np.asarray(series, dtype=np.int64), fit.u)
    if blocks is None:
        out["gev"] = {"made": False, "reason": trap}
        return None
    gev = tail.fit_gev(blocks)
    if gev is None:
        return None
    _, _, gxi, gci = gev
    agree = _overlap(gci, fit.xi_ci)
    out["gev"] = {"made": True, "blocks": len(blocks), "xi": round(gxi, 4), "xi_ci": list(gci)}
    checks.append(
        {"name": "gev-cross-check", "statistic": round(gxi, 4), "p_value": float(agree), "passed": agree}
    )
    return None if agree else "the GEV on block maxima and the GPD disagree on the tail's shape"


def _extrapolate(out: dict[str, Any], fit: tail.GpdFit, data: Any, samples: int, probability: float,
                 threads: int, interval_us: int, horizon_s: float) -> None:  # fmt: skip
    """The fitted tail's quantile, its interval, the horizon's bound and the expected maxima."""
    zeta = fit.exceedances / samples
    if probability < zeta:
        out["quantile_us"] = round(tail.quantile(fit, zeta, probability), 1)
        lo, hi = tail.quantile_interval(data, fit, zeta, probability)
        out["quantile_ci_us"] = [None if lo is None else round(lo, 1), None if hi is None else round(hi, 1)]
    rate = threads * 1e6 / interval_us  # wake-ups per second
    per_sample = probability / (rate * horizon_s)
    out["horizon_bound"] = {
        "horizon_s": horizon_s,
        "probability": probability,
        "level_us": round(tail.quantile(fit, zeta, per_sample), 1) if per_sample < zeta else None,
    }
    out["expected_max_us"] = {
        name: round(tail.quantile(fit, zeta, math.log(2) / (rate * seconds)), 1)
        for name, seconds in SHOWN_HORIZONS.items()
        if math.log(2) / (rate * seconds) < zeta
    }


def _tail_kind(fit: tail.GpdFit) -> str:
    lo, hi = fit.xi_ci
    if lo is not None and lo > 0:
        return "heavy: no statistical upper bound; the expected maximum grows with run time"
    if hi is None or hi >= 0:
        return "treated as unbounded: the interval of the shape includes 0"
    endpoint = fit.u - fit.sigma / fit.xi
    return f"bounded: endpoint about {endpoint:.0f} µs, an indication only"


def of_summary(summary: Summary, probability: float, horizon_s: float) -> dict[str, Any]:
    """`rtlab worst`: per load, all CPUs merged and each CPU. Every row of every load is put to
    the stationarity checks in one family (a run's rows share their blocks and are reordered
    together), so a run with more CPUs or loads is not likelier to have a row refused."""
    interval = summary["plan"]["interval_us"]
    loads: dict[str, Any] = {}
    rows: dict[str, tuple[_Row, dict[str, _Row]]] = {}
    for load, entry in summary["loads"].items():
        axis = entry["timeline"]
        histograms = entry["histograms"]
        if entry["merged"] is None or histograms is None:
            loads[load] = {"refused": f"no measurement to model ({entry['status']})"}
        elif axis is None:
            loads[load] = {"refused": "no time axis (a run made before rtlab recorded one): nothing to check "
                           "stationarity on"}  # fmt: skip
        else:
            block_s = axis["block_s"]
            merged = _Row(histograms["merged"], entry["merged"]["max_us"] or 0, axis["merged"], block_s,
                          len(entry["cpus"]))  # fmt: skip
            cpus = {cpu: _Row(h, entry["cpus"][cpu]["max_us"] or 0, axis["cpus"].get(cpu, []), block_s, 1)
                    for cpu, h in histograms["cpus"].items()}  # fmt: skip
            rows[load] = (merged, cpus)
    every = [(load, row) for load, (merged, cpus) in rows.items() for row in (merged, *cpus.values())]
    # A fit that strays (an overflow in exp, a log of 0) is judged by its own checks and
    # refused with a reason: scipy's RuntimeWarnings are not the user's to read.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for _, row in every:
            _begin(row, interval, probability)
        members = [(row, found) for load, row in every if (found := _axis(row, load)) is not None]
        checked = stationarity.family([found for _, found in members], alpha=GATE_ALPHA)
        of_row = {id(row): checks for (row, _), checks in zip(members, checked, strict=True)}
        for _, row in every:
            _end(row, of_row.get(id(row)), interval, probability, horizon_s)
    for load, (merged, cpus) in rows.items():
        loads[load] = {"merged": merged.out, "cpus": {cpu: row.out for cpu, row in cpus.items()}}
    return {"schema": "rtlab.worst/1", "run": summary["run"], "probability": probability,
            "horizon_s": horizon_s, "loads": loads}  # fmt: skip


def max_over_time(result: dict[str, Any], seconds: np.ndarray, rate: float) -> dict[str, list[float | None]]:
    """The fitted model's median and 95 % band of the maximum over the first t seconds
    (rate wake-ups a second): P(max <= x) = (1 - zeta S(x - u))^(rate t). None where that
    lies below the threshold, which the model does not describe."""
    fit = tail.GpdFit(result["threshold_us"], result["exceedances"], result["sigma"], result["xi"], 0.0,
                      (None, None), 1.0)  # fmt: skip
    zeta = result["exceedances"] / result["samples"]
    out: dict[str, list[float | None]] = {"median": [], "low": [], "high": []}
    for t in seconds:
        n = max(rate * float(t), 1.0)
        for key, level in (("median", 0.5), ("low", 0.025), ("high", 0.975)):
            p = -math.expm1(math.log(level) / n)  # 1 - level^(1/n), exactly for large n
            out[key].append(tail.quantile(fit, zeta, p) if p < zeta else None)
    return out
