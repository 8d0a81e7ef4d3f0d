"""rtlab scan and study, and run's --repeat: campaigns of many runs that an interrupted command
resumes when given again."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rtlab import report
from rtlab.boundary import untrusted
from rtlab.bounds import MAX_TOP
from rtlab.cli.history import remember
from rtlab.cli.options import AcceptKey, History, Target, plan_of, run_options
from rtlab.cli.present import deadlines_of, out_dir, present, probes_passed, probes_passed_in, record
from rtlab.cli.screen import console, err
from rtlab.errors import RunFailed, UsageError
from rtlab.names import slug
from rtlab.plan import Plan
from rtlab.units import format_duration, parse_latency

if TYPE_CHECKING:
    from rtlab.analysis.verdict import Deadlines
    from rtlab.boot.ensure import Session
    from rtlab.campaigns.study import Cell, Study, StudyIndex


def say(line: str) -> None:
    err.print(line, highlight=False)


def _status(manifest: Path) -> str | None:
    """A repeat's status as its own run.json says (None when it cannot be read: measured again)."""
    from rtlab.rundir.disk import RunDir, UnreadableFile

    try:
        return RunDir(manifest.parent).manifest().get("status")
    except UnreadableFile:
        return None


def repeats(
    plan: Plan,
    spec: str,
    accept_new_host_key: bool,
    out: Path | None,
    name: str | None,
    n: int,
    deadline: str | Deadlines | None,
    junit: Path | None,
    history: bool = False,
) -> None:
    """The campaign N times, each a whole run in OUT/repeat-K, then the table of all of them
    (analysis/repeats.py). The same command again goes on where an interrupted one stopped."""
    from datetime import datetime

    from rtlab.analysis import repeats as repeated
    from rtlab.campaigns import loop as campaign
    from rtlab.progress import RunProgress
    from rtlab.rundir import disk, readback
    from rtlab.rundir.disk import read_index, write_json
    from rtlab.runner import execute
    from rtlab.targets import open_target

    folder = out or Path("results") / f"{datetime.now():%Y%m%d-%H%M%S}-x{n}"
    index = folder / repeated.FILE
    if index.is_file():
        before = read_index(index).get("n")
        if before != n:
            raise UsageError(
                f"{folder} holds a campaign of {before} repeats: give --repeat {before}, or another --out"
            )
    elif folder.exists() and any(folder.iterdir()):
        raise UsageError(f"--out {folder} is not empty: give a new folder for the repeats")
    folder.mkdir(parents=True, exist_ok=True)
    steps = [campaign.Step(str(k), repeated.folder(k), f"repeat {k}") for k in range(1, n + 1)]
    # each repeat's own run.json says whether it stands: the folders are the record
    manifests = {step.key: folder / step.folder / disk.MANIFEST for step in steps}
    entries: dict[str, campaign.Entry] = {
        key: {"status": _status(m)} for key, m in manifests.items() if m.is_file()
    }
    doc = {"schema": repeated.SCHEMA, "n": n, "runs": entries}
    write_json(index, doc)  # at once: a host killed in the first repeat still leaves a campaign to resume

    def measure(step: campaign.Step, where: Path) -> tuple[campaign.Entry, bool]:
        with RunProgress(plan, err) as progress:
            outcome = execute(plan, open_target(spec, accept_new_host_key), out=where,
                              name=f"{name or folder.name}-{step.key}", on_event=progress)  # fmt: skip
        return {"status": outcome.summary["status"], "reason": None}, outcome.interrupted

    stands = lambda entry: entry["status"] == "complete"  # noqa: E731
    campaign.run(campaign.Campaign(folder, "command", steps, stands, lambda: write_json(index, doc)),
                 entries, measure, say)  # fmt: skip
    write_json(index, doc)
    summary = readback.summary(folder)
    record(folder, deadlines_of(deadline))
    say(f"runs saved in {folder}")
    remember(folder, history)
    try:
        present([summary], [name or folder.name], deadline=deadline, junit=junit)
    finally:
        if summary["status"] != "complete":
            raise RunFailed(f"not every repeat is complete: see {folder}/repeat-*/events")
        probes_passed(summary)


SCAN_DEFAULTS = {"duration": "10s", "settle": "1s"}  # a scan is many short looks, not a measurement
SCAN_FLAGS = {"duration": "per-stressor"}


