"""Every value a user can give, hostile: each option and argument of every command, a study
file's values and the environment's settings, fed one at a time what a typo, a script or an
attacker would give (1e300, 10**30, 1e-300, negatives, 0, NaN, inf, Arabic-Indic digits, empty
strings, 10,000 characters, control characters, U+2028, ../ paths). Each answer must be an exit
code of the contract (0 to 3), at most one line of error, never a traceback, and quick; and
nothing is ever measured here: a command that takes --target gets one that refuses
(ssh://nobody@127.0.0.1:1), and a local or QEMU target being opened fails the test.

The CLI is walked from typer's own command tree, so a new command or option is covered (or
fails here, until it has a recipe below that keeps it from measuring)."""

from __future__ import annotations

import itertools
import json
import os
import resource
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.core import TyperArgument, TyperOption
from typer.main import get_command
from typer.testing import CliRunner

import rtlab.cli
from evt_data import write_run

pytestmark = pytest.mark.hostile

REFUSED = "ssh://nobody@127.0.0.1:1"  # nothing listens on port 1: refused at once
NOWHERE = "http://127.0.0.1:1"
# Every command runs in a folder this deep in the sandbox: a ../ value (at most 8 of them in
# 24 characters) still lands inside it, never on the host's files (these tests run as root).
WORK = Path(*["d"] * 12)
# A hang guard, in wall time: an answer takes well under a second alone, but drawing a
# comparison's figures took over 20 s at nice 10 beside make test's measuring part.
HANG_S = 60
# A memory guard beside it: a read that never ends (/dev/zero) stays in C, where no signal
# stops it; within this much more address space than before the call it is a MemoryError
# (a failure here), not a host driven out of memory (it took 12 GB in 4 minutes).
MEMORY_HEADROOM = 4 << 30  # a hang guard only: each answer takes well under a second
EXAMPLES = 3  # per option and run: about half of them from HOSTILE, the others random text

HOSTILE = [
    "1e300", str(10**30), "1e-300", "-1", "-5s", "0", "0s", "nan", "NaN", "inf", "-inf",
    "\u0661\u0662",  # '١٢', Arabic-Indic digits: int() reads them as 12
    "\uff11\uff12s",  # fullwidth '１２s'
    "", " ", "9" * 10_000, "x" * 10_000, "\x1b[2J\x1b]52;c;eA==\x07", "1\u2028s", "a\nb", "\t",
    "../", "../../../../etc/passwd",
    "/dev/zero",  # endless to read, a no-op to write: the one absolute path drawn
    "1e300%", "nan%", "-1%", "99999999999999999999us",
]  # fmt: skip
# A shell command option runs what it is given: only the fixed values, every one harmless
SHELL = {"--prepare", "--on-alert", "--power-cycle", "--console"}


def _hostile(flag: str) -> st.SearchStrategy[str]:
    fixed = st.sampled_from(HOSTILE)
    if flag in SHELL:
        return fixed
    # no NUL: a real command line cannot carry one (execve ends each argument at it); and
    # relative, as each fixed path is: the tests run as root here, and a drawn "/" given to an
    # option that writes a folder or a file would write into the host's root
    return st.one_of(fixed, st.text(max_size=24).filter(lambda t: "\x00" not in t and t[:1] not in "/~"))


class WouldMeasure(BaseException):
    """A local or QEMU target was opened: this case would measure (or boot) on this machine.
    A BaseException, so that no `except Exception` on the way can hide it."""


class Hung(BaseException):
    """No answer within HANG_S."""


def _refuse(*args: Any, **kwargs: Any) -> None:
    raise WouldMeasure("a hostile value made rtlab open a local or QEMU target")


