"""KCIDB, KernelCI's database of checkouts, builds and tests (schema v5, as kcidb-io holds it).

What rtlab measured maps onto it as a kernel CI system's results would:

    checkout  the kernel as the target reported it: release, version string, config's hash
    build     that kernel for its architecture, with its preemption model (it booted: PASS)
    test      rtlab.<load> per run (its status), and rtlab.<load>.<all|cpuN>.<metric> with a
              `number` in µs: max, p99.99, and the statistical worst case where `rtlab worst`
              gave one (at 1e-9 per wake-up); rtlab.<load>.<probe> for each other probe
              (--probe: its status as a load's, but FAIL for a functional test that failed the
              kernel), and rtlab.<load>.<probe>.<measure>.max

Statuses: a complete load PASS, or FAIL when it missed the deadline; a failed or partial load
ERROR (its reason in `misc`); a probe likewise, but FAIL when it failed as a functional test;
a load never run MISS. A refused worst case is a test without a number, its refusal in `misc`.
`environment.compatible` is the device tree's root compatible. Every id starts with the origin
and is stable: exporting a run again updates, never doubles.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from rtlab.analysis import worst
from rtlab.boundary.shapes import Sysinfo
from rtlab.boundary.summary_shapes import ProbeJSON, StatsJSON, Summary

MAJOR, MINOR = 5, 3
WORST_P = 1e-9
_PATH_PART = re.compile(r"[^a-zA-Z0-9_-]")
_ORIGIN = re.compile(r"[a-z0-9_]+")
STATUS = {"complete": "PASS", "failed": "ERROR", "partial": "ERROR", "not-run": "MISS"}


def valid_origin(origin: str) -> bool:
    return _ORIGIN.fullmatch(origin) is not None


def _part(text: str) -> str:
    """A name as one part of a KCIDB test path (letters, digits, _ and -)."""
    return _PATH_PART.sub("_", text) or "_"


def _kernel_id(info: Sysinfo | None, summary: Summary) -> str:
    """A stable hash of what makes the kernel itself: its release, version string and config."""
    system = summary["system"]
    options = ((info or {}).get("config") or {}).get("options") or {}
    text = json.dumps([system.get("kernel_release"), system.get("kernel_version"), sorted(options.items())])
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _number(stats: StatsJSON | None, key: str) -> float | None:
    if stats is None or stats.get(key) is None or key in stats["lower_bounds"]:
        return None
    return float(stats[key])  # type: ignore[literal-required]


def document(
    runs: Sequence[tuple[Summary, Sysinfo | None, str]], origin: str, with_worst: bool = True
) -> dict[str, Any]:
    """The KCIDB document of RUNS: (summary, its sysinfo, its unique id) each."""
    checkouts: dict[str, dict[str, Any]] = {}
    builds: dict[str, dict[str, Any]] = {}
    tests: list[dict[str, Any]] = []
    for summary, info, uid in runs:
        system = summary["system"]
        kernel = _kernel_id(info, summary)
        checkout_id, build_id = (
            f"{origin}:{kernel}",
            f"{origin}:{kernel}-{_part(system.get('machine') or 'x')}",
        )
        config = ((info or {}).get("config") or {}).get("options") or {}
        checkouts[checkout_id] = {
            "id": checkout_id,
            "origin": origin,
            "comment": f"Linux {system.get('kernel_release')}",
            "valid": True,
            "misc": {
                "kernel_release": system.get("kernel_release"),
                "kernel_version": system.get("kernel_version"),
                "config_sha256": hashlib.sha256(json.dumps(sorted(config.items())).encode()).hexdigest(),
            },
        }
        builds[build_id] = {
            "id": build_id,
            "origin": origin,
            "checkout_id": checkout_id,
            "architecture": system.get("machine") or "unknown",
            "config_name": system["preemption"],
            "status": "PASS",  # it booted, and was measured
            "misc": {"preemption": system["preemption"], "realtime": system.get("realtime")},
        }
        environment: dict[str, Any] = {"comment": f"{system.get('hostname')}: {system.get('cpu_model')}"}
        compatible = ((info or {}).get("board") or {}).get("compatible")
        if compatible:
            environment["compatible"] = [c for c in compatible if " " not in c and c]
        tests += _tests(summary, uid, origin, build_id, environment, with_worst)
    return {
        "version": {"major": MAJOR, "minor": MINOR},
        "checkouts": list(checkouts.values()),
        "builds": list(builds.values()),
        "tests": tests,
    }


def _probe_tests(base: dict[str, Any], id_: str, path: str, name: str, probe: ProbeJSON,
                 run: str | None) -> list[dict[str, Any]]:  # fmt: skip
    """One other probe under a load: its status (a functional test that failed the kernel a
    FAIL, another failed one an ERROR, each with its reason), then each of its measures'
    maximum as a number."""
    part, status = _part(name), "FAIL" if probe.get("test_failed") else STATUS.get(probe["status"], "ERROR")
    misc = {"run": run, "status": probe["status"], "reason": probe["reason"]}
    tests = [{**base, "id": f"{id_}.{part}", "path": f"{path}.{part}", "status": status, "misc": misc}]
    for measure, stats in probe["merged"].items():
        value = _number(stats, "max_us")
        if value is not None:
            where = f"{part}.{_part(measure)}.max"
            tests.append({**base, "id": f"{id_}.{where}", "path": f"{path}.{where}", "status": status,
                          "number": {"value": value, "unit": "us"}})  # fmt: skip
    return tests


def _tests(summary: Summary, uid: str, origin: str, build_id: str, environment: dict[str, Any],
           with_worst: bool) -> list[dict[str, Any]]:  # fmt: skip
    deadline = summary.get("deadline")
    estimates = worst.of_summary(summary, WORST_P, 86400)["loads"] if with_worst else {}
    out = []
    for load, entry in summary["loads"].items():
        path = f"rtlab.{_part(load)}"
        status = STATUS.get(entry["status"], "ERROR")
        judged = deadline["loads"].get(load) if deadline is not None else None
        missed = judged is not None and judged["verdict"] == "miss"
        if status == "PASS" and missed:
            status = "FAIL"
        base = {"origin": origin, "build_id": build_id, "environment": environment,
                "start_time": summary.get("started")}  # fmt: skip
        if not base["start_time"]:
            del base["start_time"]
        misc: dict[str, Any] = {"run": summary["run"], "status": entry["status"], "reason": entry["reason"]}
        out.append(
            {**base, "id": f"{origin}:{uid}.{_part(load)}", "path": path, "status": status, "misc": misc}
        )
        for name, probe in entry.get("probes", {}).items():
            out += _probe_tests(base, f"{origin}:{uid}.{_part(load)}", path, name, probe, summary["run"])
        if entry["merged"] is None:
            continue
        scopes: dict[str, StatsJSON | None] = {"all": entry["merged"]}
        scopes.update({f"cpu{cpu}": stats for cpu, stats in entry["cpus"].items()})
        for scope, stats in scopes.items():
            for metric, key in (("max", "max_us"), ("p99_99", "p99_99_us")):
                value = _number(stats, key)
                test: dict[str, Any] = {
                    **base, "id": f"{origin}:{uid}.{_part(load)}.{scope}.{metric}",
                    "path": f"{path}.{scope}.{metric}", "status": status if value is not None else "MISS",
                }  # fmt: skip
                if value is not None:
                    test["number"] = {"value": value, "unit": "us"}
                else:
                    test["misc"] = {"reason": f"{key} is only a lower bound (beyond the histogram's range)"}
                out.append(test)
        found = (estimates.get(load) or {}).get("merged")
        if with_worst and found is not None:
            test = {**base, "id": f"{origin}:{uid}.{_part(load)}.all.worst_1e_9",
                    "path": f"{path}.all.worst_1e_9"}  # fmt: skip
            if found.get("refused") or found.get("quantile_us") is None:
                test.update(status="MISS", misc={"refused": found.get("refused") or "no estimate"})
            else:
                number = {"value": float(found["quantile_us"]), "unit": "us"}
                interval = found.get("quantile_ci_us")
                test.update(
                    status=status, number=number, misc={"interval_us": interval, "probability": WORST_P}
                )
            out.append(test)
    return out
