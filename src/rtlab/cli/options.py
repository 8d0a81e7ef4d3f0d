"""The options several commands share, defined once (typer's Annotated types)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from rtlab.plan import OPTION


def run_option(key: str) -> Any:
    """typer's option for one of the run's options (plan.OPTIONS), its help from that table."""
    return typer.Option(f"--{key}", help=OPTION[key].help)


Format = Annotated[str, typer.Option("--format", "-f", help="table, md, csv, json, html or junit")]
Deadline = Annotated[str | None, typer.Option(help="e.g. 200us: pass/fail per load, exit code 1 on a miss")]
Series = Annotated[bool, typer.Option("--series", help="with --format csv: the time axis, one row per block")]
Figures = Annotated[
    Path | None, typer.Option("--figures", help="also write each figure as PNG into this folder")
]
AcceptKey = Annotated[
    bool, typer.Option("--accept-new-host-key", help="trust an SSH host key seen for the first time")
]
Trace = Annotated[str | None, run_option("trace")]
TraceDuration = Annotated[str | None, run_option("trace-duration")]
TraceSpikes = Annotated[int | None, run_option("trace-spikes")]
TraceLevel = Annotated[str | None, run_option("trace-level")]
LOADS_HELP = OPTION["loads"].help
LoadsFile = Annotated[
    Path | None,
    typer.Option(help="a TOML file of loads of your own (stress-ng lists or any command): docs/loads.md"),
]
IdleAfterBoot = Annotated[str | None, run_option("idle-after-boot")]
Junit = Annotated[Path | None, typer.Option(help="also write JUnit XML (one test case per load) here")]
History = Annotated[
    bool,
    typer.Option("--history", help="also add the result to the history store (default with RTLAB_HISTORY=1)"),
]
Probe = Annotated[str | None, run_option("probe")]
HwlatGate = Annotated[str | None, run_option("hwlat-gate")]
HwlatDuration = Annotated[str | None, run_option("hwlat-duration")]
