"""The options several commands share, defined once (typer's Annotated types), and the run's
options (plan.options.OPTIONS) made into command-line options."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from rtlab.cli.screen import out_file
from rtlab.plan import Plan
from rtlab.plan.options import OPTION, OPTIONS

Command = TypeVar("Command", bound=Callable[..., Any])


def shown_name(value: str | None) -> str | None:
    """A name or label the user gives (--name, --labels): shown in every report and terminal,
    so one with a control character (an escape sequence) is refused in one line."""
    from rtlab.boundary.untrusted import printable
    from rtlab.errors import UsageError

    if value is not None and printable(value, lines=False) != value:
        raise UsageError(
            f"{printable(value)!r} holds control characters: give a name of printable characters"
        )
    return value


def target_spec(value: Any) -> Any:
    """--target (one or a list): an empty one is refused, never read as "local": a shell
    variable left unset (--target "$BOARD") must not measure, or load, the host itself."""
    from rtlab.errors import UsageError

    for spec in value if isinstance(value, list) else [value]:
        if spec is not None and not spec.strip():
            raise UsageError(
                "--target is empty: give local, ssh://[user@]host[:port], qemu:... or labgrid:PLACE"
            )
    return value


Name = Annotated[str | None, typer.Option(help="the run's id in reports", callback=shown_name)]
RUN_PANEL = "Run options (also the study file's keys)"


def run_options(
    lava: bool = False,
    keys: tuple[str, ...] | None = None,
    skip: tuple[str, ...] = (),
    flags: Mapping[str, str] | None = None,
    helps: Mapping[str, str] | None = None,
    panel: str = RUN_PANEL,
) -> Callable[[Command], Command]:
    """Gives the command one --KEY option per run option of plan.options.OPTIONS (with `lava`, those
    `rtlab lava job` takes; with KEYS, only those; never those in SKIP), shown in a panel of
    their own; the command receives the ones given as its `options` argument, key -> text,
    for plan.options.from_options. A command whose option means a little more than run's says so in
    HELPS (its own default, say) or FLAGS (scan's --per-stressor is run's --duration)."""
    wanted = keys if keys is not None else tuple(option.key for option in OPTIONS)
    unknown = set(wanted) | set(skip) | set(flags or {}) | set(helps or {})
    if unknown - set(OPTION):
        raise ValueError(f"not run options: {', '.join(sorted(unknown - set(OPTION)))}")
    chosen = [OPTION[key] for key in wanted if key not in skip and (OPTION[key].lava or not lava)]
    flag = {option.key: (flags or {}).get(option.key, option.key) for option in chosen}
    shown = {option.key: (helps or {}).get(option.key, option.help) for option in chosen}

    def add(command: Command) -> Command:
        own = [
            p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "options"
        ]
        names = {option.key: flag[option.key].replace("-", "_") for option in chosen}
        added = [
            inspect.Parameter(
                names[option.key],
                inspect.Parameter.KEYWORD_ONLY,
                default=None,
                annotation=Annotated[
                    str | None,
                    typer.Option(f"--{flag[option.key]}", help=shown[option.key], rich_help_panel=panel),
                ],
            )
            for option in chosen
        ]

        @functools.wraps(command)
        def with_options(**given: Any) -> Any:
            options = dict(given.pop("options", {}))  # a command calling another passes them so
            for key, name in names.items():
                value = given.pop(name, None)
                if value is not None:
                    options[key] = value
            return command(**given, options=options)

        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own] + added
        with_options.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        with_options.__annotations__ = {p.name: p.annotation for p in params}
        return with_options  # type: ignore[return-value]

    return add


def plan_of(
    preset_name: str | None,
    loads_file: Path | None,
    options: Mapping[str, object],
    flags: Mapping[str, str] | None = None,
) -> Plan:
    """The preset (or the defaults), a loads file's loads, and the run options given (plan.options.OPTIONS,
    key -> text) on top: the plan of every command that measures. FLAGS: the command's own
    names for run options (run_options' FLAGS), for its error lines."""
    from dataclasses import replace

    from rtlab.plan import preset
    from rtlab.plan.loads import read_file
    from rtlab.plan.options import from_options

    base = preset(preset_name) if preset_name else Plan()
    if loads_file is not None:
        custom = read_file(loads_file)
        # a file's loads are what it is for: measured unless --loads says otherwise
        base = replace(base, custom_loads=custom, loads=tuple(load.name for load in custom))
    return from_options(base, options, flags)


Format = Annotated[str, typer.Option("--format", "-f", help="table, md, csv, json, html or junit")]
Deadline = Annotated[str | None, typer.Option(help="e.g. 200us: pass/fail per load, exit code 1 on a miss")]
RunDeadline = Annotated[
    str | None,
    typer.Option(
        # rich markup to typer: unescaped, [:BOARD] would vanish as a tag
        help="e.g. 200us, or history\\[:BOARD]\\[@RATE] (each load's limit from the board's accepted "
        "runs, exceeded by RATE of them, default 1 %: rtlab history limit): exit code 1 on a miss"
    ),
]
Series = Annotated[bool, typer.Option("--series", help="with --format csv: the time axis, one row per block")]
Figures = Annotated[
    Path | None, typer.Option("--figures", help="also write each figure as PNG into this folder")
]
AcceptKey = Annotated[
    bool, typer.Option("--accept-new-host-key", help="trust an SSH host key seen for the first time")
]
Preset = Annotated[str | None, typer.Option("--preset", help="starfive: the seed protocol")]
LoadsFile = Annotated[
    Path | None,
    typer.Option(help="a TOML file of loads of your own (stress-ng lists or any command): docs/loads.md"),
]
Junit = Annotated[
    Path | None, typer.Option(help="also write JUnit XML (one test case per load) here", callback=out_file)
]
History = Annotated[
    bool,
    typer.Option("--history", help="also add the result to the history store (default with RTLAB_HISTORY=1)"),
]
Target = Annotated[str, typer.Option(help="local, ssh://... or qemu:...", callback=target_spec)]
