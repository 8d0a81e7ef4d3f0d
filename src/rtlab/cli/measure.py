"""rtlab run, trace and collect: measuring on one target or several."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rtlab import children
from rtlab.bounds import MAX_REPEATS
from rtlab.cli.options import (
    AcceptKey,
    History,
    Junit,
    LoadsFile,
    Name,
    Preset,
    RunDeadline,
    plan_of,
    run_options,
    target_spec,
)
from rtlab.cli.present import conclude, out_dir
from rtlab.cli.screen import console, err
from rtlab.errors import RunFailed, Stopped, UsageError
from rtlab.names import slug
from rtlab.plan import Plan
from rtlab.rundir import layout
from rtlab.units import format_duration, parse_duration, parse_latency

TRACE_DURATION = "30s"  # rtlab trace's measurement per load, then a trace pass as long

if TYPE_CHECKING:
    from rtlab.analysis.verdict import Deadlines
    from rtlab.rundir.events import Event
    from rtlab.targets.base import Target


@run_options()
def run(
    options: dict[str, str],
    target: Annotated[
        list[str] | None,
        typer.Option(  # help is rich markup to typer: unescaped, [user@] would vanish as a tag
            help="local, ssh://\\[user@]host[:port], qemu:... or labgrid:PLACE; "
            "several boards run in parallel",
            callback=target_spec,
        ),
    ] = None,
    preset_name: Preset = None,
    out: Annotated[
        str | None, typer.Option(help="the run directory (default results/<date>-<host>-<kernel>)")
    ] = None,
    name: Name = None,
    loads_file: LoadsFile = None,
    deadline: RunDeadline = None,
    junit: Junit = None,
    rt_cpus: Annotated[str | None, typer.Option(help="measure on these CPUs only, e.g. 2-3")] = None,
    loads_on: Annotated[
        str | None, typer.Option(help="with --rt-cpus: housekeeping (default) or all")
    ] = None,
    tune_too: Annotated[
        bool, typer.Option("--tune", help="apply rtlab tune for the run, revert it after")
    ] = False,
    repeat: Annotated[
        int,
        typer.Option(
            min=1,
            max=MAX_REPEATS,
            help="measure the whole campaign this many times, for the spread (RUN/repeat-K)",
        ),
    ] = 1,
    accept_new_host_key: AcceptKey = False,
    history: History = False,
) -> None:
    """Measure latency under each load, one after another, and print the table."""
    from rtlab.cli import campaigns
    from rtlab.progress import RunProgress
    from rtlab.runner import execute
    from rtlab.targets import open_target

    folder = out_dir(out)
    plan = plan_of(preset_name, loads_file, options)
    judged_by = deadline_for(deadline, plan, target)  # bad syntax is found before minutes of measuring
    if rt_cpus is not None or loads_on is not None or tune_too:
        plan = replace(plan, rt_cpus=rt_cpus, loads_on=loads_on or "housekeeping", tune=tune_too).validate()
    specs = target or ["local"]
    if repeat > 1 and len(specs) > 1:
        raise UsageError("--repeat measures one target: give one --target, or run once per board")
    targets = [open_target(spec, accept_new_host_key) for spec in specs]
    names = ", ".join(t.name for t in targets)
    each = f"{format_duration(plan.duration_s)} each (about {format_duration(plan.measuring_seconds())})"
    err.print(f"measuring {','.join(plan.loads)} on {names}, {each}", highlight=False)
    if len(targets) > 1:
        _run_parallel(plan, targets, folder, name)
    elif repeat > 1:
        campaigns.repeats(
            plan, specs[0], accept_new_host_key, folder, name, repeat, judged_by, junit, history
        )
    else:
        with RunProgress(plan, err) as progress:
            outcome = execute(plan, targets[0], out=folder, name=name, on_event=progress)
        conclude(outcome, judged_by, junit, history)


def deadline_for(deadline: str | None, plan: Plan, target: list[str] | None) -> Deadlines | None:
    """--deadline: a latency, or `history[:BOARD][@RATE]` (each load's limit from the board's history)."""
    from rtlab.cli.history import history_deadlines
    from rtlab.cli.present import deadlines_of

    if deadline is not None and deadline.split(":")[0].split("@")[0] == "history":
        return history_deadlines(deadline, plan.loads, plan.duration_s, (target or ["local"])[0])  # type: ignore[no-any-return]
    return deadlines_of(deadline)


@run_options(
    skip=("trace",),
    helps={
        "duration": "per load: the measurement, then a trace pass as long "
        f"(default {TRACE_DURATION}); with --hwlat, its pass"
    },
)
def trace(
    options: dict[str, str],
    threshold: Annotated[
        str | None, typer.Option(help="trace what makes samples above this, e.g. 500us (hwlat: 10us)")
    ] = None,
    target: Annotated[str, typer.Option(help="local, ssh://... or qemu:...", callback=target_spec)] = "local",
    loads_file: LoadsFile = None,
    hwlat: Annotated[
        bool, typer.Option("--hwlat", help="run the hwlat tracer alone instead: firmware and hardware gaps")
    ] = False,
    rt_cpus: Annotated[
        str | None, typer.Option(help="measure and trace (or with --hwlat, trace) these CPUs only, e.g. 2-3")
    ] = None,
    out: Annotated[str | None, typer.Option(help="the run directory (default results/...)")] = None,
    accept_new_host_key: AcceptKey = False,
) -> None:
    """Hunt spike causes: each load measured, then traced; the table and the causes.
    The same as `rtlab run --trace THRESHOLD`, with a shorter default duration. With --hwlat,
    the kernel's hwlat tracer alone (never during a measurement)."""
    if hwlat:  # the tracer alone: nothing is measured, so no other run option can take effect
        unused = [f"--{key}" for key in options if key != "duration"]
        if loads_file is not None:
            unused.append("--loads-file")
        if unused:
            raise UsageError(
                f"{', '.join(unused)}: no effect with --hwlat, which runs the hwlat tracer alone "
                "(its options: --duration, --threshold, --rt-cpus): drop them, or drop --hwlat"
            )
    options = {"duration": TRACE_DURATION, **options}
    if hwlat:
        _hwlat(target, threshold or "10us", options["duration"], rt_cpus, out, accept_new_host_key)
        return
    if threshold is None:
        raise UsageError("rtlab trace needs --threshold, e.g. --threshold 500us (or --hwlat)")
    run(options={**options, "trace": threshold}, target=[target], out=out, loads_file=loads_file,
        rt_cpus=rt_cpus, accept_new_host_key=accept_new_host_key)  # fmt: skip


