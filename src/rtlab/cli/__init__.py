"""The command line: parse, call, render. Names and exit codes are part of the contract:
0 ok, 1 a deadline was missed, 2 bad input or a missing dependency, 3 the run failed."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rtlab import __version__, report, untrusted
from rtlab.cli import export, kernel
from rtlab.cli.history import Db as HistoryDb
from rtlab.cli.history import app as history_app
from rtlab.cli.history import baseline_of as history_baseline
from rtlab.cli.history import remember
from rtlab.cli.options import (
    LOADS_HELP,
    AcceptKey,
    Deadline,
    Figures,
    Format,
    History,
    HwlatDuration,
    HwlatGate,
    IdleAfterBoot,
    Junit,
    LoadsFile,
    Probe,
    Series,
    Trace,
    TraceDuration,
    TraceLevel,
    TraceSpikes,
    run_option,
)
from rtlab.cli.screen import Output, console, emit, err
from rtlab.errors import RunFailed, UsageError
from rtlab.loads import read_file
from rtlab.names import slug
from rtlab.plan import Plan, from_options, preset
from rtlab.units import format_duration, parse_duration, parse_latency

# Everything else is imported by the command that needs it: `rtlab --help` must not pay
# for numpy, matplotlib, asyncssh or the kernel builder (bench/bench_startup.py).
if TYPE_CHECKING:
    from rtlab.analysis.verdicts import Margin
    from rtlab.lava_server import Server
    from rtlab.results.events import Event
    from rtlab.runner import Outcome
    from rtlab.shapes import Summary
    from rtlab.system.files import Files
    from rtlab.targets.base import Target

app = typer.Typer(
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish
    no_args_is_help=True,
    help="Measure, compare and explain the scheduling latency of real-time Linux.",
    pretty_exceptions_enable=False,
)


def _print_version(given: bool) -> None:
    if given:
        print(f"rtlab {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="print the version")
    ] = False,
) -> None:
    """Measure, compare and explain the scheduling latency of real-time Linux."""


def _plan(preset_name: str | None, loads_file: Path | None = None, **given: object) -> Plan:
    """The preset (or the defaults), a loads file's loads, and every run option the user gave
    (plan.OPTIONS: keyword arguments named as the options, `_` for `-`) on top."""
    base = preset(preset_name) if preset_name else Plan()
    if loads_file is not None:
        custom = read_file(loads_file)
        # a file's loads are what it is for: measured unless --loads says otherwise
        base = replace(base, custom_loads=custom, loads=tuple(load.name for load in custom))
    return from_options(base, {key.replace("_", "-"): value for key, value in given.items()})


def _present(
    summaries: list[Summary],
    labels: list[str],
    fmt: str = "table",
    output: Path | None = None,
    deadline: str | None = None,
    figures_dir: Path | None = None,
    junit: Path | None = None,
    series: bool = False,
) -> None:
    """Renders runs in one format (plus JUnit and PNG figures on request); exit 1 on a missed deadline."""
    from rtlab.analysis import compare as fairness
    from rtlab.analysis.verdict import with_deadline
    from rtlab.report import table

    render = report.renderer(fmt)
    if series:
        if fmt != "csv":
            raise UsageError("--series is a CSV export: add --format csv")
        from rtlab.report import csv_format

        render = csv_format.render_series
    deadline_us = parse_latency(deadline) if deadline is not None else None
    summaries = [with_deadline(s, deadline_us) for s in summaries]
    if fmt == "table" and output is None:
        summaries = [untrusted.printable_tree(s) for s in summaries]
        for section in table.sections(summaries, labels, console.width):
            console.print(section)
        for summary, label in zip(summaries, labels, strict=True):
            for warning in summary["warnings"]:
                prefix = f"{label}: " if len(summaries) > 1 else ""
                err.print(f"warning: {prefix}{warning['message']}", highlight=False)
        for warning in fairness.warnings(summaries, labels):
            err.print(f"warning: {warning['message']}", highlight=False)
    else:
        emit(render(summaries, labels), output)
    if junit is not None:
        emit(report.renderer("junit")(summaries, labels), junit)
    if figures_dir is not None:
        from rtlab.report import figures

        for path in figures.save_png(figures.all_figures(summaries, labels, deadline_us), figures_dir):
            err.print(f"wrote {path}", highlight=False)
    if deadline_us is not None and not all(s["deadline"]["pass"] for s in summaries):
        missed = [
            f"{label} {load} ({v['max_us']} µs)" if v["max_us"] is not None else f"{label} {load} (no data)"
            for s, label in zip(summaries, labels, strict=True)
            for load, v in s["deadline"]["loads"].items()
            if v["verdict"] != "pass"
        ]
        err.print(f"deadline {deadline_us} µs missed: {', '.join(missed)}", highlight=False)
        raise typer.Exit(1)


@app.command()
def run(
    target: Annotated[
        list[str] | None,
        typer.Option(
            help="local, ssh://[user@]host[:port], qemu:... or labgrid:PLACE; several boards run in parallel"
        ),
    ] = None,
    loads: Annotated[str | None, run_option("loads")] = None,
    duration: Annotated[str | None, run_option("duration")] = None,
    interval: Annotated[str | None, run_option("interval")] = None,
    priority: Annotated[int | None, run_option("priority")] = None,
    preset_name: Annotated[str | None, typer.Option("--preset", help="starfive: the seed protocol")] = None,
    out: Annotated[
        str | None, typer.Option(help="the run directory (default results/<date>-<host>-<kernel>)")
    ] = None,
    name: Annotated[str | None, typer.Option(help="the run's id in reports")] = None,
    settle: Annotated[str | None, run_option("settle")] = None,
    workers: Annotated[int | None, run_option("workers")] = None,
    storage_dir: Annotated[Path | None, run_option("storage-dir")] = None,
    histogram_range: Annotated[str | None, run_option("histogram-range")] = None,
    governor: Annotated[str | None, run_option("governor")] = None,
    block: Annotated[str | None, run_option("block")] = None,
    spike_threshold: Annotated[str | None, run_option("spike-threshold")] = None,
    segment: Annotated[str | None, run_option("segment")] = None,
    trace: Trace = None,
    trace_duration: TraceDuration = None,
    trace_spikes: TraceSpikes = None,
    trace_level: TraceLevel = None,
    loads_file: LoadsFile = None,
    idle_after_boot: IdleAfterBoot = None,
    probe: Probe = None,
    hwlat_gate: HwlatGate = None,
    hwlat_duration: HwlatDuration = None,
    deadline: Deadline = None,
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
        typer.Option(help="measure the whole campaign this many times, for the spread (RUN/repeat-K)"),
    ] = 1,
    accept_new_host_key: AcceptKey = False,
    history: History = False,
) -> None:
    """Measure latency under each load, one after another, and print the table."""
    from rtlab.progress import RunProgress
    from rtlab.runner import execute
    from rtlab.targets import open_target

    if deadline is not None:
        parse_latency(deadline)  # bad syntax is found before minutes of measuring
    out_dir = _out_dir(out)
    plan = _plan(
        preset_name, loads_file, loads=loads, duration=duration, interval=interval, priority=priority,
        settle=settle, workers=workers, storage_dir=storage_dir, histogram_range=histogram_range,
        governor=governor, block=block, spike_threshold=spike_threshold, segment=segment, trace=trace,
        trace_duration=trace_duration, trace_spikes=trace_spikes, trace_level=trace_level,
        idle_after_boot=idle_after_boot, probe=probe, hwlat_gate=hwlat_gate, hwlat_duration=hwlat_duration,
    )  # fmt: skip
    if rt_cpus is not None or loads_on is not None or tune_too:
        plan = replace(plan, rt_cpus=rt_cpus, loads_on=loads_on or "housekeeping", tune=tune_too).validate()
    specs = target or ["local"]
    targets = [open_target(spec, accept_new_host_key) for spec in specs]
    total = plan.measuring_seconds()
    err.print(
        f"measuring {','.join(plan.loads)} on {', '.join(t.name for t in targets)}, "
        f"{format_duration(plan.duration_s)} each (about {format_duration(total)})",
        highlight=False,
    )
    if repeat < 1:
        raise UsageError(f"--repeat {repeat}: give 1 or more")
    if repeat > 1 and len(targets) > 1:
        raise UsageError("--repeat measures one target: give one --target, or run once per board")
    if len(targets) > 1:
        _run_parallel(plan, targets, out_dir, name, deadline, junit)
        return
    if repeat > 1:
        _run_repeats(plan, specs[0], accept_new_host_key, out_dir, name, repeat, deadline, junit, history)
        return
    with RunProgress(plan, err) as progress:
        outcome = execute(plan, targets[0], out=out_dir, name=name, on_event=progress)
    _conclude(outcome, deadline, junit, history)


@app.command("trace")
def trace_command(
    threshold: Annotated[
        str | None, typer.Option(help="trace what makes samples above this, e.g. 500us (hwlat: 10us)")
    ] = None,
    target: Annotated[str, typer.Option(help="local, ssh://... or qemu:...")] = "local",
    loads: Annotated[str | None, typer.Option(help=LOADS_HELP)] = None,
    duration: Annotated[
        str, typer.Option(help="per load: the measurement, then a trace pass as long (default 30s)")
    ] = "30s",
    trace_spikes: TraceSpikes = None,
    trace_level: TraceLevel = None,
    hwlat: Annotated[
        bool, typer.Option("--hwlat", help="run the hwlat tracer alone instead: firmware and hardware gaps")
    ] = False,
    rt_cpus: Annotated[str | None, typer.Option(help="with --hwlat: only these CPUs, e.g. 2-3")] = None,
    out: Annotated[str | None, typer.Option(help="the run directory (default results/...)")] = None,
    accept_new_host_key: AcceptKey = False,
) -> None:
    """Hunt spike causes: each load measured, then traced; the table and the causes.
    The same as `rtlab run --trace THRESHOLD`, with a shorter default duration. With --hwlat,
    the kernel's hwlat tracer alone (never during a measurement)."""
    if hwlat:
        _hwlat(target, threshold or "10us", duration, rt_cpus, out, accept_new_host_key)
        return
    if threshold is None:
        raise UsageError("rtlab trace needs --threshold, e.g. --threshold 500us (or --hwlat)")
    run(
        target=[target], loads=loads, duration=duration, out=out, trace=threshold,
        trace_spikes=trace_spikes, trace_level=trace_level, accept_new_host_key=accept_new_host_key,
    )  # fmt: skip


