"""Every process rtlab starts is started by rtlab.children, which ends it (and what it started)
with rtlab: a module that starts one another way fails here, by name and line."""

from __future__ import annotations

import ast
import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "rtlab"
ONE_WAY = "children.py"
# Modules that may start a process another way, each with its reason. None so far: a new entry
# needs a reason why rtlab.children cannot do it.
ALLOWED: dict[str, str] = {}

# The callables of the standard library that start a process (os.exec* replaces rtlab itself,
# which would skip every cleanup as surely).
STARTERS = {
    "subprocess": {"Popen", "run", "call", "check_call", "check_output", "getoutput", "getstatusoutput"},
    "os": {"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp"}
    | {
        f"{kind}{how}"
        for kind in ("spawn", "exec")
        for how in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")
    },
    "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
    "pty": {"spawn", "fork"},
}
# the same, called on whatever object: an event loop's own
ANY_OWNER = {"create_subprocess_exec", "create_subprocess_shell", "subprocess_exec", "subprocess_shell"}
WHOLE_MODULES = {"multiprocessing", "concurrent.futures.process"}


def _annotations(tree: ast.AST) -> set[int]:
    """ids of the nodes inside type annotations: `subprocess.Popen[str]` there names a type."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        found: list[ast.expr | None] = []
        if isinstance(node, ast.arg):
            found.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
        for annotation in found:
            if annotation is not None:
                inside.update(id(n) for n in ast.walk(annotation))
    return inside


def process_starts(source: str, name: str = "<module>") -> list[str]:
    """Where SOURCE starts a process (or names a callable that does), as 'line what'."""
    tree = ast.parse(source, name)
    aliases = {}  # a name bound by an import -> the module it is
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
                if a.name in WHOLE_MODULES or a.name.startswith("multiprocessing."):
                    found.append(f"{node.lineno} import {a.name}")
        elif isinstance(node, ast.ImportFrom) and node.module:
            module = node.module
            for a in node.names:
                if a.name in STARTERS.get(module, set()) or a.name in ANY_OWNER:
                    found.append(f"{node.lineno} from {module} import {a.name}")
                if module.split(".")[0] == "multiprocessing" or module in WHOLE_MODULES:
                    found.append(f"{node.lineno} from {module} import {a.name}")
                if module == "concurrent.futures" and a.name == "ProcessPoolExecutor":
                    found.append(f"{node.lineno} from {module} import {a.name}")
    annotations = _annotations(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or id(node) in annotations:
            continue
        owner = aliases.get(node.value.id, node.value.id) if isinstance(node.value, ast.Name) else "..."
        if node.attr in ANY_OWNER or node.attr in STARTERS.get(owner, set()):
            found.append(f"{node.lineno} {owner}.{node.attr}")
        elif node.attr == "ProcessPoolExecutor":
            found.append(f"{node.lineno} {node.attr}")
    return sorted(found, key=lambda f: int(f.split()[0]))


@pytest.mark.unit
def test_every_process_is_started_by_rtlab_children():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel == ONE_WAY or rel in ALLOWED:
            continue
        found += [f"{rel}:{where}" for where in process_starts(path.read_text(), rel)]
    assert found == [], "processes started around rtlab.children: " + ", ".join(found)


@pytest.mark.unit
def test_the_check_finds_each_way_to_start_a_process():
    """The check itself: each way is found, and naming a type or a constant is not a start."""
    source = """
import asyncio, os, pty
import subprocess as sp
import multiprocessing
from subprocess import check_output
from concurrent.futures import ProcessPoolExecutor

def f(p: sp.Popen[str]) -> sp.CompletedProcess[str]:
    sp.run(["true"], stdout=sp.PIPE, stderr=sp.DEVNULL)
    os.system("true")
    os.execvp("true", ["true"])
    pty.spawn(["sh"])
    asyncio.create_subprocess_exec("true")
    loop.subprocess_shell(factory, "true")
    later = sp.Popen
    try:
        pass
    except sp.TimeoutExpired:
        pass