@run_options(
    keys=("duration", "settle", "interval", "priority", "workers", "histogram-range"),
    flags=SCAN_FLAGS,
    panel="Run options",
    helps={"duration": f"measurement per stressor (default {SCAN_DEFAULTS['duration']})",
           "settle": f"stressor running before measuring (default {SCAN_DEFAULTS['settle']})"},
)  # fmt: skip
def scan(
    options: dict[str, str],
    target: Target = "local",
    classes: Annotated[
        str | None, typer.Option("--class", help="stress-ng classes, e.g. cpu,os (default: every stressor)")
    ] = None,
    stressors: Annotated[str | None, typer.Option(help="stressors by name, e.g. sock,timer")] = None,
    top: Annotated[
        int, typer.Option(min=1, max=MAX_TOP, help="how many of the worst go into the loads file")
    ] = 5,
    out: Annotated[
        str | None, typer.Option(help="the scan's folder (default results/<date>-scan); again: resume")
    ] = None,
    accept_new_host_key: AcceptKey = False,
) -> None:
    """Rank stress-ng's stressors by the latency they cause, each briefly under cyclictest, and
    write a loads file of the worst (the StarFive study's section 3.2). Resumable: the same
    command again goes on where an interrupted scan stopped."""
    from datetime import datetime

    from rtlab.campaigns import scan as scanning
    from rtlab.report.views import scan_table
    from rtlab.targets import open_target

    names = [n.strip() for n in (stressors or "").split(",") if n.strip()]
    wanted = [c.strip() for c in (classes or "").split(",") if c.strip()]
    plan = plan_of(None, None, {**SCAN_DEFAULTS, **options}, flags=SCAN_FLAGS)
    folder = out_dir(out) or Path("results") / f"{datetime.now():%Y%m%d-%H%M%S}-scan"
    first = open_target(target, accept_new_host_key)
    try:
        choice = scanning.choose(scanning.stressor_lists(first, wanted), wanted, names)
    finally:
        first.close()
    if not choice.stressors:
        raise UsageError(f"none of {', '.join(choice.missing)} is a stressor of stress-ng on {first.name}")
    say(
        f"scanning {len(choice.stressors)} stressors on {first.name}, {format_duration(plan.duration_s)} each"
    )
    doc = scanning.run(
        lambda: open_target(target, accept_new_host_key), plan, choice, folder, first.name, say
    )
    console.print(scan_table.build(doc))
    for line in scan_table.notes(doc):
        say(line)
    if doc["ranking"]:
        scanning.write_top(doc, top, folder / "top-loads.toml")
        say(f"the {min(top, len(doc['ranking']))} worst as a loads file: {folder / 'top-loads.toml'}")
    say(f"saved in {folder}")


@run_options(panel="Run options, instead of the study file's (--duration 2s: a short try)")
def study(
    options: dict[str, str],
    study_file: Annotated[Path, typer.Argument(metavar="STUDY.toml")],
    out: Annotated[
        str | None, typer.Option(help="the study's folder (default results/<date>-<name>); again: resume")
    ] = None,
    accept_new_host_key: AcceptKey = False,
    history: History = False,
) -> None:
    """Targets (kernels) x tuning stages x loads from one file, one run each, then the
    comparison of all of them (examples/*.toml). Resumable: the same command again goes on
    where an interrupted study stopped."""
    from datetime import datetime

    from rtlab.campaigns import study as studies

    it = studies.read(study_file)
    given = {**it.options, **options}
    base = plan_of(given.pop("preset", None), it.loads_file, given)
    if it.deadline is not None:
        parse_latency(it.deadline)
    folder = out_dir(out) or Path("results") / f"{datetime.now():%Y%m%d-%H%M%S}-{slug(it.name)}"
    _study(it, base, folder, accept_new_host_key, history)


def _study(it: Study, base: Plan, folder: Path, accept: bool, history: bool) -> None:
    """Every cell of the study not yet measured, then all of them compared with the first."""
    from rtlab.boot.ensure import Refused, close_all
    from rtlab.campaigns import study as studies
    from rtlab.progress import RunProgress
    from rtlab.runner import execute
    from rtlab.targets import open_target

    plans = {
        stage.name: replace(
            base, rt_cpus=stage.rt_cpus, loads_on=stage.loads_on or "housekeeping", tune=stage.tune
        ).validate()
        for stage in it.stages
    }
    cells = it.cells()
    for cell in cells:
        open_target(cell.spec, accept).close()  # a bad target is found before any run
    say(
        f"study {it.name}: {len(it.targets)} targets x "
        + (f"{len(it.kernels)} kernels x " if it.kernels else "")
        + f"{len(it.stages)} stages x {len(base.loads)} loads, "
        f"{format_duration(base.duration_s)} each "
        f"(about {format_duration(len(cells) * base.measuring_seconds())} of measuring)"
    )

    sessions = _sessions(it, folder, accept)

    def measure(cell: studies.Cell, where: Path) -> tuple[str, str, bool, studies.Checked]:
        plan = plans[cell.stage.name]
        on = None
        if cell.on_board:
            # the board on the cell's kernel and command line, verified, before it is measured
            try:
                on = sessions[cell.spec].ensure(cell.want())
            except Refused as e:
                say(f"refused: {e}")
                return "refused", str(e), False, {"refused": e.lines}
            say(f"verified: {on.release}: " + "; ".join(on.evidence[1:] or on.evidence))
        with RunProgress(plan, err) as progress:
            outcome = execute(
                plan, open_target(cell.spec, accept), out=where, name=f"{it.name} {it.label(cell)}",
                on_event=progress,
            )  # fmt: skip
        status = outcome.summary["status"]
        reason = "" if status == "complete" else f"see {where}/events"
        if on is not None and not outcome.interrupted:
            changed = sessions[cell.spec].still(on)
            if changed is not None:
                status, reason = "failed", changed
        return status, reason, outcome.interrupted, ({"board": on.fields()} if on else {})

    try:
        doc = studies.run(it, folder, measure, say)
    finally:
        close_all(sessions.values(), say, shown=lambda said: not said.startswith("back"))
    for session in sessions.values():
        session.after_close("what was measured is kept: run the same study again to go on")
    _conclude(it, folder, cells, doc, history)


