"""Loads: what runs beside the measurement. Each is a stress-ng stressor list, any command,
or nothing (idle); the built-in ones (loads.toml) are defined as a user's file defines its own:

    [loads.spin]                      # any command, stopped with its process group
    command = ["sh", "-c", "while :; do :; done"]
    [loads.net]                       # stress-ng's arguments; {workers} filled in
    stress-ng = ["--sock", "{workers}"]
    on = "all"                        # with --rt-cpus: every CPU, not the housekeeping ones
    [loads.build]                     # prepared (unmeasured) before it starts
    prepare = ["sh", "-c", "...", "build", "{scratch}"]
    command = ["sh", "-c", "...", "build", "{scratch}"]
    needs = ["make", "gcc"]           # programs the target must have besides the first

A file is checked whole before anything runs: one line naming the fix, exit 2.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from rtlab.boundary import paths
from rtlab.errors import UsageError
from rtlab.units import read_user_file

# The StarFive study's loads, in its order: the default campaign.
DEFAULT_LOADS = ("idle", "cpu", "os", "memory", "storage")

# stress-ng is told to stop by itself this long after the measurement should have
# ended, so that even an agent killed with SIGKILL leaves nothing running.
STRESS_TIMEOUT_MARGIN_S = 30

# A load's preparation (unpacking and configuring a kernel tree for kcompile) runs to its end
# before the load starts, unmeasured; past this long it is stopped and the load failed.
PREPARE_LIMIT_S = 900

PLACEHOLDERS = ("workers", "scratch")
CHECKS = {
    "alive": "the load's process runs until the measurement ends",
    "oom-kill": "and the kernel's OOM killer killed at least once during the load",
}
_KEYS = {"stress-ng", "command", "prepare", "needs", "on", "check", "about"}
# rtlab sets these itself: the safety timeout and, with --rt-cpus, the CPUs
_STRESS_OWN = ("--timeout", "-t", "--taskset")


def valid_name(name: str) -> bool:
    """Whether NAME can be a load's: it names a folder of the run (loads/<name>), so it is a
    path component as the boundary allows one (boundary/paths.py), of at most 64 characters."""
    return paths.is_component(name, longest=64)


_PLACEHOLDER = re.compile(r"\{([^}]*)\}")


@dataclass(frozen=True)
class Load:
    name: str
    stress_ng: tuple[str, ...] | None = None  # stress-ng's arguments (no program name)
    command: tuple[str, ...] | None = None  # any command, program first
    on: str | None = None  # "housekeeping" or "all"; None: as the plan says (--loads-on)
    check: str = "alive"
    about: str = ""
    prepare: tuple[str, ...] | None = None  # run to its end before the load starts, program first
    needs: tuple[str, ...] = ()  # programs the target must have besides the command's first

    @property
    def program(self) -> str | None:
        """What must be installed on the target; None for an idle load."""
        if self.stress_ng is not None:
            return "stress-ng"
        return self.command[0] if self.command else None

    @property
    def programs(self) -> tuple[str, ...]:
        """Every program the target must have for this load: its own and what it needs."""
        first = (self.prepare[0],) if self.prepare else ()
        return tuple(dict.fromkeys(p for p in (self.program, *first, *self.needs) if p))

    @property
    def scratch(self) -> bool:
        """Whether it works in a folder of the run's own ({scratch})."""
        every = (*(self.stress_ng or ()), *(self.command or ()), *(self.prepare or ()))
        return any("{scratch}" in a for a in every)

    def prepare_argv(self, workers: int, scratch: str) -> list[str] | None:
        """The preparation's command line on the target, or None when it has none."""
        return [_fill(a, workers, scratch) for a in self.prepare] if self.prepare else None

    def argv(self, workers: int, scratch: str, timeout_s: int, cpus: str | None) -> list[str] | None:
        """The whole command line on the target (program first), or None for idle.
        `cpus`: confine it to these CPUs (a kernel CPU list); None: anywhere."""

        def fill(arg: str) -> str:
            return _fill(arg, workers, scratch)

        if self.stress_ng is not None:
            # its throughput table when it ends (rundir/stressng.py), unless asked for already
            metrics = [] if {"--metrics", "--metrics-brief"} & set(self.stress_ng) else ["--metrics-brief"]
            argv = ["stress-ng", *map(fill, self.stress_ng), *metrics, "--timeout", f"{timeout_s}s"]
            return argv + ["--taskset", cpus] if cpus else argv
        if self.command:
            return ["taskset", "-c", cpus, *map(fill, self.command)] if cpus else [*map(fill, self.command)]
        return None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"about": self.about, "check": self.check, "on": self.on}
        if self.stress_ng is not None:
            out["stress-ng"] = list(self.stress_ng)
        if self.command is not None:
            out["command"] = list(self.command)
        if self.prepare is not None:
            out["prepare"] = list(self.prepare)
        if self.needs:
            out["needs"] = list(self.needs)
        return out


