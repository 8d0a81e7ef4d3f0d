"""rtlab bisect and sweep: which change made latency worse, a commit of a git range or an
option of a kernel configuration, each step decided by compare's verdicts. Resumable: the
same command again goes on."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rtlab.bounds import MAX_REPEATS
from rtlab.cli.options import AcceptKey, LoadsFile, Preset, plan_of, run_options, target_spec
from rtlab.cli.present import out_dir
from rtlab.cli.screen import Output, console, emit, err
from rtlab.errors import UsageError
from rtlab.units import parse_latency

if TYPE_CHECKING:
    from rtlab.bisect.board import Boots
    from rtlab.bisect.builds import KernelBuild
    from rtlab.bisect.measured import Settings, Subject, Subjects
    from rtlab.plan import Plan

Prepare = Annotated[
    str | None,
    typer.Option(help="run before each is measured (sh -c): exit 0 measure it, 125 skip it, else stop"),
]
BOARD_PANEL = "A board (--target ssh://... with --kernel-build)"
BoardInitrd = Annotated[
    Path | None,
    typer.Option(help="an initramfs for each kernel booted on the board", rich_help_panel=BOARD_PANEL),
]
BoardTimeout = Annotated[
    float,
    typer.Option(help="seconds a kernel has to answer over SSH after its boot", rich_help_panel=BOARD_PANEL),
]
BoardPowerCycle = Annotated[
    str | None, typer.Option(help="a command that resets the board when a kernel does not come back",
                             rich_help_panel=BOARD_PANEL),
]  # fmt: skip


JudgeOn = Annotated[
    str | None, typer.Option("--judge-on", help="only these loads decide, e.g. cpu,os (default: every load)")
]
Repeats = Annotated[int, typer.Option(min=2, max=MAX_REPEATS, help="whole runs of each before it is judged")]
MaxRepeats = Annotated[
    int, typer.Option(min=2, max=MAX_REPEATS, help="at most, where the verdict stays unknown (the budget)")
]
MarginOption = Annotated[
    str, typer.Option("--margin", help="a difference within it is the same, as for compare")
]
DeadlineOption = Annotated[
    str | None,
    typer.Option(
        "--deadline", help="compare's exceedance level, e.g. 200us (default: the good one's p99.99)"
    ),
]
KernelBuildOption = Annotated[
    str | None,
    typer.Option(
        "--kernel-build", metavar="BOARD[:PREEMPT]",
        help="build each with rtlab kernel build (e.g. qemu-virt:rt); {kernel} in --target is its Image",
    ),
]  # fmt: skip
FormatOption = Annotated[str, typer.Option("--format", "-f", help="table, md, json or html")]
KeepBuild = Annotated[
    bool,
    typer.Option(
        "--keep-build",
        help="keep the worktree and the kernel build folder when it ends or is stopped (the same "
        "command again then builds incrementally)",
    ),
]


def say(line: str) -> None:
    err.print(line, highlight=False, soft_wrap=True)


@dataclass(frozen=True)
class Common:
    """What bisect and sweep take alike, checked before anything is prepared."""

    plan: Plan
    settings: Settings
    kernel_build: KernelBuild | None

    def doc(self) -> dict[str, Any]:
        s, built = self.settings, self.kernel_build
        return {
            "plan": self.plan.to_json(), "loads": s.loads, "deadline_us": s.deadline_us,
            "margin": {"us": s.margin.us, "fraction": s.margin.fraction},
            "budget": [s.budget.repeats, s.budget.most],
            "kernel_build": None if built is None else [built.board, built.preempt],
        }  # fmt: skip


def _common(options: dict[str, str], preset_name: str | None, loads_file: Path | None, judge_on: str | None,
            repeats: int, max_repeats: int, margin: str, deadline: str | None, fmt: str,
            kernel_build: str | None) -> Common:  # fmt: skip
    from rtlab.bisect import builds
    from rtlab.bisect.measured import Budget, Settings
    from rtlab.cli.reports import parse_margin

    if fmt not in ("table", "md", "json", "html"):
        raise UsageError(f"--format {fmt}: give table, md, json or html")
    if max_repeats < repeats:
        raise UsageError(f"--max-repeats {max_repeats} is below --repeats {repeats}: give {repeats} or more")
    plan = plan_of(preset_name, loads_file, options)
    judged = [w.strip() for w in judge_on.split(",")] if judge_on else None
    if judged and (unknown := [w for w in judged if w not in plan.loads]):
        raise UsageError(f"--judge-on {','.join(unknown)}: not a load measured ({','.join(plan.loads)})")
    deadline_us = parse_latency(deadline) if deadline is not None else None
    how = builds.spec(kernel_build) if kernel_build else None
    return Common(
        plan, Settings(parse_margin(margin), deadline_us, judged, Budget(repeats, max_repeats)), how
    )


def _folder(out: str, index: str, doc: dict[str, Any], same: tuple[str, ...]) -> Path:
    """--out: a new folder, or one holding the same campaign (whose state the doc takes over)."""
    from rtlab.bisect.measured import carry
    from rtlab.rundir.disk import read_index

    folder = out_dir(out)
    assert folder is not None
    if (folder / index).is_file():
        carry(doc, read_index(folder / index), folder, same)
    elif folder.exists() and any(folder.iterdir()):
        raise UsageError(f"--out {folder} is not empty: give a new folder, or the one of the same command")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _claim(folder: Path, index: str, doc: dict[str, Any]) -> None:
    """The index written before anything is prepared: a command stopped in its first
    preparation (or whose first prepare command failed) leaves a folder that the same command
    again knows as its own, not one that is "not empty"."""
    from rtlab.rundir.disk import write_json

    if not (folder / index).is_file():
        write_json(folder / index, doc)


def _measurer(plan: Plan, target: str, folder: Path, accept: bool, built: bool) -> Callable[..., str]:
    """One whole run of the plan on the target into a folder: its status. `{worktree}` in the
    target is rtlab's checkout, `{kernel}` the subject's built kernel."""
    from rtlab.bisect import builds
    from rtlab.errors import Stopped
    from rtlab.progress import RunProgress
    from rtlab.runner import execute
    from rtlab.targets import open_target

    if "{kernel}" in target and not built:
        raise UsageError("--target has {kernel}: give --kernel-build BOARD, whose Image it becomes")
    worktree = str((folder / "worktree").resolve())

    def spec(subject: Subject | None) -> str:
        built = (
            target
            if subject is None
            else target.replace("{kernel}", str(builds.kernel(folder / subject.folder)))
        )
        return built.replace("{worktree}", worktree)

    if "{kernel}" not in target:  # a bad target is found before anything is prepared (or built)
        open_target(spec(None), accept).close()

    def measure(where: Path, name: str, subject: Subject) -> str:
        try:
            with RunProgress(plan, err) as progress:
                outcome = execute(
                    plan, open_target(spec(subject), accept), out=where, name=name, on_event=progress
                )
        except Stopped:  # before its agent measured: the run is measured again, as one cut off
            said = f"interrupted before {name} was measured: run the same command again to go on"
            raise Stopped(said) from None
        if outcome.interrupted:
            raise Stopped(f"interrupted during {name}: run the same command again to go on")
        return str(outcome.summary["status"])

    return measure


@run_options()
def bisect(
    options: dict[str, str],
    repo: Annotated[Path, typer.Option(help="the git tree the revisions are in (never checked out itself)")],
    good: Annotated[str, typer.Option(help="a revision whose latency is good")],
    bad: Annotated[str, typer.Option(help="a later revision whose latency is worse")],
    out: Annotated[str, typer.Option(help="the bisection's folder; the same command again goes on")],
    prepare: Prepare = None,
    kernel_build: KernelBuildOption = None,
    target: Annotated[
        str,
        typer.Option(
            help="local, ssh://..., qemu:...; {worktree} is the revision's checkout", callback=target_spec
        ),
    ] = "local",
    preset_name: Preset = None,
    loads_file: LoadsFile = None,
    judge_on: JudgeOn = None,
    repeats: Repeats = 3,
    max_repeats: MaxRepeats = 6,
    margin: MarginOption = "5us,10%",
    deadline: DeadlineOption = None,
    fmt: FormatOption = "table",
    output: Output = None,
    accept_new_host_key: AcceptKey = False,
    keep_build: KeepBuild = False,
    initrd: BoardInitrd = None,
    boot_timeout: BoardTimeout = 300.0,
    power_cycle: BoardPowerCycle = None,
) -> None:
    """Which commit made it worse: binary search of a git range, each revision checked out in a
    worktree of rtlab's own, prepared (your command, or rtlab's kernel build), measured with the
    run options and judged by compare's verdicts against both ends (more runs where unknown).
    Ends with the first bad revision and its evidence, or with why none can be named."""
    from rtlab.bisect import drive
    from rtlab.report.views import bisect_table

    common = _common(options, preset_name, loads_file, judge_on, repeats, max_repeats, margin, deadline, fmt,
                     kernel_build)  # fmt: skip
    tree = repo.resolve()
    doc = drive.index(tree, good, bad, prepare, target, common.doc())
    folder = _folder(out, drive.INDEX, doc, drive.SAME)
    measure = _measurer(common.plan, target, folder, accept_new_host_key, common.kernel_build is not None)
    boots = _board(
        target, folder, common.kernel_build, initrd, boot_timeout, power_cycle, accept_new_host_key
    )
    _claim(folder, drive.INDEX, doc)
    revisions = drive.revisions_of(doc)
    search = drive.Bisection(
        folder, tree, revisions, prepare, common.kernel_build, common.settings,
        _booted(measure, boots), say, doc, keep_build,
    )  # fmt: skip
    with _resumable(), _on_board(search.lab, boots):
        search.run()
    _save_and_show(folder, doc, bisect_table.markdown(doc), bisect_table.html(doc), fmt, output,
                   lambda: (bisect_table.build(doc), bisect_table.conclusion(doc)))  # fmt: skip


@run_options()
def sweep(
    options: dict[str, str],
    out: Annotated[str, typer.Option(help="the sweep's folder; the same command again goes on")],
    option: Annotated[
        list[str] | None,
        typer.Option("--option", help="CONFIG_NAME=VALUE, judged alone on the base (repeatable)"),
    ] = None,
    fragment: Annotated[
        list[Path] | None,
        typer.Option("--fragment", help="a Kconfig fragment, judged as one variant (repeatable)"),
    ] = None,
    bad_config: Annotated[
        Path | None,
        typer.Option(
            "--bad-config", help="a worse configuration: find its option that is to blame (a fragment)"
        ),
    ] = None,
    base: Annotated[
        Path | None, typer.Option("--base", help="a fragment every variant starts from (default: none)")
    ] = None,
    prepare: Prepare = None,
    kernel_build: KernelBuildOption = None,
    source: Annotated[
        Path | None,
        typer.Option(help="with --kernel-build: a kernel tree (default: Debian's linux-source-6.12)"),
    ] = None,
    target: Annotated[str, typer.Option(help="local, ssh://..., qemu:...", callback=target_spec)] = "local",
    preset_name: Preset = None,
    loads_file: LoadsFile = None,
    judge_on: JudgeOn = None,
    repeats: Repeats = 3,
    max_repeats: MaxRepeats = 6,
    margin: MarginOption = "5us,10%",
    deadline: DeadlineOption = None,
    fmt: FormatOption = "table",
    output: Output = None,
    accept_new_host_key: AcceptKey = False,
    initrd: BoardInitrd = None,
    boot_timeout: BoardTimeout = 300.0,
    power_cycle: BoardPowerCycle = None,
) -> None:
    """Which kernel option: each --option or --fragment on top of the base, measured in rounds
    with the base and judged against it (a table of verdicts, effects and intervals per load);
    or, with --bad-config, the one option of a worse configuration to blame, by halving the
    options it adds (ktest.pl's config-bisect with compare's verdicts). Each configuration is
    built with --kernel-build (QEMU targets) and/or installed by --prepare ($RTLAB_FRAGMENT)."""
    from rtlab.bisect import sweep as sweeps
    from rtlab.bisect import variants as vs
    from rtlab.report.views import sweep_table

    common = _common(options, preset_name, loads_file, judge_on, repeats, max_repeats, margin, deadline, fmt,
                     kernel_build)  # fmt: skip
    wanted = [vs.option(text) for text in option or []] + [vs.fragment_file(p) for p in fragment or []]
    if bool(wanted) == (bad_config is not None):
        raise UsageError(
            "give --option/--fragment (the effect of each) or --bad-config (the option to blame)"
        )
    if prepare is None and kernel_build is None:
        raise UsageError("give --kernel-build BOARD or --prepare CMD: how each configuration is made")
    start = vs.fragment_file(base, "--base") if base is not None else vs.BASE
    bad = vs.fragment_file(bad_config, "--bad-config") if bad_config is not None else None
    if bad is not None and not vs.difference(start, bad):
        raise UsageError(
            f"--bad-config {bad_config} sets no option otherwise than the base: nothing to blame"
        )
    doc = sweeps.document(start, wanted, bad, prepare, target, source, common.doc())
    folder = _folder(out, sweeps.INDEX, doc, sweeps.SAME)
    measure = _measurer(common.plan, target, folder, accept_new_host_key, common.kernel_build is not None)
    boots = _board(
        target, folder, common.kernel_build, initrd, boot_timeout, power_cycle, accept_new_host_key
    )
    _claim(folder, sweeps.INDEX, doc)
    made = _variant_preparer(folder, prepare, common.kernel_build, source)
    run = sweeps.Sweep(folder, start, made, common.settings, _booted(measure, boots), say, doc)
    with _resumable(), _on_board(run.lab, boots):
        run.bisect(bad) if bad is not None else run.effects(wanted)
    _save_and_show(folder, doc, sweep_table.markdown(doc), sweep_table.html(doc), fmt, output,
                   lambda: (sweep_table.build(doc), sweep_table.conclusion(doc)))  # fmt: skip


def _variant_preparer(folder: Path, command: str | None, how: KernelBuild | None,
                      source: Path | None) -> Callable[[Subject, Path], str]:  # fmt: skip
    """A configuration made: built (rtlab's kernel build), then the prepare command run in its
    folder with $RTLAB_FRAGMENT (and $RTLAB_KERNEL when built)."""
    from rtlab.bisect import builds
    from rtlab.bisect.measured import READY, prepare

    def made(subject: Subject, fragment: Path) -> str:
        where = folder / subject.folder
        said = READY if how is None else builds.prepare(how, where, source, (fragment,))
        if said != READY or command is None:
            return said
        env = {"RTLAB_VARIANT": subject.label, "RTLAB_FRAGMENT": str(fragment.resolve())}
        if how is not None:
            env["RTLAB_KERNEL"] = str(builds.kernel(where))
        return prepare(command, where, subject.label, where / "prepare.log", env)

    return made


def _save_and_show(folder: Path, doc: dict[str, Any], md: str, html: str, fmt: str, output: Path | None,
                   table: Callable[[], tuple[Any, str]]) -> None:  # fmt: skip
    import json

    from rtlab.rundir.disk import write_atomic

    write_atomic(folder / "report.md", md)
    write_atomic(folder / "report.html", html)
    say(f"saved in {folder}: report.md, report.html and the index")
    if fmt == "table" and output is None:
        shown, conclusion = table()
        console.print(shown)
        console.print(conclusion, highlight=False, soft_wrap=True)
    elif fmt == "json":
        emit(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", output)
    else:
        emit(html if fmt == "html" else md, output)


def _board(target: str, folder: Path, how: KernelBuild | None, initrd: Path | None, boot_timeout: float,
           power_cycle: str | None, accept: bool) -> Boots | None:  # fmt: skip
    """On a board (ssh:// with --kernel-build): each subject's built kernel booted by rtlab
    before it is measured (bisect/board.py); None elsewhere."""
    from rtlab.bisect import builds
    from rtlab.bisect.board import Boots
    from rtlab.boot.ensure import Session, Setup
    from rtlab.bounds import MAX_BOOT_TIMEOUT_S
    from rtlab.units import seconds

    if not target.startswith("ssh://") or how is None:
        if initrd is not None or power_cycle is not None or boot_timeout != 300.0:
            raise UsageError(
                "--initrd, --boot-timeout and --power-cycle go with --target ssh://... and --kernel-build"
            )
        return None
    if initrd is not None and not initrd.is_file():
        raise UsageError(f"--initrd {initrd} does not exist")
    timeout = seconds(boot_timeout, "--boot-timeout", 1, MAX_BOOT_TIMEOUT_S)
    setup = Setup(target=target, initrd=initrd, boot_timeout=timeout, power_cycle=power_cycle,
                  accept_new_host_key=accept, boots=folder / "boots")  # fmt: skip
    return Boots(Session(setup, say), lambda s: folder / s.folder, lambda s: builds.kernel(folder / s.folder))


def _booted(measure: Callable[..., str], boots: Boots | None) -> Callable[..., str]:
    """MEASURE, on a board after its subject's kernel is verified again."""
    if boots is None:
        return measure

    def on_board(where: Path, name: str, subject: Subject) -> str:
        boots.before(subject)
        return measure(where, name, subject)

    return on_board


@contextlib.contextmanager
def _resumable() -> Iterator[None]:
    """A Ctrl-C (or SIGTERM, SIGHUP) between two runs, while a subject is judged or the index
    saved, says what a stop during a run says: every run that stood is on disk, and the same
    command goes on from there (not typer's silent exit 130)."""
    from rtlab.errors import Stopped

    try:
        yield
    except KeyboardInterrupt:
        raise Stopped("interrupted between two runs: run the same command again to go on") from None


@contextlib.contextmanager
def _on_board(lab: Subjects, boots: Boots | None) -> Iterator[None]:
    """The subjects booted as they are prepared, and the board back on its default kernel at
    the end (after Ctrl-C too)."""
    if boots is None:
        yield
        return
    lab.boot = boots.boot
    try:
        yield
    finally:
        said = boots.session.close()
        if said:
            say(said)
    boots.session.after_close("what was measured is kept: run the same command again to go on")


def register(app: typer.Typer) -> None:
    app.command()(bisect)
    app.command()(sweep)
