"""What the commands that end in runs have in common: where a run goes (--out), how its
summaries are shown in any format, and how a finished run is concluded (saved where, history,
exit code)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from rtlab import report
from rtlab.boundary import untrusted
from rtlab.cli.history import remember
from rtlab.cli.screen import console, emit, err
from rtlab.errors import RunFailed, UsageError
from rtlab.rundir.disk import RunDir, UnreadableFile
from rtlab.units import parse_latency, shown

if TYPE_CHECKING:
    from rtlab.analysis.verdict import Deadlines
    from rtlab.boundary.summary_shapes import LoadVerdict, Summary
    from rtlab.runner import Outcome


def out_dir(out: str | Path | None, flag: str = "--out") -> Path | None:
    """A folder the command writes into (--out, --figures, a folder's -o), checked before
    anything is measured or drawn for it: neither it nor a folder on its way is a file."""
    if out is None:
        return None
    if not str(out).strip():
        raise UsageError(f"{flag} is empty: give the folder's path, or leave {flag} out for the default")
    path = Path(out)
    for parent in (path, *path.parents):
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(
                    f"{flag} {shown(str(out))}: {shown(str(parent))} is a file, not a folder: "
                    f"choose another {flag}"
                )
            break
    return path


def present(
    summaries: list[Summary],
    labels: list[str],
    fmt: str = "table",
    output: Path | None = None,
    deadline: str | Deadlines | None = None,
    figures_dir: Path | None = None,
    junit: Path | None = None,
    series: bool = False,
    deferred: bool = False,
) -> typer.Exit | None:
    """Renders runs in one format (plus JUnit and PNG figures on request); exit 1 on a missed
    deadline (one for every load, or each load's from the history). DEFERRED: that exit given
    back, not raised, for a comparison's verdicts and JUnit to come first (and a failed
    probe's 3 to win after)."""
    from rtlab.analysis import compare as fairness
    from rtlab.analysis.verdict import with_deadline
    from rtlab.report.formats import table

    render = report.renderer(fmt)
    out_dir(figures_dir, "--figures")  # before a figure is drawn
    if series:
        if fmt != "csv":
            raise UsageError("--series is a CSV export: add --format csv")
        from rtlab.report.formats import csv_format

        render = csv_format.render_series
    judged_by = deadlines_of(deadline)
    deadline_us = judged_by.every_us if judged_by is not None else None
    summaries = [with_deadline(s, judged_by) for s in summaries]
    labels = [untrusted.printable(label) for label in labels]  # a run's id is a target's word too
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
    if judged_by is not None and not all(s["deadline"]["pass"] for s in summaries):
        missed = [
            f"{label} {load} ({_missed_by(v, deadline_us)})"
            for s, label in zip(summaries, labels, strict=True)
            for load, v in s["deadline"]["loads"].items()
            if v["verdict"] != "pass"
        ]
        err.print(f"{judged_by.said()} missed: {', '.join(missed)}", highlight=False)
        if deferred:
            return typer.Exit(1)
        raise typer.Exit(1)
    return None


def _missed_by(v: LoadVerdict, every_us: int | None) -> str:
    if v["max_us"] is None:
        return "no data"
    return f"{v['max_us']} µs" if every_us is not None else f"{v['max_us']} µs > {v.get('deadline_us')} µs"


def record(folder: Path, judged_by: Deadlines | None) -> None:
    """Limits from the history are kept in the run they judged: the history moves on."""
    from rtlab.rundir.disk import DEADLINE, write_json

    if judged_by is not None and judged_by.source is not None and folder.is_dir():
        write_json(folder / DEADLINE, {"limits_us": dict(judged_by.per_load), **judged_by.source})


def deadlines_of(deadline: str | Deadlines | None) -> Deadlines | None:
    """--deadline as given (a latency) or resolved before measuring (the history's limits)."""
    from rtlab.analysis.verdict import Deadlines

    if deadline is None or isinstance(deadline, Deadlines):
        return deadline
    return Deadlines(parse_latency(deadline))


def conclude(
    outcome: Outcome,
    deadline: str | Deadlines | None = None,
    junit: Path | None = None,
    history: bool = False,
) -> None:
    """A run that ended: where it is saved, its table, and exit 3 unless it and its probes are
    complete."""
    summary = outcome.summary
    judged_by = deadlines_of(deadline)
    record(outcome.run.path, judged_by)
    err.print(f"run saved in {outcome.run.path}", highlight=False)
    remember(outcome.run.path, history)
    try:
        present([summary], [summary["run"] or outcome.run.path.name], deadline=judged_by, junit=junit)
    finally:
        if outcome.interrupted:
            raise RunFailed(f"interrupted: the run is {summary['status']}, what was measured is kept")
        if summary["status"] != "complete":
            reason = _reason(outcome.run)
            raise RunFailed(f"the run is {summary['status']}{reason}: see {outcome.run.path}/events")
        probes_passed(summary)


def probes_passed(summary: Summary) -> None:
    """A probe that failed (a functional test that did not pass, or one that gave no result)
    fails the run as a load does: RunFailed naming each, the warnings say why."""
    from rtlab.analysis import probes

    failed = probes.failed(summary)
    if failed:
        said = "; ".join(failed)
        raise RunFailed(f"the measurement is complete, but a probe failed: {said} (see the warnings)")


def probes_passed_in(summaries: list[Summary], labels: list[str]) -> None:
    """probes_passed for several runs measured by one command (a study's cells, a comparison's
    kernels): RunFailed naming each failed probe by its run's label."""
    from rtlab.analysis import probes

    gave = [f"{label}: {n}" for label, s in zip(labels, summaries, strict=True) for n in probes.failed(s)]
    if gave:
        raise RunFailed(f"every run completed, but a probe failed: {'; '.join(gave)} (see the warnings)")


def _reason(run: RunDir) -> str:
    """Why the run ended as it did, as its run.json says (a LAVA job's error, a lost board)."""
    try:
        said = run.manifest().get("reason")
    except UnreadableFile:
        return ""
    return f" ({untrusted.printable(str(said))[:400]})" if said else ""
