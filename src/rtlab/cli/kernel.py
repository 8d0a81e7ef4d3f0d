"""rtlab kernel: RT kernel config fragments, builds and their verification (riscv64, arm64, x86_64)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from rtlab.bounds import MAX_JOBS
from rtlab.cli.options import target_spec
from rtlab.cli.present import out_dir
from rtlab.cli.screen import console, err
from rtlab.errors import UsageError
from rtlab.units import read_user_file

app = typer.Typer(
    help="RT kernels: config fragments, builds and their verification (riscv64, arm64, x86_64)."
)
Board = Annotated[
    str,
    typer.Option(help="visionfive2, qemu-virt (riscv64), rb5, qemu-virt-arm64 (arm64) or qemu-x86_64"),
]
Preempt = Annotated[str, typer.Option(help="rt (PREEMPT_RT) or lowlatency (its CONFIG_PREEMPT twin)")]
Tick = Annotated[str, typer.Option(help="periodic (the study's) or nohz-full")]
Debug = Annotated[
    bool,
    typer.Option(
        "--debug", help="the Linaro talk's test kernel: lockdep, atomic-sleep checks, KASAN (not to measure)"
    ),
]
Base = Annotated[
    str, typer.Option(help="small (the architecture's defconfig trimmed for measuring) or defconfig")
]


@app.command("fragments")
def kernel_fragments(
    board: Board = "visionfive2",
    preempt: Preempt = "rt",
    tick: Tick = "periodic",
    debug: Debug = False,
    base: Base = "small",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="write the fragments into this folder")
    ] = None,
) -> None:
    """Print (or write) the config fragments a kernel is made of, in merge order."""
    from rtlab.kernel import fragments

    names = fragments.select(board, preempt, tick, debug, base)
    out_dir(output, "--output")
    for name in names:
        text = fragments.path(name).read_text()
        if output is None:
            sys.stdout.write(f"# ---- {name}.config\n{text}\n")
        else:
            output.mkdir(parents=True, exist_ok=True)
            (output / f"{name}.config").write_text(text)
    if output is not None:
        err.print(f"wrote {', '.join(f'{n}.config' for n in names)} into {output}", highlight=False)


@app.command("build")
def kernel_build(
    output: Annotated[
        Path, typer.Option("--output", "-o", help="where Image, dtbs, .config and the manifest go")
    ],
    board: Board = "visionfive2",
    preempt: Preempt = "rt",
    tick: Tick = "periodic",
    debug: Debug = False,
    base: Base = "small",
    fragment: Annotated[
        list[Path] | None, typer.Option(help="a fragment of your own, merged last (repeatable)")
    ] = None,
    source: Annotated[
        Path | None, typer.Option(help="a kernel tree (default: Debian's linux-source-6.12)")
    ] = None,
    rt_patches: Annotated[
        str | None,
        typer.Option(
            metavar="debian|FOLDER|FILE",
            help="patch Debian's source first: its 6.12 RT series (riscv lazy preemption), "
            "a quilt folder, or one patch",
        ),
    ] = None,
    jobs: Annotated[
        int | None, typer.Option(min=1, max=MAX_JOBS, help="parallel jobs (default: the CPU count)")
    ] = None,
    config_only: Annotated[
        bool, typer.Option("--config-only", help="merge and check the config, no build")
    ] = False,
) -> None:
    """Build the board's kernel (riscv64 or arm64 cross, x86_64 native): defconfig + fragments,
    every option checked, Image + the board's dtbs."""
    from rtlab.cache import cache_dir
    from rtlab.kernel import recipe

    for path in fragment or []:
        if not path.is_file():
            raise UsageError(f"--fragment {path} does not exist: give the path of a Kconfig fragment")
    own = tuple(p.resolve() for p in fragment or [])
    request = recipe.Request(board, preempt, tick, debug, base, own, rt_patches)
    request.names()  # bad names are found before anything runs
    out_dir(output, "--output")
    manifest = recipe.build(
        request,
        output,
        cache_dir(),
        source,
        jobs,
        config_only,
        phase=lambda p: err.print(f"kernel build: {p}", highlight=False),
    )
    err.print(
        f"{manifest['source']['version']} {preempt}: {', '.join(manifest['outputs'])} in {output} "
        f"({manifest['seconds']} s; log in {output / 'build.log'})",
        highlight=False,
    )
    if preempt == "rt" and not manifest["source"]["lazy_preemption"] and request.arch.kernel == "riscv":
        err.print(
            "no lazy preemption in this source: riscv gets it from Debian's 6.12 RT series "
            "(--rt-patches debian) or from linux 6.13",
            highlight=False,
        )


@app.command("verify")
def kernel_verify(
    configs: Annotated[list[Path] | None, typer.Argument(metavar="[CONFIG [TWIN_CONFIG]]")] = None,
    target: Annotated[
        str | None, typer.Option(help="verify the running kernel of a target instead", callback=target_spec)
    ] = None,
    expect: Annotated[
        str | None, typer.Option(help="rt or lowlatency (default: what the config says)")
    ] = None,
) -> None:
    """The StarFive study's Appendix A checks; with two configs, that they differ only in the model."""
    from rtlab.kernel import verify as kernel_verify_checks
    from rtlab.runner import sysinfo
    from rtlab.system import kernel
    from rtlab.targets import open_target

    files = configs or []
    if len(files) > 2 or (not files and target is None):
        raise UsageError("give one .config, two (the RT kernel and its twin), or --target")
    options_list: list[tuple[str, dict[str, str]]] = []
    for path in files:
        if not path.is_file():
            raise UsageError(f"{path} does not exist: give the path of a kernel .config")
        options_list.append((str(path), kernel.parse_config(read_user_file(path, "config", lenient=True))))
    if target is not None:
        tgt = open_target(target)
        try:
            info = sysinfo(tgt)
        finally:
            tgt.close()
        options_list.append((tgt.name, kernel.config_options(info)))
    ok = True
    for name, options in options_list:
        if not options:
            raise UsageError(f"{name}: no kernel config found (enable CONFIG_IKCONFIG_PROC or give the file)")
        for c in kernel_verify_checks.checks(options, expect if len(options_list) == 1 else None):
            ok &= c.ok
            verdict = Text("ok", "green") if c.ok else Text(f"want {c.want}", "red")
            console.print(Text(f"{name}: {c.item}: {c.found} ").append_text(verdict), soft_wrap=True)
    if len(options_list) == 2:
        pair = kernel_verify_checks.twins(options_list[0][1], options_list[1][1])
        for title, diff in (
            ("preemption model", pair.model),
            ("derived from it by Kconfig", pair.derived),
            ("OTHER", pair.other),
        ):
            for option, (a, b) in diff.items():
                console.print(f"differs ({title}): {option}: {a} / {b}", highlight=False)
        for problem in pair.problems:
            err.print(problem, highlight=False)
        ok &= not pair.problems
    if not ok:
        raise typer.Exit(1)
