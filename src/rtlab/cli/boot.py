"""rtlab boot: a kernel on a board by kexec, verified, with a way back (rtlab.boot)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from rtlab.bounds import MAX_BOOT_TIMEOUT_S
from rtlab.cli.options import AcceptKey
from rtlab.cli.screen import console, err
from rtlab.errors import RunFailed, UsageError
from rtlab.units import seconds

# a Debian kernel metapackage as apt takes it, with a suite: linux-image-rt-amd64/bookworm-backports
PACKAGE = re.compile(r"linux-image-[a-z0-9][a-z0-9.+-]*(?:/[a-z0-9-]+)?")


# boot's arguments and options, one name each (its signature stays short enough to read)
Kernel = Annotated[
    str | None,
    typer.Argument(
        help="the kernel image to boot (bzImage, Image), a Debian kernel package file (.deb) of the "
        "board's architecture, or a Debian kernel metapackage (linux-image-rt-amd64) fetched for it; "
        "none with --back"
    ),
]
Target = Annotated[str, typer.Option(help="the board: ssh://[user@]host[:port]")]
Append = Annotated[
    str,
    typer.Option(help="arguments added to the running kernel's command line, e.g. 'isolcpus=1 nohz_full=1'"),
]
Initrd = Annotated[Path | None, typer.Option(help="an initramfs for the kernel")]
Dtb = Annotated[Path | None, typer.Option(help="a device tree for the kernel (arm64, riscv64)")]
BootTimeout = Annotated[
    float,
    typer.Option(
        help="seconds the board has to answer over SSH from the new kernel (from its default one, "
        "after --power-cycle: 300 or more)"
    ),
]
PowerCycle = Annotated[
    str | None, typer.Option(help="a command that resets the board when it does not come back")
]
Console = Annotated[
    str | None, typer.Option("--console", help="a command printing the board's serial console")
]
FailOnWarnings = Annotated[
    bool, typer.Option("--fail-on-warnings", help="a BUG, WARNING, Oops or lockdep splat fails the boot")
]
Out = Annotated[
    Path | None, typer.Option(help="the boot's record folder (default boots/<time>-<board>-<release>)")
]
DryRun = Annotated[bool, typer.Option("--dry-run", help="print every step, change nothing")]
Back = Annotated[
    bool,
    typer.Option("--back", help="return the board to its default kernel and remove what rtlab added"),
]
Method = Annotated[
    str,
    typer.Option(
        help="kexec (the default boot never touched), grub (a one-shot entry of the board's GRUB: "
        "next_entry), or auto: kexec where the board can, else its GRUB"
    ),
]
MakeDefault = Annotated[
    bool,
    typer.Option(
        "--make-default",
        help="after a verified boot, keep the kernel as the board's default (its bootloader's entry; "
        "--back restores the board's own)",
    ),
]
Label = Annotated[str | None, typer.Option(help="the bootloader's menu title for the kernel")]


def boot(
    kernel: Kernel = None,
    target: Target = "",
    append: Append = "",
    initrd: Initrd = None,
    dtb: Dtb = None,
    boot_timeout: BootTimeout = 300.0,
    power_cycle: PowerCycle = None,
    console_cmd: Console = None,
    fail_on_warnings: FailOnWarnings = False,
    out: Out = None,
    dry_run: DryRun = False,
    back: Back = False,
    method: Method = "auto",
    make_default: MakeDefault = False,
    label: Label = None,
    accept_new_host_key: AcceptKey = False,
) -> None:
    """Boot KERNEL on a board by kexec (its default boot never touched) or by its GRUB's one-shot
    entry, verify it, or go --back."""
    from rtlab.boot import machine, steps, verify
    from rtlab.boot.board import Failed
    from rtlab.boot.verify import cmdline_words

    if not target:
        raise UsageError("give the board: --target ssh://root@board")
    boot_timeout = seconds(boot_timeout, "--boot-timeout", 1, MAX_BOOT_TIMEOUT_S)
    if method not in ("auto", "kexec", "grub"):
        raise UsageError(f"--method {method}: give kexec, grub or auto")
    if back and (make_default or label is not None):
        raise UsageError("--make-default and --label go with a KERNEL to boot, not with --back")
    if back == (kernel is not None):
        raise UsageError("give a KERNEL to boot, or --back (not both)")
    image = Path(kernel) if kernel is not None else None
    package: str | None = None
    deb: Path | None = None
    if image is not None and image.suffix == ".deb" and image.exists():
        image, deb = None, image  # its image taken out once the board's architecture is known
    elif image is not None and not image.is_file():
        if not PACKAGE.fullmatch(str(kernel)):
            raise UsageError(
                f"{kernel} does not exist: give the path of a bzImage or Image, or a Debian kernel "
                "metapackage such as linux-image-rt-amd64"
            )
        image, package = None, str(kernel)
    request = steps.Request(
        target=target, kernel=image, package=package, deb=deb, initrd=initrd, dtb=dtb,
        append=cmdline_words(append),
        boot_timeout=boot_timeout, power_cycle=power_cycle, console=console_cmd,
        fail_on_warnings=fail_on_warnings, out=out, dry_run=dry_run, accept_new_host_key=accept_new_host_key,
        method=method, make_default=make_default, label=label,
    )  # fmt: skip
    engine = machine.Engine(request, lambda text: err.print(text, highlight=False))
    try:
        outcome = engine.back() if back else engine.boot()
    except Failed as e:
        raise RunFailed(f"{e.verdict}: {e}") from None
    finally:
        engine.board.drop()
    for line in outcome.lines[1:]:
        err.print(f"  {line}", highlight=False)
    if outcome.folder is not None:
        err.print(f"record: {outcome.folder}", highlight=False)
    if outcome.verdict in ("back", "dry run") or not verify.failed(
        verify.Verdict(outcome.verdict), fail_on_warnings
    ):
        console.print(outcome.line)
        return
    raise RunFailed(outcome.line)


def register(app: typer.Typer) -> None:
    app.command()(boot)
