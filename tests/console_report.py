"""A failed test's report carries the last lines of its guests' consoles (a fixture value with
a `console_tail()`): a board that went silent mid-run says why there (a panic, an RCU stall),
not in a console the fixture's end throws away. tests/conftest.py takes the hook;
tests/test_input.py runs it in a pytest of its own."""

from __future__ import annotations

from typing import Any

import pytest

from rtlab.boundary import untrusted

CONSOLE_LINES = 60


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