def _hwlat(
    target: str, threshold: str, duration: str, rt_cpus: str | None, out: str | None, accept: bool
) -> None:
    from datetime import datetime

    from rtlab import hwlat as hw
    from rtlab.system import cpus
    from rtlab.targets import open_target

    seconds = parse_duration(duration)
    threshold_us = parse_latency(threshold)
    if rt_cpus is not None:
        cpus.parse_list(rt_cpus)
    folder = _out_dir(out) or Path("results") / f"{datetime.now():%Y%m%d-%H%M%S}-hwlat"
    if (folder / "hwlat.json").exists():
        raise UsageError(f"{folder} already holds an hwlat pass: choose another --out")
    tgt = open_target(target, accept)
    try:
        doc = hw.run(tgt, folder, seconds, threshold_us, rt_cpus)
    finally:
        tgt.close()
    for line in hw.describe(doc):
        (err if line.startswith("warning") else console).print(line, highlight=False)
    err.print(f"saved in {folder}", highlight=False)


def _out_dir(out: str | None) -> Path | None:
    if out is None:
        return None
    if not out.strip():
        raise UsageError("--out is empty: give the run directory's path, or leave --out out for the default")
    path = Path(out)
    for parent in (path, *path.parents):
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"--out {out}: {parent} is a file, not a folder: choose another --out")
            break
    return path


