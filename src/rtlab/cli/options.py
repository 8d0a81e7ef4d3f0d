"""The options several commands share, defined once (typer's Annotated types)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rtlab.loads import BUILTIN, DEFAULT_LOADS

Format = Annotated[str, typer.Option("--format", "-f", help="table, md, csv, json, html or junit")]
Deadline = Annotated[str | None, typer.Option(help="e.g. 200us: pass/fail per load, exit code 1 on a miss")]
Series = Annotated[bool, typer.Option("--series", help="with --format csv: the time axis, one row per block")]
Figures = Annotated[
    Path | None, typer.Option("--figures", help="also write each figure as PNG into this folder")
]
AcceptKey = Annotated[
    bool, typer.Option("--accept-new-host-key", help="trust an SSH host key seen for the first time")
]
Trace = Annotated[
    str | None,
    typer.Option(
        help="spike causes: after each load's measurement, trace what makes samples above this, e.g. 500us"
    ),
]
TraceDuration = Annotated[
    str | None,
    typer.Option(help="with --trace: each load's trace pass (default: as long as the measurement)"),
]
TraceSpikes = Annotated[
    int | None, typer.Option(help="with --trace: at most this many traced spikes per load (default 20)")
]
TraceLevel = Annotated[
    str | None,
    typer.Option(
        help="with --trace: auto (the best the target has), a (rtla), b (tracefs) or c (no tracing)"
    ),
]
LOADS_HELP = (
    f"comma-separated, from {','.join(BUILTIN)} or a --loads-file (default {','.join(DEFAULT_LOADS)})"
)
LoadsFile = Annotated[
    Path | None,
    typer.Option(help="a TOML file of loads of your own (stress-ng lists or any command): docs/loads.md"),
]
IdleAfterBoot = Annotated[
    str | None,
    typer.Option(help="before the first load, wait until the target has been up this long, e.g. 3m"),
]
Junit = Annotated[Path | None, typer.Option(help="also write JUnit XML (one test case per load) here")]
History = Annotated[
    bool,
    typer.Option("--history", help="also add the result to the history store (default with RTLAB_HISTORY=1)"),
]
Probe = Annotated[
    str | None,
    typer.Option(
        help="more probes after cyclictest under each load: oslat, cyclicdeadline, timerlat "
        "(comma-separated; each measures --duration)"
    ),
]
HwlatGate = Annotated[
    str | None,
    typer.Option(
        help="before measuring, run the hwlat tracer and measure nothing (exit 1) if firmware, the "
        "hardware or a hypervisor took a CPU away longer than this, e.g. 20us"
    ),
]
HwlatDuration = Annotated[str | None, typer.Option(help="with --hwlat-gate: its hwlat pass (default 10s)")]