def _fill(arg: str, workers: int, scratch: str) -> str:
    return arg.replace("{workers}", str(workers)).replace("{scratch}", scratch)


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise UsageError(f'{where} must be a list of strings, e.g. ["--sock", "{{workers}}"]')
    if not value or not value[0].strip():
        raise UsageError(f"{where} is empty: give the program and its arguments")
    if any("\n" in a or "\r" in a for a in value):
        # an argument travels to the agent as one line of an argv file
        raise UsageError(f"{where}: an argument holds a line break: write it on one line (; between)")
    for arg in value:
        for name in _PLACEHOLDER.findall(arg):
            if name not in PLACEHOLDERS:
                raise UsageError(
                    f"{where} uses {{{name}}}: only {', '.join('{' + p + '}' for p in PLACEHOLDERS)} are "
                    "filled in"
                )
    return tuple(value)


def parse_load(name: str, table: Any, source: str) -> Load:
    where = f"{source}: load {name!r}"
    if not valid_name(name):
        raise UsageError(f"{where}: a load's name is up to 64 letters, digits and ._+- (it names a folder)")
    if not isinstance(table, dict):
        raise UsageError(f"{where} must be a table: [loads.{name}] with stress-ng = [...] or command = [...]")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key {', '.join(unknown)}: use {', '.join(sorted(_KEYS))}")
    if "stress-ng" in table and "command" in table:
        raise UsageError(f"{where}: give stress-ng or command, not both")
    stress = _strings(table["stress-ng"], f"{where}: stress-ng") if "stress-ng" in table else None
    if stress and any(a.split("=")[0] in _STRESS_OWN for a in stress):
        raise UsageError(f"{where}: rtlab sets stress-ng's --timeout and --taskset itself: remove them")
    command = _strings(table["command"], f"{where}: command") if "command" in table else None
    prepare = _strings(table["prepare"], f"{where}: prepare") if "prepare" in table else None
    if prepare and stress is None and command is None:
        raise UsageError(f"{where}: prepare is for a load that runs something: add its command")
    needs = _strings(table["needs"], f"{where}: needs") if "needs" in table else ()
    if not all(paths.is_component(n, longest=64) for n in needs):
        raise UsageError(f'{where}: needs names programs, e.g. ["make", "gcc"]')
    on = table.get("on")
    if on not in (None, "housekeeping", "all"):
        raise UsageError(f'{where}: on = {on!r}: use "housekeeping" or "all"')
    check = table.get("check", "alive")
    if check not in CHECKS:
        raise UsageError(f"{where}: check = {check!r}: use {' or '.join(map(repr, CHECKS))}")
    if check != "alive" and stress is None and command is None:
        raise UsageError(f"{where}: check = {check!r} needs a load that runs something")
    about = table.get("about", "")
    if not isinstance(about, str):
        raise UsageError(f"{where}: about is a string saying what the load stresses")
    return Load(name, stress, command, on, check, about, prepare, needs)


def parse_catalogue(text: str, source: str) -> dict[str, Load]:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{source} is not valid TOML ({e}): fix that line") from None
    unknown = sorted(set(doc) - {"loads"})
    if unknown or not isinstance(doc.get("loads"), dict) or not doc["loads"]:
        raise UsageError(f"{source}: a loads file holds [loads.NAME] tables only, e.g. [loads.spin]")
    return {name: parse_load(name, table, source) for name, table in doc["loads"].items()}


BUILTIN: Mapping[str, Load] = parse_catalogue(
    resources.files("rtlab.plan").joinpath("loads.toml").read_text(encoding="utf-8"), "rtlab's loads.toml"
)


def read_file(path: Path) -> tuple[Load, ...]:
    """The loads a user's file defines; built-in names are refused (one meaning per name)."""
    try:
        text = read_user_file(path, "loads file")
    except OSError as e:
        raise UsageError(f"cannot read loads file {path}: {e.strerror}: give an existing TOML file") from None
    loads = parse_catalogue(text, str(path))
    taken = sorted(set(loads) & set(BUILTIN))
    if taken:
        raise UsageError(f"{path}: {', '.join(taken)} is built in: give your load another name")
    return tuple(loads.values())


def parse_loads(text: str, known: Mapping[str, Load] = BUILTIN) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise UsageError(
            f"unknown load {', '.join(unknown) or '(none given)'}: choose from {','.join(known)} "
            "(or define it in a --loads-file)"
        )
    if len(set(names)) != len(names):
        raise UsageError(f"load listed twice in {text!r}: name each load once")
    return names