def _conclude(outcome: Outcome, deadline: str | None, junit: Path | None, history: bool = False) -> None:
    summary = outcome.summary
    err.print(f"run saved in {outcome.run.path}", highlight=False)
    remember(outcome.run.path, history)
    try:
        _present([summary], [summary["run"] or outcome.run.path.name], deadline=deadline, junit=junit)
    finally:
        if outcome.interrupted:
            raise RunFailed(f"interrupted: the run is {summary['status']}, what was measured is kept")
        if summary["status"] != "complete":
            raise RunFailed(f"the run is {summary['status']}: see {outcome.run.path}/events")


def _run_parallel(
    plan: Plan,
    targets: list[Target],
    out: Path | None,
    name: str | None,
    deadline: str | None,
    junit: Path | None,
) -> None:
    """One run per board, all at once; one failing board does not stop the others."""
    from rtlab.report import table
    from rtlab.results.events import HOST_SAID, Kind
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
            err.print(f"{t.name}: {summary['status']}, saved in {result.run.path}", highlight=False)
            failed |= summary["status"] != "complete" or result.interrupted
        else:
            err.print(f"{t.name}: failed: {result}", highlight=False)
            failed = True
    if failed:
        raise RunFailed("not every board completed its run: see above")


def _run_repeats(
    plan: Plan,
    spec: str,
    accept_new_host_key: bool,
    out: Path | None,
    name: str | None,
    n: int,
    deadline: str | None,
    junit: Path | None,
    history: bool = False,
) -> None:
    """The campaign N times, each a whole run in OUT/repeat-K, then the table of all of them
    (analysis/repeats.py). The same command again goes on where an interrupted one stopped."""
    from datetime import datetime

    from rtlab import store
    from rtlab.analysis import repeats
    from rtlab.progress import RunProgress
    from rtlab.results import rundir
    from rtlab.results.rundir import move_aside, read_json, write_json
    from rtlab.runner import execute
    from rtlab.targets import open_target

    folder = out or Path("results") / f"{datetime.now():%Y%m%d-%H%M%S}-x{n}"
    index = folder / repeats.FILE
    if index.is_file():
        before = read_json(index).get("n")
        if before != n:
            raise UsageError(
                f"{folder} holds a campaign of {before} repeats: give --repeat {before}, or another --out"
            )
    elif folder.exists() and any(folder.iterdir()):
        raise UsageError(f"--out {folder} is not empty: give a new folder for the repeats")
    else:
        folder.mkdir(parents=True, exist_ok=True)
        write_json(index, {"schema": repeats.SCHEMA, "n": n})
    for k in range(1, n + 1):
        where = folder / repeats.folder(k)
        if (where / rundir.MANIFEST).is_file() and read_json(where / rundir.MANIFEST).get(
            "status"
        ) == "complete":
            err.print(f"repeat {k}/{n}: measured before", highlight=False)
            continue
        if where.exists():
            move_aside(where)
        err.print(f"repeat {k}/{n}", highlight=False)
        with RunProgress(plan, err) as progress:
            outcome = execute(
                plan, open_target(spec, accept_new_host_key), out=where, name=f"{name or folder.name}-{k}",
                on_event=progress,
            )  # fmt: skip
        if outcome.interrupted:
            raise RunFailed(f"interrupted in repeat {k} of {n}: run the same command again to go on")
    summary = store.summary(folder)
    err.print(f"runs saved in {folder}", highlight=False)
    remember(folder, history)
    try:
        _present([summary], [name or folder.name], deadline=deadline, junit=junit)
    finally:
        if summary["status"] != "complete":
            raise RunFailed(f"not every repeat is complete: see {folder}/repeat-*/events")