def _hang(signum: int, frame: Any) -> None:
    raise Hung(f"no answer within {HANG_S} s")


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Runs to read, a study and a LAVA job that name only refusing targets, and room for
    what commands write (every --out is a fresh folder in here)."""
    base = tmp_path_factory.mktemp("values")
    runs = base / "runs"
    runs.mkdir()
    a = write_run(runs, 1, 0.1, seconds=20)
    b = write_run(runs, 2, 0.1, seconds=20)
    a.rename(base / "run-a")
    b.rename(base / "run-b")
    (base / "study.toml").write_text(f'[study]\nname = "s"\nloads = "idle"\n[targets]\nA = "{REFUSED}"\n')
    job = {"device_type": "qemu", "job_name": "j", "actions": [{"deploy": {}}, {"boot": {}}]}
    (base / "base.yaml").write_text(json.dumps(job))  # JSON is YAML
    (base / "job.yaml").write_text(json.dumps(job))
    (base / "kernel").write_bytes(b"MZ")
    for name in ("out", "cache", "data"):
        (base / name).mkdir()
    (base / WORK).mkdir(parents=True)
    import matplotlib.pyplot  # noqa: F401  (its first import, fonts and all, is not a value's cost)

    return base


_fresh = itertools.count()


def fresh(sandbox: Path) -> str:
    return str(sandbox / "out" / str(next(_fresh)))


# Each command's arguments that keep it from measuring, options first (flag -> value), then
# its positional arguments. A fuzzed option replaces its entry; the rest stay.
def recipe(words: str, s: Path) -> tuple[dict[str, str | None], list[str]]:
    db = str(s / "history.db")
    run_a, run_b = str(s / "run-a"), str(s / "run-b")
    recipes: dict[str, tuple[dict[str, str | None], list[str]]] = {
        "run": ({"--target": REFUSED, "--out": fresh(s)}, []),
        "trace": ({"--threshold": "500us", "--target": REFUSED, "--out": fresh(s)}, []),
        "collect": ({}, [str(s / "no-run")]),
        "report": ({}, [run_a]),
        "compare": ({}, [run_a, run_b]),
        "worst": ({}, [run_a]),
        "scan": ({"--target": REFUSED, "--out": fresh(s)}, []),
        "study": ({"--out": fresh(s)}, [str(s / "study.toml")]),
        "check": ({"--target": REFUSED}, []),
        "tune": ({"--target": REFUSED}, []),
        # no git tree: refused after every value is read, before a worktree or a build
        "bisect": (
            {
                "--repo": str(s / "no-repo"),
                "--good": "a",
                "--bad": "b",
                "--out": fresh(s),
                "--target": REFUSED,
            },
            [],
        ),
        # the prepare command fails: the sweep stops before it would measure
        "sweep": (
            {"--out": fresh(s), "--option": "CONFIG_X=y", "--prepare": "exit 1", "--target": REFUSED},
            [],
        ),
        "monitor": (
            {"--out": fresh(s), "--target": REFUSED, "--blocks": "1", "--duration": "1s", "--db": db},
            [],
        ),
        "lava job": ({"--output": str(s / "out" / "job.yaml"), "--base": str(s / "base.yaml")}, []),
        "lava submit": ({"--url": NOWHERE}, [str(s / "job.yaml")]),
        "lava import": ({"--url": NOWHERE}, ["1"]),
        "history add": ({"--db": db}, [run_a]),
        "history list": ({"--db": db}, []),
        "history trend": ({"--db": db}, []),
        "history regressions": ({"--db": db}, []),
        "history limit": ({"--db": db}, []),
        "history accept": ({"--db": db, "--load": "idle", "--reason": "r"}, [run_a]),
        "history rebuild": ({"--db": db}, []),
        "history baseline set": ({"--db": db}, [run_a]),
        "history baseline show": ({"--db": db}, []),
        "export kcidb": ({"--output": str(s / "out" / "k.json"), "--no-worst": None}, [run_a]),
        "export squad": ({"--url": NOWHERE, "--team": "t", "--project": "p"}, [run_a]),
        "kernel fragments": ({"--output": fresh(s)}, []),
        # --rt-patches with --source is refused before a tool runs: every other value is read
        # (and refused or not) before that; a kernel build itself is minutes of this machine
        "kernel build": (
            {"--output": fresh(s), "--source": str(s / "no-source"), "--rt-patches": "x"},
            [],
        ),
        "kernel verify": ({"--target": REFUSED}, []),
        "boot": ({"--target": REFUSED, "--dry-run": None}, [str(s / "kernel")]),
    }
    return recipes[words]


# What cannot be made safe, and why: never drawn.
SKIP = {
    # the one value that lets a kernel build start: with --source and no --rt-patches, the
    # build configures the given tree with make (minutes of this machine's CPUs)
    ("kernel build", "--rt-patches"): "an accepted empty value starts a real kernel build",
}


def _commands(command: Any, words: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    sub = getattr(command, "commands", None)
    if not sub:
        yield " ".join(words), command
        return
    for name, child in sub.items():
        yield from _commands(child, (*words, name))


COMMANDS = dict(_commands(get_command(rtlab.cli.app)))


def _values() -> list[tuple[str, str]]:
    """(command, option flag or argument name) for every value of the CLI."""
    found = []
    for words, command in COMMANDS.items():
        for param in command.params:
            if isinstance(param, TyperOption) and (param.is_flag or param.opts[0] == "--help"):
                continue  # a flag takes no value
            if isinstance(param, TyperOption | TyperArgument):
                found.append((words, param.opts[0] if isinstance(param, TyperOption) else param.name))
    return found


VALUES = _values()


def _address_space() -> int:
    return int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def invoke(sandbox: Path, args: list[str], env: dict[str, str | None] | None = None) -> tuple[int, str, str]:
    """rtlab ARGS as the `rtlab` script runs it (rtlab.cli.main), in this process: its exit
    code, stdout and stderr. Any exception but SystemExit fails the test with its traceback."""
    environment: dict[str, str | None] = {
        "RTLAB_HISTORY_DB": str(sandbox / "history.db"), "RTLAB_HISTORY": None,
        "XDG_DATA_HOME": str(sandbox / "data"),
        "RTLAB_CACHE": str(sandbox / "cache"), "COLUMNS": "200", **(env or {}),
    }  # fmt: skip
    runner = CliRunner()
    here = os.getcwd()
    before = signal.signal(signal.SIGALRM, _hang)
    code = 0
    with (
        runner.isolation(env=environment) as (out, err, _),
        mock.patch("rtlab.targets.local.LocalTarget.__init__", _refuse),
        mock.patch("rtlab.targets.qemu.QemuTarget.__init__", _refuse),
        mock.patch("rtlab.cli._stops_as_ctrl_c", lambda: None),  # pytest keeps its signals
        mock.patch.object(sys, "argv", ["rtlab", *args]),
    ):
        os.chdir(sandbox / WORK)  # relative and ../ paths land in the sandbox
        limits = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (_address_space() + MEMORY_HEADROOM, limits[1]))
        signal.setitimer(signal.ITIMER_REAL, HANG_S)
        try:
            rtlab.cli.main()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, before)
            resource.setrlimit(resource.RLIMIT_AS, limits)
            os.chdir(here)
            sys.stdout.flush()
            sys.stderr.flush()
        return code, out.getvalue().decode(errors="replace"), err.getvalue().decode(errors="replace")


def check_answer(args: list[str], code: int, stdout: str, stderr: str) -> None:
    said = f"rtlab {' '.join(a[:60] for a in args)!r}: exit {code}\n{stderr[-2000:]}"
    assert 0 <= code <= 3, said
    assert "Traceback" not in stdout + stderr, said
    assert "Usage:" not in stderr and "\u256d" not in stderr, said  # click's block, typer's box
    if code in (2, 3):
        lines = stderr.rstrip("\n").split("\n")
        errors = [line for line in lines if line.startswith("rtlab:")]
        assert len(errors) == 1 and lines[-1] == errors[0], said
        # a refused value is refused before anything else is said; only the refusing target
        # (found after the plan is shown) and a failed step may follow lines of progress
        if not any(word in errors[0] for word in ("127.0.0.1", "connect", "prepare", "exit 1")):
            assert len(lines) == 1, said


def _args(opts: dict[str, str | None], positional: list[str]) -> list[str]:
    args: list[str] = []
    for flag, value in opts.items():
        args += [flag] if value is None else [f"{flag}={value}"]  # =: a value may start with -
    return args + ["--", *positional] if positional else args


@pytest.mark.parametrize(("words", "name"), VALUES, ids=[f"{w}:{n}" for w, n in VALUES])
def test_a_hostile_value_is_one_line_and_measures_nothing(sandbox: Path, words: str, name: str) -> None:
    if (words, name) in SKIP:
        pytest.skip(SKIP[words, name])
    try:
        recipe(words, sandbox)
    except KeyError:
        pytest.fail(f"rtlab {words} has no recipe here: say how it is kept from measuring")
    param = next(
        p for p in COMMANDS[words].params if (p.opts[0] if p.opts else p.name) == name or p.name == name
    )

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(value=_hostile(name))
    def one(value: str) -> None:
        opts, positional = recipe(words, sandbox)
        if isinstance(param, TyperArgument):
            index = [p.name for p in COMMANDS[words].params if isinstance(p, TyperArgument)].index(name)
            positional = list(positional)
            if index < len(positional):
                positional[index] = value
            else:
                positional.append(value)
        else:
            opts = {**opts, name: value}
        args = [*words.split(), *_args(opts, positional)]
        check_answer(args, *invoke(sandbox, args))

    one()


STUDY_KEYS = ("duration", "interval", "priority", "workers", "settle", "block", "spike-threshold",
              "trace", "histogram-range", "idle-after-boot", "hwlat-gate", "deadline")  # fmt: skip
TOML_VALUES = ['"{}"', "{}"]  # a string, or the raw TOML number (1e300, nan, inf, 10**30)


@given(
    key=st.sampled_from(STUDY_KEYS),
    value=st.sampled_from([v for v in HOSTILE if len(v) < 100]),
    raw=st.booleans(),
)
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_a_study_file_value_is_bounded_as_the_option_is(
    sandbox: Path, key: str, value: str, raw: bool
) -> None:
    number = raw and value in ("1e300", str(10**30), "1e-300", "-1", "0", "nan", "inf", "-inf")
    shown = value if number else json.dumps(value)  # a JSON string is a TOML basic string
    study = sandbox / "out" / f"study-{next(_fresh)}.toml"
    extra = 'trace = "1ms"\n' if key == "trace" else ""
    study.write_text(
        f'[study]\nname = "s"\nloads = "idle"\n{key} = {shown}\n{extra}[targets]\nA = "{REFUSED}"\n'
    )
    args = ["study", str(study), "--out", fresh(sandbox)]
    check_answer(args, *invoke(sandbox, args))


# The settings rtlab reads from the environment, each with a command that reads it
ENVIRONMENT = {
    "RTLAB_HISTORY_DB": ["history", "list"],
    "RTLAB_TARGET_DIR": ["run", "--target", REFUSED, "--loads", "idle"],
    "RTLAB_HISTORY": ["history", "list"],
    "RTLAB_CACHE": ["kernel", "fragments"],
}


@pytest.mark.parametrize("name", sorted(ENVIRONMENT))
def test_a_hostile_environment_setting_is_one_line(sandbox: Path, name: str) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(value=_hostile(name))
    def one(value: str) -> None:
        args = [*ENVIRONMENT[name]]
        if args[0] == "run":
            args += ["--out", fresh(sandbox)]
        check_answer(args, *invoke(sandbox, args, env={name: value}))

    one()