def _conclude(it: Study, folder: Path, cells: list[Cell], doc: StudyIndex, history: bool) -> None:
    """The cells measured compared with the first: the reports written and shown; RunFailed
    after them when a cell did not complete (what was measured is reported all the same)."""
    from rtlab.analysis.metric_tests import Margin
    from rtlab.cli.reports import judge
    from rtlab.report.views import verdict_table
    from rtlab.rundir import disk, readback
    from rtlab.rundir.disk import write_atomic

    measured = [(c, folder / c.folder) for c in cells if (folder / c.folder / disk.MANIFEST).is_file()]
    failed = [
        " / ".join(str(r[k]) for k in ("target", "kernel", "stage") if k in r) + f" ({r['status']})"
        for r in doc["runs"].values()
        if r["status"] != "complete"
    ]
    if not measured:  # every cell refused (or failed before a run began): no report to write
        raise RunFailed(f"no run was measured: {', '.join(failed)} (see {folder}/study.json)")
    summaries = [readback.summary(path) for _, path in measured]
    labels = [it.label(c) for c, _ in measured]
    deadline_us = parse_latency(it.deadline) if it.deadline else None
    # every cell against the first, as rtlab compare does: better, worse, same or unknown; one
    # decision over the comparisons the study planned, whether or not every cell was measured
    replicates = [readback.replicates(p) for _, p in measured]
    compared = judge(summaries, labels, replicates, Margin(), deadline_us, planned=len(cells) - 1)
    for fmt, name in (("md", "report.md"), ("html", "report.html"), ("json", "report.json")):
        write_atomic(folder / name, report.renderer(fmt)(summaries, labels))
    say(f"saved in {folder}: report.md, report.html, report.json")
    remember(folder, history)
    try:
        missed = present(summaries, labels, deadline=it.deadline, deferred=True)
        if compared:
            console.print(verdict_table.build(compared, untrusted.printable(labels[0])))
    finally:
        if failed:
            raise RunFailed(f"not every run completed: {', '.join(failed)} (see {folder}/study.json)")
        probes_passed_in(summaries, labels)
    if missed is not None:
        raise missed


def _sessions(it: Study, folder: Path, accept: bool) -> dict[str, Session]:
    """A hold on each board whose cells rtlab boots (the study's [boot] options), by target."""
    from rtlab.boot.ensure import Session, Setup
    from rtlab.bounds import MAX_BOOT_TIMEOUT_S
    from rtlab.units import seconds

    boot = dict(it.boot)
    timeout = 300.0
    if "boot-timeout" in boot:
        try:
            timeout = float(boot["boot-timeout"].removesuffix("s"))
        except ValueError:
            raise UsageError(f'{it.source}: [boot] boot-timeout = "300" (seconds)') from None
        timeout = seconds(timeout, "[boot] boot-timeout", 1, MAX_BOOT_TIMEOUT_S)
    files = {k: it.source.parent / boot[k] for k in ("initrd", "dtb") if k in boot}
    for key, path in files.items():
        if not path.is_file():
            raise UsageError(f"{it.source}: [boot] {key} = {path}: no such file (relative to the study file)")
    sessions: dict[str, Session] = {}
    for cell in it.cells():
        if cell.on_board and cell.spec not in sessions:
            setup = Setup(
                target=cell.spec, initrd=files.get("initrd"), dtb=files.get("dtb"), boot_timeout=timeout,
                power_cycle=boot.get("power-cycle"), console=boot.get("console"),
                accept_new_host_key=accept, boots=folder / "boots",
            )  # fmt: skip
            sessions[cell.spec] = Session(setup, say)
    return sessions


def register(app: typer.Typer) -> None:
    app.command()(scan)
    app.command()(study)