@app.command()
def scan(
    target: Annotated[str, typer.Option(help="local, ssh://... or qemu:...")] = "local",
    classes: Annotated[
        str | None, typer.Option("--class", help="stress-ng classes, e.g. cpu,os (default: every stressor)")
    ] = None,
    stressors: Annotated[str | None, typer.Option(help="stressors by name, e.g. sock,timer")] = None,
    per_stressor: Annotated[str, typer.Option(help="measurement per stressor")] = "10s",
    settle: Annotated[str, typer.Option(help="stressor running before measuring")] = "1s",
    top: Annotated[int, typer.Option(help="how many of the worst go into the loads file")] = 5,
    out: Annotated[
        str | None, typer.Option(help="the scan's folder (default results/<date>-scan); again: resume")
    ] = None,
    accept_new_host_key: AcceptKey = False,
) -> None:
    """Rank stress-ng's stressors by the latency they cause, each briefly under cyclictest, and
    write a loads file of the worst (the StarFive study's section 3.2). Resumable: the same
    command again goes on where an interrupted scan stopped."""
    from datetime import datetime

    from rtlab import scan as scanning
    from rtlab.report import scan_table
    from rtlab.targets import open_target

    if top < 1:
        raise UsageError(f"--top {top}: give 1 or more")
    names = [n.strip() for n in (stressors or "").split(",") if n.strip()]
    wanted = [c.strip() for c in (classes or "").split(",") if c.strip()]
    plan = _plan(None, duration=per_stressor, settle=settle)
    folder = _out_dir(out) or Path("results") / f"{datetime.now():%Y%m%d-%H%M%S}-scan"
    first = open_target(target, accept_new_host_key)
    try:
        choice = scanning.choose(scanning.stressor_lists(first, wanted), wanted, names)
    finally:
        first.close()
    if not choice.stressors:
        raise UsageError(f"none of {', '.join(choice.missing)} is a stressor of stress-ng on {first.name}")
    err.print(
        f"scanning {len(choice.stressors)} stressors on {first.name}, "
        f"{format_duration(plan.duration_s)} each",
        highlight=False,
    )
    doc = scanning.run(
        lambda: open_target(target, accept_new_host_key), plan, choice, folder, first.name,
        lambda line: err.print(line, highlight=False),
    )  # fmt: skip
    console.print(scan_table.build(doc))
    for line in scan_table.notes(doc):
        err.print(line, highlight=False)
    if doc["ranking"]:
        scanning.write_top(doc, top, folder / "top-loads.toml")
        err.print(f"the {min(top, len(doc['ranking']))} worst as a loads file: {folder / 'top-loads.toml'}")
    err.print(f"saved in {folder}", highlight=False)


