"""rtlab lava: board farms. rtlab campaigns as LAVA jobs, their logs back as runs."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rtlab.bounds import MAX_JOB_ID
from rtlab.cli.options import Deadline, History, LoadsFile, Preset, plan_of, run_options, shown_name
from rtlab.cli.present import conclude
from rtlab.cli.screen import console, emit, err
from rtlab.errors import Stopped, UsageError
from rtlab.units import parse_latency, read_user_file

if TYPE_CHECKING:
    from rtlab.farm.server import Server

app = typer.Typer(
    help="Board farms: rtlab campaigns as LAVA jobs, their logs back as runs.", no_args_is_help=True
)

LavaUrl = Annotated[str | None, typer.Option(help="the LAVA server, e.g. https://lava.example.org")]
TokenFile = Annotated[
    Path | None,
    typer.Option(help="a file holding the user's API token (sent only in the Authorization header)"),
]


@app.command("job")
@run_options(lava=True)
def job(
    options: dict[str, str],
    output: Annotated[Path, typer.Option("--output", "-o", help="write the job here")],
    base: Annotated[
        Path | None, typer.Option(help="the lab's job for the board: its deploy and boot actions")
    ] = None,
    qemu: Annotated[
        str | None,
        typer.Option(
            help="instead of --base: LAVA's qemu device type booting rtlab's guest, named as in "
            "--target qemu:SPEC (e.g. riscv64:debian); its kernel and initramfs are written beside the job"
        ),
    ] = None,
    preset_name: Preset = None,
    loads_file: LoadsFile = None,
    deadline: Deadline = None,
    name: Annotated[
        str | None,
        typer.Option(help="the run's id in reports (default: rtlab-lava-<date>)", callback=shown_name),
    ] = None,
) -> None:
    """Append rtlab's test action to the lab's job: the agent and the plan inline; on the board
    it measures, then reports each load to LAVA and prints the run for `rtlab lava import`."""
    from datetime import datetime

    from rtlab.farm import lava

    if (base is None) == (qemu is None):
        raise UsageError(
            "rtlab lava job needs --base (the lab's job for its board) or --qemu SPEC, one of them"
        )
    document = lava.read_base(base) if base is not None else _qemu_base(qemu or "", output)
    plan = plan_of(preset_name, loads_file, options)
    # stress-ng's 0 workers: one per online CPU, counted on the board
    plan = replace(plan, workers=0 if plan.workers is None else plan.workers).for_target("", 1)
    deadline_us = parse_latency(deadline) if deadline is not None else None
    run_name = name or f"rtlab-lava-{datetime.now():%Y%m%d-%H%M%S}"
    emit(lava.dump(lava.job(document, plan, run_name, deadline_us)), output)


def _qemu_base(spec: str, output: Path) -> dict[str, Any]:
    """The deploy and boot of LAVA's qemu device type for rtlab's guest, its images beside OUTPUT."""
    from rtlab.farm import lava
    from rtlab.targets.qemu import SHELL_PROMPT, QemuTarget
    from rtlab.targets.qemu.spec import GuestSpec

    guest = QemuTarget(GuestSpec.parse(spec))
    try:
        images = guest.farm_images(output.resolve().parent)
    finally:
        guest.close()
    for path in (images.kernel, images.initrd):
        err.print(f"wrote {path}", highlight=False)
    return lava.qemu_base(guest.spec.arch.name, images.kernel, images.initrd, images.cmdline, SHELL_PROMPT)


@app.command("submit")
def submit(
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
    from rtlab.farm import lava
    from rtlab.farm import server as lava_server

    if url is None:
        raise UsageError("rtlab lava submit needs --url: the LAVA server to submit to")
    if output is not None and not wait:
        raise UsageError(
            "-o is where --wait imports the run: add --wait, or import later with rtlab lava import"
        )
    try:
        definition = read_user_file(job, "job")
    except OSError as e:
        raise UsageError(f"cannot read {job}: {e.strerror}: give the job from rtlab lava job") from None
    lava.read_job(definition, job)
    server = lava_server.Server(url, lava_server.read_token(token_file))
    job_id = server.submit(definition)
    console.print(job_id, highlight=False)
    err.print(f"job {job_id} submitted: {server.job_url(job_id)}", highlight=False)
    if wait:
        again = ["rtlab", "lava", "import", str(job_id), "--url", url]
        again += ["--token-file", str(token_file)] if token_file else []
        again += ["-o", str(output)] if output else []
        _import_job(server, job_id, output, again=shlex.join(again))


@app.command("import")
def import_(
    job_id: Annotated[int | None, typer.Argument(min=1, max=MAX_JOB_ID, help="the job's id on --url")] = None,
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
    uid: Annotated[
        str | None,
        typer.Option(
            help="with --log: the job's rtlab uid (its metadata rtlab.uid), when the log has several"
        ),
    ] = None,
) -> None:
    """Rebuild the run of a LAVA job, from the server or from its log, as a run made here
    would be. A job whose health is not Complete is imported as failed."""
    from rtlab.farm import lava
    from rtlab.farm import server as lava_server

    if (job_id is None) == (log is None):
        raise UsageError("give a job id with --url, or --log FILE (one of the two)")
    if log is not None:
        if output is None:
            raise UsageError("rtlab lava import --log needs -o: the run directory to make")
        conclude(lava.import_log(lava.read_log(log), output, uid=uid), history=history)
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
    again: str = "",
) -> None:
    """The job's run made in OUTPUT, once the job has finished (with no RECORD, waited for:
    AGAIN is the command that imports it later, said if the wait is stopped)."""
    from rtlab.farm import lava

    if record is None:
        try:
            record = server.wait(job_id, lambda state: err.print(f"job {job_id}: {state}", highlight=False))
        except KeyboardInterrupt:  # the job is the server's: it goes on without rtlab
            raise Stopped(
                f"stopped waiting: job {job_id} goes on on the server ({server.job_url(job_id)}); "
                f"once it has finished, import it with {again}"
            ) from None
    out = output or Path("results") / f"lava-{job_id}"
    # the job's own uid, from its definition on the server: a bundle of another is not its run
    uid = lava.job_uid(record)
    outcome = lava.import_log(server.log(job_id), out, health=str(record.get("health")), uid=uid)
    conclude(outcome, history=history)
