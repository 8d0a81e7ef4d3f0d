"""SQUAD, Linaro's test-result database behind LKFT: each run a test run of a build in an
environment (`POST /api/submit/TEAM/PROJECT/BUILD/ENVIRONMENT`), with

    tests     rtlab/<load>: pass; fail when it missed the deadline or failed; skip when never run;
              rtlab/<load>-<probe> each other probe (--probe) alike: fail when it did not pass
    metrics   rtlab/<load>-<p99|p99.99|max>[-cpuN] in µs (merged, and per CPU),
              rtlab/<load>-<probe>-<measure>-max: each other probe's maximum, and
              rtlab/<load>-ops-per-s: its throughput, where stress-ng reported one
    metadata  job_id (the run's uid: a run sent again is refused by SQUAD, never doubled), the
              kernel, the board, the plan and rtlab's version

A p99.99 beyond the histogram's range is only a lower bound: it is left out, never sent as a
number. The token goes only into the Auth-Token header SQUAD reads.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rtlab import __version__
from rtlab.boundary import web
from rtlab.boundary.shapes import Sysinfo
from rtlab.boundary.summary_shapes import Summary
from rtlab.errors import RunFailed, UsageError

STATUS = {"complete": "pass", "failed": "fail", "partial": "fail", "not-run": "skip"}
METRICS = (("p99", "p99_us"), ("p99.99", "p99_99_us"), ("max", "max_us"))
_SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


def slug(text: str, what: str) -> str:
    if not _SLUG.fullmatch(text) or len(text) > 100:
        raise UsageError(f"--{what} {text!r}: SQUAD names are letters, digits and ._+- (up to 100)")
    return text


def submission(summary: Summary, info: Sysinfo | None, uid: str) -> dict[str, dict[str, Any]]:
    """The tests, metrics and metadata of one run, as SQUAD's submit API takes them."""
    tests: dict[str, str] = {}
    metrics: dict[str, dict[str, Any]] = {}
    deadline = summary.get("deadline")
    for load, entry in summary["loads"].items():
        status = STATUS.get(entry["status"], "fail")
        judged = deadline["loads"].get(load) if deadline is not None else None
        if status == "pass" and judged is not None and judged["verdict"] == "miss":
            status = "fail"
        tests[f"rtlab/{load}"] = status
        for name, probe in entry.get("probes", {}).items():
            tests[f"rtlab/{load}-{name}"] = STATUS.get(probe["status"], "fail")
            for measure, stats in probe["merged"].items():
                if stats.get("max_us") is not None and "max_us" not in stats["lower_bounds"]:
                    metrics[f"rtlab/{load}-{name}-{measure}-max"] = {"value": stats["max_us"], "unit": "us"}
        if entry["merged"] is None:
            continue
        scopes = {"": entry["merged"], **{f"-cpu{cpu}": stats for cpu, stats in entry["cpus"].items()}}
        for scope, stats in scopes.items():
            for name, key in METRICS:
                value = stats.get(key)
                if value is not None and key not in stats["lower_bounds"]:
                    metrics[f"rtlab/{load}-{name}{scope}"] = {"value": value, "unit": "us"}
        work = entry.get("throughput")
        ops = work["ops_per_s"] if work else None
        if ops is not None and entry["status"] == "complete":
            metrics[f"rtlab/{load}-ops-per-s"] = {"value": ops, "unit": "ops/s"}
    system = summary["system"]
    board = (info or {}).get("board") or {}
    plan = summary["plan"]
    metadata = {
        "job_id": uid,
        "run": summary["run"],
        "rtlab_version": __version__,
        "kernel_release": system.get("kernel_release"),
        "kernel_version": system.get("kernel_version"),
        "preemption": system["preemption"],
        "machine": system.get("machine"),
        "hostname": system.get("hostname"),
        "cpu_model": system.get("cpu_model"),
        "board_model": board.get("model"),
        "plan": {k: plan.get(k) for k in ("loads", "duration_s", "interval_us", "priority", "rt_cpus")},
    }
    return {"tests": tests, "metrics": metrics, "metadata": metadata}


def submit(url: str, token: str | None, team: str, project: str, build: str, environment: str,
           found: dict[str, dict[str, Any]], deadline_s: float = web.DEADLINE_S) -> None:  # fmt: skip
    """One run to SQUAD; UsageError or RunFailed with what the server said."""
    credential = {"Auth-Token": token} if token is not None else None
    where = f"{url.rstrip('/')}/api/submit/{team}/{project}/{build}/{environment}"
    fields = {name: json.dumps(value) for name, value in found.items()}
    answer = web.request("POST", where, credential=credential, deadline_s=deadline_s, fields=fields)
    if answer.status_code in (401, 403):
        how = "give --token-file with a token that may submit to this project"
        raise UsageError(f"{url} refused the submission (HTTP {answer.status_code}): {how}")
    if answer.status_code == 404:
        raise UsageError(f"{where} does not exist (HTTP 404): check --url, --team and --project")
    if not answer.ok:
        raise RunFailed(f"{url} did not take the run (HTTP {answer.status_code}): {answer.message()}")