@app.command()
def study(
    study_file: Annotated[Path, typer.Argument(metavar="STUDY.toml")],
    out: Annotated[
        str | None, typer.Option(help="the study's folder (default results/<date>-<name>); again: resume")
    ] = None,
    duration: Annotated[
        str | None, typer.Option(help="per load, instead of the file's (a short try)")
    ] = None,
    settle: Annotated[
        str | None, typer.Option(help="load running before measuring, instead of the file's")
    ] = None,
    idle_after_boot: Annotated[
        str | None, typer.Option(help="wait after boot, instead of the file's (0s: not at all)")
    ] = None,
    accept_new_host_key: AcceptKey = False,
    history: History = False,
) -> None:
    """Targets (kernels) x tuning stages x loads from one file, one run each, then the
    comparison of all of them (examples/*.toml). Resumable: the same command again goes on
    where an interrupted study stopped."""
    from datetime import datetime

    from rtlab import store
    from rtlab import study as studies
    from rtlab.analysis.verdicts import Margin
    from rtlab.progress import RunProgress
    from rtlab.report import verdict_table
    from rtlab.results import rundir
    from rtlab.results.rundir import write_atomic
    from rtlab.runner import execute
    from rtlab.targets import open_target

    plan_of = studies.read(study_file)
    instead = {"duration": duration, "settle": settle, "idle-after-boot": idle_after_boot}
    given = {**plan_of.options, **{k: v for k, v in instead.items() if v is not None}}
    base = _plan(given.get("preset"), plan_of.loads_file, **{k: v for k, v in given.items() if k != "preset"})
    if plan_of.deadline is not None:
        parse_latency(plan_of.deadline)
    plans = {
        stage.name: replace(
            base, rt_cpus=stage.rt_cpus, loads_on=stage.loads_on or "housekeeping", tune=stage.tune
        ).validate()
        for stage in plan_of.stages
    }
    cells = plan_of.cells()
    for cell in cells:
        open_target(cell.spec, accept_new_host_key).close()  # a bad target is found before any run
    folder = _out_dir(out) or Path("results") / f"{datetime.now():%Y%m%d-%H%M%S}-{slug(plan_of.name)}"
    err.print(
        f"study {plan_of.name}: {len(plan_of.targets)} targets x {len(plan_of.stages)} stages x "
        f"{len(base.loads)} loads, {format_duration(base.duration_s)} each "
        f"(about {format_duration(len(cells) * base.measuring_seconds())} of measuring)",
        highlight=False,
    )

    def measure(cell: studies.Cell, where: Path) -> tuple[str, str, bool]:
        plan = plans[cell.stage.name]
        with RunProgress(plan, err) as progress:
            outcome = execute(
                plan, open_target(cell.spec, accept_new_host_key), out=where,
                name=f"{plan_of.name} {plan_of.label(cell)}", on_event=progress,
            )  # fmt: skip
        status = outcome.summary["status"]
        return status, "" if status == "complete" else f"see {where}/events", outcome.interrupted

    doc = studies.run(plan_of, folder, measure, lambda line: err.print(line, highlight=False))
    measured = [(c, folder / c.folder) for c in cells if (folder / c.folder / rundir.MANIFEST).is_file()]
    summaries = [store.summary(path) for _, path in measured]
    labels = [plan_of.label(c) for c, _ in measured]
    deadline_us = parse_latency(plan_of.deadline) if plan_of.deadline else None
    # every cell against the first, as rtlab compare does: better, worse, same or unknown
    compared = _judge(summaries, labels, [store.replicates(p) for _, p in measured], Margin(), deadline_us)
    for fmt, name in (("md", "report.md"), ("html", "report.html"), ("json", "report.json")):
        write_atomic(folder / name, report.renderer(fmt)(summaries, labels))
    err.print(f"saved in {folder}: report.md, report.html, report.json", highlight=False)
    remember(folder, history)
    try:
        _present(summaries, labels, deadline=plan_of.deadline)
        if compared:
            console.print(verdict_table.build(compared, untrusted.printable(labels[0])))
    finally:
        failed = [f"{r['target']} / {r['stage']}" for r in doc["runs"].values() if r["status"] != "complete"]
        if failed:
            raise RunFailed(f"not every run completed: {', '.join(failed)} (see {folder}/study.json)")


lava_app = typer.Typer(
    help="Board farms: rtlab campaigns as LAVA jobs, their logs back as runs.", no_args_is_help=True
)
app.add_typer(lava_app, name="lava")


@lava_app.command("job")
def lava_job(
    base: Annotated[Path, typer.Option(help="the lab's job for the board: its deploy and boot actions")],
    output: Annotated[Path, typer.Option("--output", "-o", help="write the job here")],
    loads: Annotated[str | None, typer.Option(help=LOADS_HELP)] = None,
    duration: Annotated[str | None, typer.Option(help="per load, e.g. 30s, 10m (default 1m)")] = None,
    settle: Annotated[str | None, typer.Option(help="load running before measuring (default 5s)")] = None,
    workers: Annotated[
        int | None, typer.Option(help="stress-ng workers per load (default: one per online CPU of the board)")
    ] = None,
    preset_name: Annotated[str | None, typer.Option("--preset", help="starfive: the seed protocol")] = None,
    loads_file: LoadsFile = None,
    probe: Probe = None,
    deadline: Deadline = None,
    name: Annotated[
        str | None, typer.Option(help="the run's id in reports (default: rtlab-lava-<date>)")
    ] = None,
) -> None:
    """Append rtlab's test action to the lab's job: the agent and the plan inline; on the board
    it measures, then reports each load to LAVA and prints the run for `rtlab lava import`."""
    from datetime import datetime

    from rtlab import lava

    document = lava.read_base(base)
    plan = _plan(preset_name, loads_file, loads=loads, duration=duration, settle=settle, workers=workers,
                 probe=probe)  # fmt: skip
    # stress-ng's 0 workers: one per online CPU, counted on the board
    plan = replace(plan, workers=0 if plan.workers is None else plan.workers).for_target("", 1)
    deadline_us = parse_latency(deadline) if deadline is not None else None
    run_name = name or f"rtlab-lava-{datetime.now():%Y%m%d-%H%M%S}"
    emit(lava.dump(lava.job(document, plan, run_name, deadline_us)), output)


