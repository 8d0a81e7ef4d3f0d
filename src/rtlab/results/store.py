"""Reading runs from disk into summaries: the I/O edge in front of analysis.

A damaged file costs only what it holds: a cut-off run.json leaves the plan's own files
(plan.loads, cyclictest.argv) to say what was measured, a damaged sysinfo.json or events
file leaves the loads reportable, and each such file is named in the summary's warnings.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rtlab.analysis.summary import summarize
from rtlab.results import liveness
from rtlab.results.events import Event
from rtlab.results.rundir import RunDir, UnreadableFile


def _plan_from_files(run: RunDir) -> dict[str, Any]:
    """The little of the plan that the agent's own files hold."""
    loads = run.planned_loads()
    histogram_us = 0
    for load in loads:
        argv = run.load_dir(load) / "cyclictest.argv"
        if argv.is_file():
            match = re.search(r"^-h\n(\d+)$", argv.read_text(), re.MULTILINE)
            histogram_us = int(match.group(1)) if match else 0
            break
    return {"loads": loads, "histogram_us": histogram_us}


def read(run: RunDir) -> tuple[dict[str, Any], dict[str, Any] | None, list[Event], list[str]]:
    """manifest, sysinfo, events and the one-line problems of the files that could not be read."""
    problems: list[str] = []
    try:
        manifest = run.manifest()
    except UnreadableFile as e:
        problems.append(f"{e}; the plan is read from plan.loads")
        manifest = {"id": run.path.name, "plan": _plan_from_files(run), "status": "unknown"}
    try:
        info = run.sysinfo()
    except UnreadableFile as e:
        problems.append(f"{e}; the system facts are missing")
        info = None
    try:
        events = run.events()
    except UnreadableFile as e:
        problems.append(str(e))
        events = []
    return manifest, info, events, problems


def summary(path: Path) -> dict[str, Any]:
    """The summary of the run at `path`, always recomputed from its raw results."""
    run = RunDir.open(path)
    manifest, info, events, problems = read(run)
    note = liveness.abandoned(manifest, path)
    if note:
        problems.append(note)
    loads = (manifest.get("plan") or {}).get("loads", [])
    return summarize(manifest, info, {load: run.raw_load(load) for load in loads}, events, problems)
