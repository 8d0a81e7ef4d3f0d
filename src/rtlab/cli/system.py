"""rtlab check and tune: the target's kernel and system, audited and tuned for latency."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rtlab.cli.options import AcceptKey, target_spec
from rtlab.cli.screen import console, err
from rtlab.errors import UsageError
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


def register(app: typer.Typer) -> None:
    app.command()(check)
    app.command()(tune)