LavaUrl = Annotated[str | None, typer.Option(help="the LAVA server, e.g. https://lava.example.org")]
TokenFile = Annotated[
    Path | None,
    typer.Option(help="a file holding the user's API token (sent only in the Authorization header)"),
]


@lava_app.command("submit")
def lava_submit(
    job: Annotated[Path, typer.Argument(help="the job from `rtlab lava job`")],
    url: LavaUrl = None,
    token_file: TokenFile = None,
    wait: Annotated[bool, typer.Option(help="wait for the job to finish, then import its run")] = False,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="with --wait: the run directory (default results/lava-<id>)"),
    ] = None,
) -> None:
    """Submit a job to a LAVA server (REST API v0.2); prints its id. With --wait, follows it to
    its end and imports its run, as `rtlab lava import ID` would."""
    from rtlab import lava, lava_server

    if url is None:
        raise UsageError("rtlab lava submit needs --url: the LAVA server to submit to")
    if output is not None and not wait:
        raise UsageError(
            "-o is where --wait imports the run: add --wait, or import later with rtlab lava import"
        )
    try:
        definition = job.read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot read {job}: {e.strerror}: give the job from rtlab lava job") from None
    lava.read_job(definition, job)
    server = lava_server.Server(url, lava_server.read_token(token_file))
    job_id = server.submit(definition)
    console.print(job_id, highlight=False)
    err.print(f"job {job_id} submitted: {server.job_url(job_id)}", highlight=False)
    if wait:
        _import_job(server, job_id, output)


@lava_app.command("import")
def lava_import(
    job_id: Annotated[int | None, typer.Argument(help="the job's id on --url")] = None,
    url: LavaUrl = None,
    token_file: TokenFile = None,
    log: Annotated[
        Path | None,
        typer.Option(help="instead of a job id: the job's log (lava-run's output, or the server's)"),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="the run directory to make (default results/lava-<id>)"),
    ] = None,
    history: History = False,
) -> None:
    """Rebuild the run of a LAVA job, from the server or from its log, as a run made here
    would be. A job whose health is not Complete is imported as failed."""
    from rtlab import lava, lava_server

    if (job_id is None) == (log is None):
        raise UsageError("give a job id with --url, or --log FILE (one of the two)")
    if log is not None:
        if output is None:
            raise UsageError("rtlab lava import --log needs -o: the run directory to make")
        _conclude(lava.import_log(lava.read_log(log), output), None, None, history)
        return
    assert job_id is not None
    if url is None:
        raise UsageError(f"rtlab lava import {job_id} needs --url: the LAVA server that ran it")
    server = lava_server.Server(url, lava_server.read_token(token_file))
    record = server.job(job_id)
    if record["state"] != lava_server.FINISHED:
        raise UsageError(
            f"job {job_id} is {record['state']}, not Finished: import it when it ends (or submit with --wait)"
        )
    _import_job(server, job_id, output, record, history)


def _import_job(
    server: Server,
    job_id: int,
    output: Path | None,
    record: dict[str, Any] | None = None,
    history: bool = False,
) -> None:
    from rtlab import lava

    if record is None:
        record = server.wait(job_id, lambda state: err.print(f"job {job_id}: {state}", highlight=False))
    out = output or Path("results") / f"lava-{job_id}"
    outcome = lava.import_log(server.log(job_id), out, health=str(record.get("health")))
    _conclude(outcome, None, None, history)


@app.command()
def collect(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN")],
    accept_new_host_key: AcceptKey = False,
) -> None:
    """Fetch the results of an SSH run whose connection dropped, once the board is reachable."""
    from rtlab.runner import collect as collect_run

    _conclude(collect_run(run_dir, accept_new_host_key), None, None)


@app.command("report")
def report_cmd(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN")],
    fmt: Format = "table",
    output: Output = None,
    deadline: Deadline = None,
    figures_dir: Figures = None,
    series: Series = False,
) -> None:
    """The table of a saved run (also one still measuring), in any format."""
    from rtlab import store

    report.renderer(fmt)
    summary = store.summary(run_dir)
    label = str(summary["run"] or run_dir.name)
    _present([summary], [label], fmt, output, deadline, figures_dir, series=series)


