"""rtlab report, compare and worst: saved runs read back, side by side, judged, extrapolated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rtlab import report
from rtlab.boundary import untrusted
from rtlab.bounds import MAX_HORIZON_S, MAX_MARGIN_PERCENT
from rtlab.cli.history import Db as HistoryDb
from rtlab.cli.history import baseline_of as history_baseline
from rtlab.cli.options import AcceptKey, Deadline, Figures, Format, Preset, Series, run_options, shown_name
from rtlab.cli.present import present, probes_passed_in
from rtlab.cli.screen import Output, console, emit, err, out_file
from rtlab.errors import UsageError
from rtlab.units import parse_duration, parse_latency, parse_percentage, probability, shown

if TYPE_CHECKING:
    from rtlab.analysis.metric_tests import Margin
    from rtlab.boundary.summary_shapes import Comparison, Summary


def report_(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN")],
    fmt: Format = "table",
    output: Output = None,
    deadline: Deadline = None,
    figures_dir: Figures = None,
    series: Series = False,
) -> None:
    """The table of a saved run (also one still measuring), in any format."""
    from rtlab.rundir import readback

    report.renderer(fmt)
    summary = readback.summary(run_dir)
    label = str(summary["run"] or run_dir.name)
    present([summary], [label], fmt, output, deadline, figures_dir, series=series)


KERNEL_PANEL = "A board's kernels (--target ssh://... --kernel A --kernel B)"


# compare's options, one name each (its signature stays short enough to read)
Labels = Annotated[
    str | None,
    typer.Option(help="one per run, comma-separated, e.g. Real-time,Mainline", callback=shown_name),
]
MarginOption = Annotated[
    str, typer.Option(help="a difference within it is the same: µs, %, or both, e.g. 5us,10%")
]
Gate = Annotated[
    bool, typer.Option("--gate", help="exit 1 when a load of a later run is worse than the first's")
]
Strict = Annotated[bool, typer.Option("--strict", help="with --gate: unknown and refused fail too")]
JUnit = Annotated[
    Path | None, typer.Option(help="the verdicts as JUnit XML, one case per load", callback=out_file)
]
Baseline = Annotated[
    str | None,
    typer.Option(help="first, the baseline the history store holds: board:NAME or board:NAME,load:LOAD"),
]
KernelTarget = Annotated[
    str | None,
    typer.Option(help="with --kernel: the board, ssh://[user@]host", rich_help_panel=KERNEL_PANEL),
]
Kernels = Annotated[
    list[str] | None,
    typer.Option(
        "--kernel",
        help="a kernel to boot and measure on --target (twice or more): an image, "
        "a build folder, a linux-image .deb, a Debian metapackage, or default",
        rich_help_panel=KERNEL_PANEL,
    ),
]
KernelRepeat = Annotated[
    int,
    typer.Option(
        min=1,
        max=100,
        help="with --kernel: runs per kernel, alternating A B B A",
        rich_help_panel=KERNEL_PANEL,
    ),
]
KernelAppend = Annotated[
    str,
    typer.Option(
        help="with --kernel: arguments added to each kernel's command line", rich_help_panel=KERNEL_PANEL
    ),
]
KernelInitrd = Annotated[
    Path | None,
    typer.Option(help="with --kernel: an initramfs for each kernel", rich_help_panel=KERNEL_PANEL),
]
KernelDtb = Annotated[
    Path | None,
    typer.Option(help="with --kernel: a device tree for each kernel", rich_help_panel=KERNEL_PANEL),
]
KernelBootTimeout = Annotated[
    float,
    typer.Option(help="with --kernel: seconds a boot has to answer over SSH", rich_help_panel=KERNEL_PANEL),
]
KernelPowerCycle = Annotated[
    str | None,
    typer.Option(help="with --kernel: a command that resets the board", rich_help_panel=KERNEL_PANEL),
]
KernelConsole = Annotated[
    str | None,
    typer.Option(
        "--console",
        help="with --kernel: a command printing the board's serial console",
        rich_help_panel=KERNEL_PANEL,
    ),
]
KernelOut = Annotated[
    Path | None,
    typer.Option(
        help="with --kernel: the comparison's folder (default results/<date>-kernels); again: resume",
        rich_help_panel=KERNEL_PANEL,
    ),
]


@run_options(panel="Run options, with --kernel")
def compare(
    options: dict[str, str],
    runs: Annotated[list[Path] | None, typer.Argument(metavar="RUN_A RUN_B ...")] = None,
    labels: Labels = None,
    fmt: Format = "table",
    output: Output = None,
    deadline: Deadline = None,
    figures_dir: Figures = None,
    series: Series = False,
    margin: MarginOption = "5us,10%",
    gate: Gate = False,
    strict: Strict = False,
    junit: JUnit = None,
    baseline: Baseline = None,
    db: HistoryDb = None,
    target: KernelTarget = None,
    kernels: Kernels = None,
    repeat: KernelRepeat = 1,
    append: KernelAppend = "",
    initrd: KernelInitrd = None,
    dtb: KernelDtb = None,
    boot_timeout: KernelBootTimeout = 300.0,
    power_cycle: KernelPowerCycle = None,
    console_cmd: KernelConsole = None,
    preset_name: Preset = None,
    out: KernelOut = None,
    accept_new_host_key: AcceptKey = False,
) -> None:
    """Runs side by side, one column group each: Table 5-1 of the StarFive study; then, against
    the first run, whether each difference is real: better, worse, same or unknown. With
    --target ssh://B --kernel A --kernel B: each kernel booted on the board by rtlab, verified,
    measured (--repeat N: A B B A ...), the board back on its default kernel at the end."""
    from rtlab.report.views import verdict_table
    from rtlab.rundir import readback

    report.renderer(fmt)
    runs = list(runs or [])
    if kernels:
        if runs or baseline is not None:
            raise UsageError("give saved RUNs, or --target and --kernel to measure (not both)")
        runs, measured = _kernels(
            options, target, kernels, repeat, append, initrd, dtb, boot_timeout, power_cycle, console_cmd,
            preset_name, out, accept_new_host_key, labels,
        )  # fmt: skip
        labels = ",".join(measured)
    elif (
        target is not None
        or options
        or repeat != 1
        or preset_name is not None
        or out is not None
        or (append or initrd or dtb or power_cycle or console_cmd or boot_timeout != 300.0)
    ):
        raise UsageError("--target, --repeat, --out, boot and run options go with --kernel A --kernel B")
    if baseline is not None:
        runs = [history_baseline(baseline, db), *runs]
    if len(runs) < 2:
        raise UsageError("compare needs two runs or more: give RUN_A RUN_B, or --baseline and a run")
    limit = parse_margin(margin)
    summaries = [readback.summary(path) for path in runs]
    names = [s["run"] or p.name for s, p in zip(summaries, runs, strict=True)]
    if labels is not None:
        names = [label.strip() for label in labels.split(",")]
        if len(names) != len(runs):
            raise UsageError(f"--labels has {len(names)} labels for {len(runs)} runs: give one per run")
    deadline_us = parse_latency(deadline) if deadline is not None else None
    compared = judge(summaries, names, [readback.replicates(path) for path in runs], limit, deadline_us)
    missed = present(summaries, names, fmt, output, deadline, figures_dir, series=series, deferred=True)
    if compared and fmt == "table" and output is None:  # the other formats carry them themselves
        console.print(verdict_table.build(compared, untrusted.printable(names[0])))
    if junit is not None:
        emit(verdict_table.junit(compared, names[0], strict), junit)
    try:
        if gate:
            _gate(compared, strict)
    finally:
        if kernels:  # runs this command measured: a probe that failed fails it, as rtlab run's (3 wins)
            probes_passed_in(summaries, names)
    if missed is not None:
        raise missed


def _kernels(
    options: dict[str, str], target: str | None, kernels: list[str], n: int, append: str,
    initrd: Path | None, dtb: Path | None, boot_timeout: float, power_cycle: str | None,
    console_cmd: str | None, preset_name: str | None, out: Path | None, accept: bool, labels: str | None,
) -> tuple[list[Path], list[str]]:  # fmt: skip
    """Each kernel booted on TARGET, verified, measured N times in A B B A order (campaigns/
    kernels.py); the board back on its default kernel at the end. The folders and labels."""
    from datetime import datetime

    from rtlab.boot.ensure import Refused, Session, Setup, Want, label_of, split_append
    from rtlab.bounds import MAX_BOOT_TIMEOUT_S
    from rtlab.campaigns import kernels as campaign
    from rtlab.cli.options import plan_of
    from rtlab.errors import RunFailed
    from rtlab.progress import RunProgress
    from rtlab.runner import execute
    from rtlab.targets import open_target
    from rtlab.units import seconds

    if target is None or not target.startswith("ssh://"):
        raise UsageError("--kernel boots each kernel on a board: give --target ssh://root@board")
    if len(kernels) < 2:
        raise UsageError("give two kernels or more: --kernel A --kernel B")
    names = [label_of(k) for k in kernels]
    if labels is not None:
        names = [label.strip() for label in labels.split(",")]
        if len(names) != len(kernels):
            raise UsageError(
                f"--labels has {len(names)} labels for {len(kernels)} kernels: give one per kernel"
            )
    for extra in (initrd, dtb):
        if extra is not None and not extra.is_file():
            raise UsageError(f"{extra} does not exist")
    plan = plan_of(preset_name, None, options)
    timeout = seconds(boot_timeout, "--boot-timeout", 1, MAX_BOOT_TIMEOUT_S)
    folder = out or Path("results") / f"{datetime.now():%Y%m%d-%H%M%S}-kernels"
    sides = [campaign.Side(n, Want(k, split_append(append))) for n, k in zip(names, kernels, strict=True)]

    def say(line: str) -> None:
        err.print(line, highlight=False)

    setup = Setup(target=target, initrd=initrd, dtb=dtb, boot_timeout=timeout, power_cycle=power_cycle,
                  console=console_cmd, accept_new_host_key=accept, boots=folder / "boots")  # fmt: skip
    session = Session(setup, say)

    def measure(side: campaign.Side, where: Path) -> tuple[campaign.KernelRun, bool]:
        try:
            on = session.ensure(side.want)
        except Refused as e:  # never measured as if it ran: the comparison cannot go on
            raise RunFailed(f"refused: {e}") from None
        say(f"verified: {on.release}: " + "; ".join(on.evidence))
        with RunProgress(plan, err) as progress:
            outcome = execute(plan, open_target(target, accept), out=where, name=f"{side.label} {where.name}",
                              on_event=progress)  # fmt: skip
        status = outcome.summary["status"]
        reason = "" if status == "complete" else f"see {where}/events"
        changed = None if outcome.interrupted else session.still(on)
        if changed is not None:
            status, reason = "failed", changed
        return {"status": status, "reason": reason, "board": on.fields()}, outcome.interrupted

    try:
        doc = campaign.run(sides, n, target, folder, measure, say)
    finally:
        said = session.close()
        if said is not None:
            say(said)
    session.after_close("what was measured is kept: run the same compare again to go on")
    failed = [f"{k}: {e.get('reason')}" for k, e in doc["runs"].items() if e.get("status") != "complete"]
    if failed:
        raise RunFailed(f"not every run completed: {'; '.join(failed)} (see {folder}/{campaign.FILE})")
    say(f"runs saved in {folder}")
    return [folder / s.folder for s in sides], names


def judge(
    summaries: list[Summary],
    names: list[str],
    sides: list[list[Summary]],
    margin: Margin,
    deadline_us: int | None,
    planned: int | None = None,
) -> list[tuple[str, Comparison]]:
    """Each run after the first judged against it (its repeats as replicates); the verdicts go
    into the run's summary, where every format reads them. Those comparisons are one decision
    (--gate reads them together): each is judged at 5 % over their number, or over the PLANNED
    number when some were not measured (a cell that failed does not make the others surer)."""
    from rtlab.analysis import verdicts

    family = max(planned or 0, len(sides) - 1)
    compared = []
    for summary, name, side in zip(summaries[1:], names[1:], sides[1:], strict=True):
        found = verdicts.compare(sides[0], side, margin, deadline_us, family=family)
        summary["verdicts"] = {"against": names[0], **found}
        compared.append((name, found))
    return compared


def _gate(compared: list[tuple[str, Comparison]], strict: bool) -> None:
    """--gate: the verdicts counted; exit 1 on a worse load (with --strict, unknown and refused too)."""
    said = [v["verdict"] for _, found in compared for v in found["loads"].values()]
    failing = {"worse"} | ({"unknown", "refused"} if strict else set())
    counts = ", ".join(f"{said.count(w)} {w}" for w in ("worse", "better", "same", "unknown", "refused"))
    err.print(f"gate: {counts}", highlight=False)
    if any(min(found["replicates"]["base"], found["replicates"]["new"]) < 2 for _, found in compared):
        err.print(
            "gate: one run a side: the verdicts hold for these runs, not yet for what they measured "
            "(run-to-run noise is untested); measure each side with --repeat 3 or more",
            highlight=False,
        )
    if failing & set(said):
        raise typer.Exit(1)


def parse_margin(text: str) -> Margin:
    """--margin: "5us", "10%" or both ("5us,10%"): the larger of them applies."""
    from rtlab.analysis import metric_tests

    us, fraction = 0.0, 0.0
    for part in filter(None, (p.strip() for p in text.split(","))):
        if part.endswith("%"):
            fraction = parse_percentage(part, "--margin", MAX_MARGIN_PERCENT)
        else:
            us = float(parse_latency(part))
    if us == 0 and fraction == 0:
        raise UsageError(f"--margin {shown(text)}: give a latency, a percentage or both, e.g. 5us,10%")
    return metric_tests.Margin(us, fraction)


def worst(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN")],
    chance_given: Annotated[
        float,
        typer.Option("--probability", help="per-wake-up probability of the latency asked for, e.g. 1e-9"),
    ] = 1e-9,
    horizon: Annotated[str, typer.Option(help="how long the system must meet it, e.g. 24h")] = "24h",
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, json or html")] = "table",
    output: Output = None,
) -> None:
    """The statistical worst case of each load, with its confidence, or why there is none."""
    from rtlab.analysis import worst as worst_case
    from rtlab.report.views import worst_table
    from rtlab.rundir import readback

    chance = probability(chance_given, "--probability")
    seconds = parse_duration(horizon, most=MAX_HORIZON_S)  # a service life, longer than any run
    if fmt not in ("table", "json", "html"):
        raise UsageError(f"unknown format {fmt!r}: choose from table, json, html")
    summary = readback.summary(run_dir)
    if fmt == "html":  # the run's report, whose worst-case section is this
        emit(report.renderer("html")([summary], [str(summary["run"] or run_dir.name)]), output)
        return
    document = worst_case.of_summary(summary, chance, seconds)
    if fmt == "json":
        emit(json.dumps(document, indent=2) + "\n", output)
    elif output is not None:
        emit(worst_table.render(document), output)
    else:
        console.print(worst_table.build(document))


def register(app: typer.Typer) -> None:
    app.command("report")(report_)
    app.command()(compare)
    app.command()(worst)