"""
    assert process_starts(source) == [
        "4 import multiprocessing",
        "5 from subprocess import check_output",
        "6 from concurrent.futures import ProcessPoolExecutor",
        "9 subprocess.run",
        "10 os.system",
        "11 os.execvp",
        "12 pty.spawn",
        "13 asyncio.create_subprocess_exec",
        "14 loop.subprocess_shell",
        "15 subprocess.Popen",
    ]


@pytest.mark.unit
def test_a_command_stopped_leader_first_puts_things_back_with_its_own_commands(tmp_path):
    # a shell stopped while a command of its own runs in the foreground (the agent's hwlat
    # pass saving tracefs with sed and mv): stopped leader first, the command ends as it would
    # and the shell's trap runs after it; a SIGTERM to the whole group killed the command
    import time

    from rtlab import children

    ready, done, leftover = tmp_path / "ready", tmp_path / "done", tmp_path / "leftover"

    def started(path: Path) -> None:
        deadline = time.monotonic() + 30
        while not path.exists():
            assert time.monotonic() < deadline, "the shell never started"
            time.sleep(0.02)

    script = f"trap 'echo trapped >> {done}' TERM; touch {ready}; sleep 1 && echo done >> {done}"
    with children.running(["sh", "-c", script], leader_first=True):
        started(ready)
    assert sorted(done.read_text().split()) == ["done", "trapped"]  # dash runs the trap at once
    # and what the group left behind is ended all the same, once the shell has ended
    script = f"trap 'exit 0' TERM; sleep 30 & echo $! > {leftover}; wait"
    with children.running(["sh", "-c", script], leader_first=True):
        started(leftover)
    stat = Path(f"/proc/{leftover.read_text().strip()}/stat")
    assert not stat.exists() or stat.read_text().rpartition(")")[2].split()[0] == "Z"  # or not reaped yet


@contextlib.contextmanager
def _rtlabs_handlers() -> Iterator[None]:
    """Ctrl-C and SIGTERM raise KeyboardInterrupt, as rtlab's main() sets them; SIGHUP ignored,
    as under nohup. Put back as they were after."""
    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {s: signal.getsignal(s) for s in stops}
    try:
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.default_int_handler)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


@pytest.mark.unit
@pytest.mark.parametrize("nested", [False, True], ids=["raised-at-once", "held-then-raised"])
def test_a_stop_that_comes_while_the_first_is_answered_waits_for_the_answer(nested):
    """A boot undone on Ctrl-C (boot/machine.py): the block's first stop raises, whether it came
    at once or inside a nested deferral that raises it as it ends; a second and a third, sent in
    the except clause before anything there could defer them, are noted, told and never raised,
    nor is one a nested deferral held; once the block ends a stop raises again. A stop rtlab
    does not handle (nohup's SIGHUP) is left as it was."""
    from rtlab import children

    noted: list[int] = []
    told: list[int] = []
    answered = False
    with _rtlabs_handlers():
        with (
            pytest.raises(RuntimeError, match="the answer ran whole"),
            children.first_stop_holds_the_rest(noted, told.append),
        ):
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            try:
                if nested:
                    with children.stops_deferred():
                        signal.raise_signal(signal.SIGINT)
                else:
                    signal.raise_signal(signal.SIGINT)
                pytest.fail("the first stop did not raise")
            except KeyboardInterrupt:
                try:
                    signal.raise_signal(signal.SIGTERM)
                    signal.raise_signal(signal.SIGINT)
                    with children.stops_deferred():
                        signal.raise_signal(signal.SIGINT)
                except KeyboardInterrupt:
                    pytest.fail("a stop after the first cut its answer short")
                answered = True
                raise RuntimeError("the answer ran whole") from None
        assert answered and noted == [signal.SIGTERM, signal.SIGINT, signal.SIGINT] and told == noted
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGTERM)


def _handlers() -> list[Any]:
    return [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)]


@pytest.mark.unit
def test_a_stop_at_the_blocks_end_is_raised_once_the_handlers_are_back(monkeypatch):
    """However the block ends, the handlers are rtlab's again after it, and no stop is lost: one
    Python runs as the block's __exit__ begins (where a generator's finally could not yet have
    put them back) or while they are put back is raised after; one the block swallowed is raised
    again; an error with no stop goes on as it was; ON_STOP raising (a third Ctrl-C) ends the
    wait at once."""
    from rtlab import children

    rtlabs = [signal.default_int_handler, signal.default_int_handler, signal.SIG_IGN]
    with _rtlabs_handlers():
        noted: list[int] = []
        with children.first_stop_holds_the_rest(noted):
            pass
        assert _handlers() == rtlabs and noted == []
        # as __exit__ begins: the handler, run there, notes it
        with pytest.raises(KeyboardInterrupt), children.first_stop_holds_the_rest(noted):
            try:
                signal.getsignal(signal.SIGINT)(signal.SIGINT, SimpleNamespace(f_code=children._EXIT))
            except KeyboardInterrupt:
                pytest.fail("a stop as __exit__ began raised before the handlers were put back")
            assert noted == [signal.SIGINT]
        assert _handlers() == rtlabs
        # while the handlers are put back
        put_back = children._put_back

        def stopped_meanwhile(previous: Any) -> None:
            signal.raise_signal(signal.SIGTERM)
            put_back(previous)

        monkeypatch.setattr(children, "_put_back", stopped_meanwhile)
        noted.clear()
        with pytest.raises(KeyboardInterrupt), children.first_stop_holds_the_rest(noted):
            pass
        monkeypatch.setattr(children, "_put_back", put_back)
        assert noted == [signal.SIGTERM] and _handlers() == rtlabs
        # a step inside that caught the first stop and went on: the stop is not lost with it
        noted.clear()
        with pytest.raises(KeyboardInterrupt), children.first_stop_holds_the_rest(noted):
            with contextlib.suppress(KeyboardInterrupt):
                signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGTERM)  # noted: the first is on its way
        assert noted == [signal.SIGTERM] and _handlers() == rtlabs
        # an error and no stop
        with pytest.raises(ZeroDivisionError), children.first_stop_holds_the_rest(noted):
            _ = 1 / 0
        assert _handlers() == rtlabs

        # the third Ctrl-C: ON_STOP raises, and the answer to the first stops there
        def third(_signum: int) -> None:
            if len(noted) == 2:
                raise KeyboardInterrupt

        noted.clear()
        reached = []
        with pytest.raises(KeyboardInterrupt), children.first_stop_holds_the_rest(noted, third):
            try:
                signal.raise_signal(signal.SIGINT)
            except KeyboardInterrupt:
                signal.raise_signal(signal.SIGINT)
                reached.append("second")
                signal.raise_signal(signal.SIGINT)
                reached.append("third")
        assert reached == ["second"] and len(noted) == 2 and _handlers() == rtlabs