def _hwlat(
    target: str, threshold: str, duration: str, rt_cpus: str | None, out: str | None, accept: bool
) -> None:
    from datetime import datetime

    from rtlab.runner import hwlat as hw
    from rtlab.system import cpus
    from rtlab.targets import open_target

    seconds = parse_duration(duration)
    threshold_us = parse_latency(threshold)
    if rt_cpus is not None:
        cpus.parse_list(rt_cpus)
    folder = out_dir(out) or Path("results") / f"{datetime.now():%Y%m%d-%H%M%S}-hwlat"
    if (folder / layout.HWLAT_JSON).exists():
        raise UsageError(f"{folder} already holds an hwlat pass: choose another --out")
    tgt = open_target(target, accept)
    held: list[int] = []
    try:
        doc = hw.run(tgt, folder, seconds, threshold_us, rt_cpus)
    finally:
        with children.stops_deferred(noted=held):  # a guest powers off whole, a stop keeps its words
            tgt.close()
    for line in hw.describe(doc):
        (err if line.startswith("warning") else console).print(line, highlight=False)
    err.print(f"saved in {folder}", highlight=False)
    if held:
        raise Stopped(f"interrupted as {tgt.name} was closed, after the pass: it is saved in {folder}")


def _run_parallel(plan: Plan, targets: list[Target], out: Path | None, name: str | None) -> None:
    """One run per board, all at once; one failing board does not stop the others."""
    from rtlab.analysis import probes
    from rtlab.report.formats import table
    from rtlab.rundir.events import HOST_SAID, Kind
    from rtlab.runner import Outcome, execute_parallel

    shown = {Kind.LOAD_START, Kind.LOAD_END, Kind.DONE, *HOST_SAID}

    def line(tgt: Target, event: Event) -> None:
        if event.kind in shown:
            detail = " ".join(f"{k}={v}" for k, v in event.fields.items())
            err.print(f"[{tgt.name}] {event.kind} {detail}", highlight=False)

    folders = {t.name: out / slug(t.name) if out is not None else None for t in targets}
    outcomes = execute_parallel(plan, targets, folders, name, line)
    failed = False
    for t in targets:
        result = outcomes.get(t.name)
        if isinstance(result, Outcome):
            summary = result.summary
            console.print(table.build([summary], [t.name]))
            gave = probes.failed(summary)
            status = summary["status"] + (f", but a probe failed: {'; '.join(gave)}" if gave else "")
            err.print(f"{t.name}: {status}, saved in {result.run.path}", highlight=False)
            failed |= summary["status"] != "complete" or result.interrupted or bool(gave)
        else:
            err.print(f"{t.name}: failed: {result}", highlight=False)
            failed = True
    if failed:
        raise RunFailed("not every board completed its run and its probes: see above")


def collect(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN")],
    accept_new_host_key: AcceptKey = False,
) -> None:
    """Fetch the results of an SSH run whose connection dropped, once the board is reachable."""
    from rtlab.runner import collect as collect_run

    outcome = collect_run(run_dir, accept_new_host_key)
    if outcome.note:
        err.print(outcome.note, highlight=False)
    conclude(outcome)


def register(app: typer.Typer) -> None:
    app.command()(run)
    app.command()(trace)
    app.command()(collect)