@app.command()
def compare(
    runs: Annotated[list[Path], typer.Argument(metavar="RUN_A RUN_B ...")],
    labels: Annotated[
        str | None, typer.Option(help="one per run, comma-separated, e.g. Real-time,Mainline")
    ] = None,
    fmt: Format = "table",
    output: Output = None,
    deadline: Deadline = None,
    figures_dir: Figures = None,
    series: Series = False,
    margin: Annotated[
        str, typer.Option(help="a difference within it is the same: µs, %, or both, e.g. 5us,10%")
    ] = "5us,10%",
    gate: Annotated[
        bool, typer.Option("--gate", help="exit 1 when a load of a later run is worse than the first's")
    ] = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="with --gate: unknown and refused fail too")
    ] = False,
    junit: Annotated[Path | None, typer.Option(help="the verdicts as JUnit XML, one case per load")] = None,
    baseline: Annotated[
        str | None,
        typer.Option(help="first, the baseline the history store holds: board:NAME or board:NAME,load:LOAD"),
    ] = None,
    db: HistoryDb = None,
) -> None:
    """Runs side by side, one column group each: Table 5-1 of the StarFive study; then, against
    the first run, whether each difference is real: better, worse, same or unknown."""
    from rtlab import store
    from rtlab.report import verdict_table

    report.renderer(fmt)
    if baseline is not None:
        runs = [history_baseline(baseline, db), *runs]
    if len(runs) < 2:
        raise UsageError("compare needs two runs or more: give RUN_A RUN_B, or --baseline and a run")
    limit = _margin(margin)
    summaries = [store.summary(path) for path in runs]
    names = [s["run"] or p.name for s, p in zip(summaries, runs, strict=True)]
    if labels is not None:
        names = [label.strip() for label in labels.split(",")]
        if len(names) != len(runs):
            raise UsageError(f"--labels has {len(names)} labels for {len(runs)} runs: give one per run")
    deadline_us = parse_latency(deadline) if deadline is not None else None
    compared = _judge(summaries, names, [store.replicates(path) for path in runs], limit, deadline_us)
    _present(summaries, names, fmt, output, deadline, figures_dir, series=series)
    if compared and fmt == "table" and output is None:  # the other formats carry them themselves
        console.print(verdict_table.build(compared, untrusted.printable(names[0])))
    if junit is not None:
        emit(verdict_table.junit(compared, names[0], strict), junit)
    if gate:
        said = [v["verdict"] for _, found in compared for v in found["loads"].values()]
        failing = {"worse"} | ({"unknown", "refused"} if strict else set())
        counts = ", ".join(f"{said.count(w)} {w}" for w in ("worse", "better", "same", "unknown", "refused"))
        err.print(f"gate: {counts}", highlight=False)
        if any(min(found["replicates"].values()) < 2 for _, found in compared):
            err.print(
                "gate: one run a side: the verdicts hold for these runs, not yet for what they measured "
                "(run-to-run noise is untested); measure each side with --repeat 3 or more",
                highlight=False,
            )
        if failing & set(said):
            raise typer.Exit(1)


def _judge(
    summaries: list[Summary],
    names: list[str],
    sides: list[list[Summary]],
    margin: Margin,
    deadline_us: int | None,
) -> list[tuple[str, dict[str, Any]]]:
    """Each run after the first judged against it (its repeats as replicates); the verdicts go
    into the run's summary, where every format reads them."""
    from rtlab.analysis import verdicts

    compared = []
    for summary, name, side in zip(summaries[1:], names[1:], sides[1:], strict=True):
        found = verdicts.compare(sides[0], side, margin, deadline_us)
        summary["verdicts"] = {"against": names[0], **found}
        compared.append((name, found))
    return compared


def _margin(text: str) -> Margin:
    """--margin: "5us", "10%" or both ("5us,10%"): the larger of them applies."""
    from rtlab.analysis import verdicts

    us, fraction = 0.0, 0.0
    for part in filter(None, (p.strip() for p in text.split(","))):
        if part.endswith("%"):
            try:
                fraction = float(part[:-1]) / 100
            except ValueError:
                raise UsageError(f"--margin {text}: {part} is not a percentage, e.g. 10%") from None
        else:
            us = float(parse_latency(part))
    if us < 0 or not 0 <= fraction < 10 or (us == 0 and fraction == 0):
        raise UsageError(f"--margin {text}: give a latency, a percentage or both, e.g. 5us,10%")
    return verdicts.Margin(us, fraction)


