"""rtlab bisect: the first revision of a git range that made latency worse, each step decided
by compare's verdicts against both ends. Resumable: the same command again goes on."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from rtlab.cli.measure import plan_of
from rtlab.cli.options import AcceptKey, LoadsFile, Preset, run_options
from rtlab.cli.present import out_dir
from rtlab.cli.screen import Output, console, emit, err
from rtlab.errors import UsageError
from rtlab.units import parse_latency


def say(line: str) -> None:
    err.print(line, highlight=False, soft_wrap=True)


@run_options()
def bisect(
    options: dict[str, str],
    repo: Annotated[Path, typer.Option(help="the git tree the revisions are in (never checked out itself)")],
    good: Annotated[str, typer.Option(help="a revision whose latency is good")],
    bad: Annotated[str, typer.Option(help="a later revision whose latency is worse")],
    out: Annotated[str, typer.Option(help="the bisection's folder; the same command again goes on")],
    prepare: Annotated[
        str | None,
        typer.Option(
            help="run in the revision's worktree before it is measured (sh -c): exit 0 measure, "
            "125 skip, else stop; $RTLAB_REV is the commit"
        ),  # fmt: skip
    ] = None,
    target: Annotated[
        str, typer.Option(help="local, ssh://..., qemu:...; {worktree} becomes the revision's checkout")
    ] = "local",
    preset_name: Preset = None,
    loads_file: LoadsFile = None,
    judge_on: Annotated[
        str | None,
        typer.Option("--judge-on", help="only these loads decide, e.g. cpu,os (default: every load)"),
    ] = None,
    repeats: Annotated[int, typer.Option(min=2, help="whole runs of a revision before it is judged")] = 3,
    max_repeats: Annotated[
        int, typer.Option(min=2, help="at most, where the verdict stays unknown (the budget)")
    ] = 6,
    margin: Annotated[
        str, typer.Option(help="a difference within it is the same, as for compare")
    ] = "5us,10%",
    deadline: Annotated[
        str | None, typer.Option(help="compare's exceedance level, e.g. 200us (default: good's p99.99)")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, md, json or html")] = "table",
    output: Output = None,
    accept_new_host_key: AcceptKey = False,
) -> None:
    """Which change made it worse: binary search of a git range, each revision prepared by your
    command in a worktree of its own, measured with the run options, and judged by compare's
    verdicts against both ends (more runs where unknown). Ends with the first bad revision and
    its evidence, or with why none can be named."""
    from rtlab.bisect import drive
    from rtlab.cli.reports import parse_margin
    from rtlab.report import bisect_table
    from rtlab.results.rundir import read_index, write_atomic

    if fmt not in ("table", "md", "json", "html"):
        raise UsageError(f"--format {fmt}: give table, md, json or html")
    if max_repeats < repeats:
        raise UsageError(f"--max-repeats {max_repeats} is below --repeats {repeats}: give {repeats} or more")
    folder = out_dir(out)
    assert folder is not None
    plan = plan_of(preset_name, loads_file, options)
    limit = parse_margin(margin)
    deadline_us = parse_latency(deadline) if deadline is not None else None
    judged = [w.strip() for w in judge_on.split(",")] if judge_on else None
    if judged and (unknown := [w for w in judged if w not in plan.loads]):
        raise UsageError(f"--judge-on {','.join(unknown)}: not a load measured ({','.join(plan.loads)})")
    tree = repo.resolve()
    budget = drive.Budget(repeats, max_repeats)
    doc = drive.index(tree, good, bad, prepare, target, plan.to_json(), judged,
                      {"us": limit.us, "fraction": limit.fraction}, deadline_us, budget)  # fmt: skip
    if (folder / drive.INDEX).is_file():
        drive.carry(doc, read_index(folder / drive.INDEX), folder)
    elif folder.exists() and any(folder.iterdir()):
        raise UsageError(f"--out {folder} is not empty: give a new folder for the bisection")
    folder.mkdir(parents=True, exist_ok=True)
    measure = _measurer(plan, target, folder, accept_new_host_key)
    bisection = drive.Bisection(folder, tree, drive.revisions_of(doc), prepare, measure, say, doc,
                                budget, limit, deadline_us, judged)  # fmt: skip
    bisection.run()
    write_atomic(folder / "report.md", bisect_table.markdown(doc))
    write_atomic(folder / "report.html", bisect_table.html(doc))
    say(f"saved in {folder}: bisect.json, report.md, report.html")
    _render(doc, fmt, output)


def _measurer(plan: Any, target: str, folder: Path, accept: bool) -> Any:
    """One whole run of the plan on the target into a folder: its status."""
    from rtlab.progress import RunProgress
    from rtlab.runner import execute
    from rtlab.targets import open_target

    worktree = str((folder / "worktree").resolve())
    spec = target.replace("{worktree}", worktree)
    open_target(spec, accept).close()  # a bad target is found before any revision is prepared

    def measure(where: Path, name: str, subject: Any) -> str:
        with RunProgress(plan, err) as progress:
            outcome = execute(plan, open_target(spec, accept), out=where, name=name, on_event=progress)
        if outcome.interrupted:
            from rtlab.errors import Stopped

            raise Stopped(f"interrupted during {name}: run the same command again to go on")
        return str(outcome.summary["status"])

    return measure


def _render(doc: dict[str, Any], fmt: str, output: Path | None) -> None:
    import json

    from rtlab.report import bisect_table

    if fmt == "table" and output is None:
        console.print(bisect_table.build(doc))
        console.print(bisect_table.conclusion(doc), highlight=False, soft_wrap=True)
        return
    if fmt == "json":
        emit(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", output)
    else:
        emit((bisect_table.html if fmt == "html" else bisect_table.markdown)(doc), output)


def register(app: typer.Typer) -> None:
    app.command()(bisect)
