"""rtlab check and tune: the target's kernel and system, audited and tuned for latency."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rtlab.cli.options import AcceptKey, target_spec
from rtlab.cli.screen import console, err
from rtlab.errors import RunFailed, UsageError
from rtlab.units import read_user_file

if TYPE_CHECKING:
    from rtlab.system.files import Files


def check(
    target: Annotated[
        str, typer.Option(help="local, ssh://... or qemu:... (the system to audit)", callback=target_spec)
    ] = "local",
    config: Annotated[
        Path | None, typer.Option(help="a kernel .config to audit instead of the target's")
    ] = None,
    rt_cpus: Annotated[str, typer.Option(help="RT CPUs, for the boot parameter advice, e.g. 2-3")] = "",
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
    accept_new_host_key: AcceptKey = False,
) -> None:
    """Audit the kernel and the system for real-time: what is right, what is wrong, how to fix it."""
    from rtlab.report.views import check_table
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
        info["config"] = {
            "source": str(config),
            "options": kernel.parse_config(read_user_file(config, "--config", lenient=True)),
        }
    findings = audit.audit(info, rt_cpus=rt_cpus)
    if fmt == "json":
        sys.stdout.write(json.dumps(audit.document(tgt.name, findings), indent=2) + "\n")
    else:
        console.print(check_table.build(findings, title=f"rtlab check: {tgt.name}"))
    if not audit.verdict(findings):
        raise typer.Exit(1)


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
        str,
        typer.Option(
            help="local, ssh://host[:port] or qemu:... (a guest's tuning ends with the guest)",
            callback=target_spec,
        ),
    ] = "local",
    boot: Annotated[
        str | None,
        typer.Option(
            help="boot parameters, e.g. 'isolcpus=2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1': "
            "a board (ssh://) booted with them by rtlab boot's engine, verified; --revert: back "
            "on its default kernel",
            rich_help_panel=BOOT_PANEL,
        ),
    ] = None,
    kernel: Annotated[
        str,
        typer.Option(
            help="with --boot: the kernel booted with them (an image, a .deb, a Debian metapackage)",
            rich_help_panel=BOOT_PANEL,
        ),
    ] = "",
    initrd: Annotated[
        Path | None, typer.Option(help="with --boot: its initramfs", rich_help_panel=BOOT_PANEL)
    ] = None,
    dtb: Annotated[
        Path | None, typer.Option(help="with --boot: its device tree", rich_help_panel=BOOT_PANEL)
    ] = None,
    boot_timeout: Annotated[
        float, typer.Option(help="with --boot: seconds the board has to answer", rich_help_panel=BOOT_PANEL)
    ] = 300.0,
    power_cycle: Annotated[
        str | None,
        typer.Option(help="with --boot: a command that resets the board", rich_help_panel=BOOT_PANEL),
    ] = None,
    accept_new_host_key: AcceptKey = False,
) -> None:
    """Tune the system for latency: governor, idle states, IRQs, workqueues, RT throttling, THP, KSM;
    with --boot, boot parameters too (applied by booting the board with them, reverted by its way
    back to its default kernel)."""
    from rtlab.targets import open_target

    if sum((dry_run, apply, revert)) > 1:
        raise UsageError("give one of --dry-run, --apply, --revert")
    boot_args = None
    if boot is not None or kernel or initrd or dtb or power_cycle:
        boot_args = _boot_knob(target, boot, kernel, initrd, dtb, boot_timeout, power_cycle,
                               accept_new_host_key, apply, revert)  # fmt: skip
        if boot_args is None:  # reverted: the board's runtime state went with the kernel rtlab booted
            return
    tgt = open_target(target, accept_new_host_key)
    try:
        _tune(tgt.files(), rt_cpus, housekeeping, apply, revert)
    finally:
        tgt.close()


BOOT_PANEL = "Boot parameters (a board)"


def _boot_knob(
    target: str, boot: str | None, kernel: str, initrd: Path | None, dtb: Path | None, boot_timeout: float,
    power_cycle: str | None, accept: bool, apply: bool, revert: bool,
) -> str | None:  # fmt: skip
    """--boot ARGS: shown (dry run), applied (the board booted with them, verified: a parameter
    that did not take effect is refused with the evidence and the board sent back), or
    reverted (the board on its default kernel). The board's default boot is never changed, so
    any reset reverts it too. ARGS, or None once reverted."""
    from rtlab.boot import machine, steps
    from rtlab.boot.ensure import Refused, Session, Setup, Want, split_append
    from rtlab.bounds import MAX_BOOT_TIMEOUT_S
    from rtlab.units import seconds

    if not target.startswith("ssh://"):
        raise UsageError(f"--boot changes a board's command line: give --target ssh://..., not {target}")
    timeout = seconds(boot_timeout, "--boot-timeout", 1, MAX_BOOT_TIMEOUT_S)

    def say(line: str) -> None:
        err.print(line, highlight=False)

    setup = Setup(target=target, initrd=initrd, dtb=dtb, boot_timeout=timeout, power_cycle=power_cycle,
                  accept_new_host_key=accept)  # fmt: skip
    session = Session(setup, say)
    if revert:
        said = session.close()
        session.after_close()
        if session.silent:
            raise RunFailed(said or "")
        console.print(said or f"{target} runs its default kernel: no boot parameters of rtlab's to revert")
        return None
    if not boot or not kernel:
        raise UsageError("--boot 'ARGS' --kernel KERNEL: the parameters, and the kernel booted with them")
    for extra in (initrd, dtb):
        if extra is not None and not extra.is_file():
            raise UsageError(f"{extra} does not exist")
    want = Want(kernel, split_append(boot))
    if not apply:
        engine = machine.Engine(
            steps.Request(target=target, kernel=session.image(kernel, session.report().get("arch", ""))[0],
                            initrd=initrd, dtb=dtb, append=list(want.append), boot_timeout=timeout,
                            power_cycle=power_cycle, dry_run=True, accept_new_host_key=accept),
            say,
        )  # fmt: skip
        try:
            engine.boot()
        finally:
            engine.board.drop()
        say(f"would verify {boot} took effect; rtlab tune --boot --revert puts the board back")
        return boot
    try:
        on = session.ensure(want)
    except Refused:
        said = session.close()  # never left on parameters that did not take effect
        if said:
            say(said)
        raise
    console.print(f"booted with {boot}: {on.release}")
    for line in on.evidence:
        console.print(f"  {line}")
    err.print(f"undo with rtlab tune --target {target} --revert --boot ''", highlight=False)
    return boot


def _tune(files: Files, rt_cpus: str | None, housekeeping: str | None, apply: bool, revert: bool) -> None:
    from rtlab.report.views import check_table
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


def register(app: typer.Typer) -> None:
    app.command()(check)
    app.command()(tune)
