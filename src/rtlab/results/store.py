"""Reading runs from disk into summaries: the I/O edge in front of analysis."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rtlab.analysis.summary import summarize
from rtlab.results.rundir import RunDir


def summary(path: Path) -> dict[str, Any]:
    """The summary of the run at `path`, always recomputed from its raw results."""
    run = RunDir.open(path)
    manifest = run.manifest()
    loads = (manifest.get("plan") or {}).get("loads", [])
    results = {load: run.cyclictest(load) for load in loads}
    return summarize(manifest, run.sysinfo(), results, run.events())