@app.command()
def check(
    target: Annotated[str, typer.Option(help="local, ssh://... or qemu:... (the system to audit)")] = "local",
    config: Annotated[
        Path | None, typer.Option(help="a kernel .config to audit instead of the target's")
    ] = None,
    rt_cpus: Annotated[str, typer.Option(help="RT CPUs, for the boot parameter advice, e.g. 2-3")] = "",
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
    accept_new_host_key: AcceptKey = False,
) -> None:
    """Audit the kernel and the system for real-time: what is right, what is wrong, how to fix it."""
    from rtlab.report import check_table
    from rtlab.runner import sysinfo
    from rtlab.system import audit, kernel
    from rtlab.targets import open_target

    if fmt not in ("table", "json"):
        raise UsageError(f"unknown format {fmt!r}: choose from table, json")
    tgt = open_target(target, accept_new_host_key)
    try:
        info = sysinfo(tgt)
    finally:
        tgt.close()
    if config is not None:
        if not config.is_file():
            raise UsageError(f"--config {config} does not exist: give the path of a kernel .config")
        info["config"] = {"source": str(config), "options": kernel.parse_config(config.read_text())}
    findings = audit.audit(info, rt_cpus=rt_cpus)
    if fmt == "json":
        sys.stdout.write(json.dumps(audit.document(tgt.name, findings), indent=2) + "\n")
    else:
        console.print(check_table.build(findings, title=f"rtlab check: {tgt.name}"))
    if not audit.verdict(findings):
        raise typer.Exit(1)


@app.command()
def tune(
    rt_cpus: Annotated[str | None, typer.Option(help="CPUs for real-time work, e.g. 2-3")] = None,
    housekeeping: Annotated[
        str | None, typer.Option(help="CPUs for everything else (default: the rest)")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="show every change and why (the default)")
    ] = False,
    apply: Annotated[bool, typer.Option("--apply", help="make the changes, saving what was there")] = False,
    revert: Annotated[bool, typer.Option("--revert", help="put back exactly what was there before")] = False,
    target: Annotated[
        str, typer.Option(help="local, ssh://host[:port] or qemu:... (a guest's tuning ends with the guest)")
    ] = "local",
) -> None:
    """Tune the system for latency: governor, idle states, IRQs, workqueues, RT throttling, THP, KSM."""
    from rtlab.targets import open_target

    if sum((dry_run, apply, revert)) > 1:
        raise UsageError("give one of --dry-run, --apply, --revert")
    tgt = open_target(target)
    try:
        _tune(tgt.files(), rt_cpus, housekeeping, apply, revert)
    finally:
        tgt.close()


def _tune(files: Files, rt_cpus: str | None, housekeeping: str | None, apply: bool, revert: bool) -> None:
    from rtlab.report import check_table
    from rtlab.system import tune as tuning

    if revert:
        results = tuning.revert(files)
        console.print(
            check_table.changes([r.change for r in results], [r.outcome for r in results], "reverted")
        )
        return
    cpus = tuning.cpu_plan(files, rt_cpus, housekeeping)
    changes, unavailable = tuning.plan(files, cpus)
    if apply:
        results = tuning.apply(files, cpus, changes)
        console.print(check_table.changes(changes, [r.outcome for r in results], "applied"))
        err.print(
            f"saved the previous state in {files.describe(tuning.STATE)}; undo with rtlab tune --revert"
        )
    else:
        console.print(check_table.changes(changes, ["would change"] * len(changes), "dry run"))
    if unavailable:
        err.print(f"not available on this system: {', '.join(unavailable)}", highlight=False)


app.add_typer(history_app, name="history")
app.add_typer(export.app, name="export")
app.add_typer(kernel.app, name="kernel")


@app.command()
def worst(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN")],
    probability: Annotated[
        float, typer.Option(help="per-wake-up probability of the latency asked for, e.g. 1e-9")
    ] = 1e-9,
    horizon: Annotated[str, typer.Option(help="how long the system must meet it, e.g. 24h")] = "24h",
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, json or html")] = "table",
    output: Output = None,
) -> None:
    """The statistical worst case of each load, with its confidence, or why there is none."""
    from rtlab import store
    from rtlab.analysis import worst as worst_case
    from rtlab.report import worst_table

    if not 0 < probability < 1:
        raise UsageError(
            f"--probability {probability} is not a probability: give one between 0 and 1, e.g. 1e-9"
        )
    if fmt not in ("table", "json", "html"):
        raise UsageError(f"unknown format {fmt!r}: choose from table, json, html")
    summary = store.summary(run_dir)
    if fmt == "html":  # the run's report, whose worst-case section is this
        emit(report.renderer("html")([summary], [str(summary["run"] or run_dir.name)]), output)
        return
    document = worst_case.of_summary(summary, probability, parse_duration(horizon))
    if fmt == "json":
        emit(json.dumps(document, indent=2) + "\n", output)
    elif output is not None:
        emit(worst_table.render(document), output)
    else:
        console.print(worst_table.build(document))


@app.command()
def version() -> None:
    """rtlab's version."""
    console.print(__version__)


def main() -> None:
    try:
        app()  # click itself answers bad options with exit code 2
    except (UsageError, RunFailed) as e:
        err.print(f"rtlab: {e}", highlight=False, soft_wrap=True)
        sys.exit(e.exit_code)
