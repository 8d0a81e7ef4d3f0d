"""A failed test's report carries the last lines of its guests' consoles (a fixture value with
a `console_tail()`): a board that went silent mid-run says why there (a panic, an RCU stall),
not in a console the fixture's end throws away. tests/conftest.py takes the hooks;
tests/test_input.py runs them in a pytest of its own.

Each failure is also said in one line, in the file RTLAB_TEST_FAILURES names, which `make test`
prints after its last part: a log cut to its head and tail (a CI's) still says why each test
failed, not only which (the tracebacks and consoles of its middle part are hundreds of lines)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from rtlab.boundary import untrusted

CONSOLE_LINES = 60
FAILURES = "RTLAB_TEST_FAILURES"
FAILURE_CHARS = 800  # of its error's words: the assertion and the start of what it printed


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed and report.when != "teardown":  # once per test, not again for its teardown
        for name, value in getattr(item, "funcargs", {}).items():
            tail = getattr(value, "console_tail", None)
            if not callable(tail):
                continue
            try:
                text = tail(CONSOLE_LINES)
            except Exception as e:  # the test's own failure is what the report is for
                text = f"(the console could not be read: {e!r})"
            if isinstance(text, str):  # a guest's bytes reach a terminal: each line made printable
                shown = "\n".join(untrusted.printable(line) for line in text.split("\n"))
                report.sections.append((f"{name}'s console, its last {CONSOLE_LINES} lines", shown))
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """A test's final failure in a line of FAILURES: its id, its phase and the start of its
    error, made printable; a failed try that pytest-rerunfailures ran again in a line too, as
    RERUN (a planted test that passed only on its second try is still seen). Under xdist only
    the controller writes (its workers' reports reach it): one write, appended, per failure."""
    path = os.environ.get(FAILURES)
    rerun = report.outcome == "rerun"
    if not path or not (report.failed or rerun) or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    crash = getattr(report.longrepr, "reprcrash", None)
    said = getattr(crash, "message", None) or str(report.longrepr).strip().split("\n")[-1]
    said = untrusted.printable(" | ".join(line.strip() for line in said.splitlines() if line.strip()))
    where = f" ({report.when})" if report.when != "call" else ""
    line = f"{'RERUN' if rerun else 'FAILED'} {report.nodeid}{where}: {said[:FAILURE_CHARS]}\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)
