"""make test's measuring part hands its groups to its two workers heaviest first.

pytest-xdist's --dist loadgroup gives a worker its next group as it nears the end of the last
one; by its own order (--loadscope-reorder, the groups with the most tests first) the few long
tests of test_study and test_causes started last while the other worker had nothing left. With
--no-loadscope-reorder it takes them in the order the workers collected them, and `order` sorts
that by the seconds each group took in a whole run (DURATIONS): the groups that start last are
then short ones. A group not in DURATIONS counts as NEW_GROUP_S. The seconds change only the
order, never what runs.

Each whole run writes its groups' seconds to $RTLAB_TEST_TIMES (the Makefile's measuring part
asks for them), and beside it (WORKERS) each worker's groups with the seconds each began and
ended and pytest's own moments around them; `make test-durations` keeps the first as DURATIONS.

On a machine of two CPUs what bounds a whole run is the CPU its tests spend, not their wall
time (a test waiting beside a guest takes little): each test's CPU-seconds (set-up, test and
teardown: the pytest process that ran it and the children it reaped, a guest's QEMU among
them) are summed where the session is led, shown with --durations as its heaviest, and given
by file in WORKERS (the boards' group's files apart). A child counts where it is reaped: a
module's guest in the test whose teardown stops it, its whole life there.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest

DURATIONS = Path(os.environ.get("RTLAB_TEST_DURATIONS") or Path(__file__).with_name("durations.json"))
NEW_GROUP_S = 60
WORKERS = "test-workers.json"


def group(item: pytest.Item) -> str:
    marker = item.get_closest_marker("xdist_group")
    return str(marker.args[0]) if marker is not None else item.nodeid.partition("::")[0]


def order(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Heaviest group first, in a worker (each sorts alike: xdist checks they collected the
    same); a group's own tests keep their order (the sort is stable)."""
    if hasattr(config, "workerinput"):
        seconds = json.loads(DURATIONS.read_text())
        items.sort(key=lambda item: -seconds.get(group(item), NEW_GROUP_S))


_spent: dict[str, float] = {}
# pytest's moments in epoch seconds, where the session is led: from conftest.py's loading on
_moments: dict[str, float] = {"conftest loaded": time.time()}
_workers: list[Path] = []  # where WORKERS goes, once the session has finished
# each worker's groups in the order it ran them: (group, first start, last stop) in epoch seconds
_ran: dict[str, list[tuple[str, float, float]]] = {}
# each test's CPU-seconds, in the process that ran it until its session ends, then where it is led
_cpu: dict[str, float] = {}


def cpu_seconds() -> float:
    """This process's CPU-seconds and its reaped children's (a child's own reaped children's
    too: the kernel adds them up as each is waited for; a child still running counts nothing)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


_cpu_mark = [cpu_seconds()]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each group's seconds (set-up, test and teardown, reruns too), added up where the session
    is led: workers' reports reach it, their node IDs ending in @GROUP under --dist loadgroup.
    Where the test ran (a report with no worker), the CPU its phase spent."""
    node = getattr(report, "node", None)  # pytest-xdist's worker, on the session's side
    if node is None:  # the report of a phase that has just ended here
        now = cpu_seconds()
        _cpu[report.nodeid] = _cpu.get(report.nodeid, 0.0) + now - _cpu_mark[0]
        _cpu_mark[0] = now
    _, at, name = report.nodeid.rpartition("@")
    if not at or "]" in name or "::" in name:  # no group, or an @ inside a test's parameters
        name = report.nodeid.partition("::")[0]
    _spent[name] = _spent.get(name, 0.0) + report.duration
    if not report.start:  # a crashed worker's report (pytest-xdist gives it no times)
        return
    rows = _ran.setdefault(str(node.gateway.id) if node is not None else "main", [])
    if rows and rows[-1][0] == name:
        rows[-1] = (name, rows[-1][1], report.stop)
    else:
        rows.append((name, report.start, report.stop))


def pytest_sessionstart(session: pytest.Session) -> None:
    _moments["session start"] = time.time()


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """The CPU mark set as the tests begin: collection's own (about 10 CPU-seconds a process
    for the whole suite) is no test's."""
    _cpu_mark[0] = cpu_seconds()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    """A pytest-xdist worker's tests' CPU-seconds, which it gave at its session's end."""
    _cpu.update(getattr(node, "workeroutput", {}).get("cpu", {}))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The groups' seconds to $RTLAB_TEST_TIMES, heaviest first, when every test ran (passed
    or failed; not after an interrupt). A worker gives its tests' CPU-seconds to the session."""
    if hasattr(session.config, "workerinput"):
        session.config.workeroutput["cpu"] = _cpu  # type: ignore[attr-defined]
    where = os.environ.get("RTLAB_TEST_TIMES")
    ran = exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    if where and ran and not hasattr(session.config, "workerinput") and _spent:
        ranked = dict(sorted(((g, round(s)) for g, s in _spent.items()), key=lambda gs: -gs[1]))
        Path(where).parent.mkdir(parents=True, exist_ok=True)
        Path(where).write_text(json.dumps(ranked, indent=1) + "\n")
        _moments["session finish"] = time.time()
        _workers.append(Path(where).with_name(WORKERS))


@pytest.hookimpl(tryfirst=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """With --durations N, the N tests that spent the most CPU, beside pytest's slowest N."""
    _moments["terminal summary"] = time.time()
    shown = config.option.durations
    if shown is None or not _cpu:
        return
    heaviest = sorted(_cpu.items(), key=lambda nc: -nc[1])[: shown or None]  # 0: every test, as pytest
    terminalreporter.write_sep(
        "=", f"heaviest {len(heaviest)} in CPU-seconds ({sum(_cpu.values()):.0f} in all)"
    )
    for nodeid, cpu in heaviest:
        terminalreporter.write_line(f"{cpu:.2f}s cpu  {nodeid}")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Beside TIMES (WORKERS): when each worker ran each group, in seconds from the first
    test's start, what a worker waited for at the end shows there; and pytest's own moments
    around them (its start-up and the workers' collection before the first test, their shutdown
    after the last)."""
    if not _workers:
        return
    t0 = min(rows[0][1] for rows in _ran.values())
    workers = {
        worker: [f"{start - t0:7.0f} {stop - t0:7.0f}  {group}" for group, start, stop in rows]
        for worker, rows in sorted(_ran.items())
    }
    _moments["unconfigure"] = time.time()
    workers["pytest"] = [f"{at - t0:7.0f}  {what}" for what, at in _moments.items()]  # in their order
    cpu: dict[str, float] = {}
    for nodeid, seconds in _cpu.items():
        file = nodeid.partition("::")[0]
        cpu[file] = cpu.get(file, 0.0) + seconds
    workers["cpu-seconds"] = [f"{s:7.0f}  {g}" for g, s in sorted(cpu.items(), key=lambda gs: -gs[1])]
    _workers[0].write_text(json.dumps(workers, indent=1) + "\n")
