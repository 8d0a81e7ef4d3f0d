"""What the user sees while a run goes: a bar per load with the time left."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import Progress, ProgressColumn, Task, TextColumn
from rich.progress_bar import ProgressBar
from rich.text import Text

from rtlab.plan import Plan
from rtlab.rundir.events import HOST_SAID, Event, Kind


def _elapsed(task: Task) -> float:
    # The clock is read at redraw time: nothing has to wake up to advance the bar.
    since: float | None = task.fields.get("since")
    if task.fields.get("outcome") or since is None:
        return float(task.completed)
    return min(time.monotonic() - since, float(task.total or 0))


class _Bar(ProgressColumn):
    def render(self, task: Task) -> ProgressBar:
        return ProgressBar(total=task.total, completed=_elapsed(task), width=40)


class _TimeLeft(ProgressColumn):
    def render(self, task: Task) -> Text:
        if task.fields.get("outcome"):
            return Text(task.fields["outcome"])
        if task.fields.get("since") is None:
            return Text("settling")
        return Text(f"{int((task.total or 0) - _elapsed(task))} s left")


class RunProgress:
    """Turns the agent's events into progress; plain lines when not on a terminal."""

    # The host must sleep while the agent measures: redraw once a second, no faster.
    REFRESH_PER_SECOND = 1

    def __init__(self, plan: Plan, console: Console):
        self.plan = plan
        self.console = console
        self.live = console.is_terminal
        self.progress = Progress(
            TextColumn("{task.description:>14}"),
            _Bar(),
            _TimeLeft(),
            console=console,
            refresh_per_second=self.REFRESH_PER_SECOND,
        )
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> RunProgress:
        if self.live:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self.progress.stop()

    def say(self, text: str) -> None:
        if not self.live:
            self.console.print(text, highlight=False)

    def __call__(self, event: Event) -> None:
        load = event.get("load")
        if event.kind == Kind.GOVERNOR:
            self.say(f"governor: {event.get('status')}")
        elif event.kind == Kind.LOAD_START:
            label = f"{load} {len(self.tasks) + 1}/{len(self.plan.loads)}"
            self.tasks[load] = self.progress.add_task(label, total=self.plan.duration_s, since=None)
            self.say(f"{label}: settling {self.plan.settle_s} s, then measuring {self.plan.duration_s} s")
        elif event.kind == Kind.MEASURE_START and load in self.tasks:
            self.progress.update(self.tasks[load], since=time.monotonic())
        elif event.kind == Kind.TRACE_START:  # seconds of silence otherwise, between measured and ended
            threshold = event.number("threshold_us")
            above = f" above {threshold / 1000:g} ms" if threshold is not None else ""
            self.say(
                f"{load}: tracing spikes{above} for {event.get('seconds')} s (level {event.get('level')})"
            )
        elif event.kind == Kind.TRACE_END:
            self.say(f"{load}: {event.get('spikes') or 0} spike(s) traced")
        elif event.kind == Kind.LOAD_END and load in self.tasks:
            # the agent's "complete" is not yet rtlab's: its results are checked once home
            status = "measured" if event.get("status") == "complete" else event.get("status")
            task = next(t for t in self.progress.tasks if t.id == self.tasks[load])
            self.progress.update(task.id, completed=_elapsed(task), outcome=status)
            self.say(f"{load}: {status}")
        elif event.kind in HOST_SAID:
            detail = event.get("reason") or f"no end after {event.get('seconds')} s"
            if event.get("answered") == "no":
                detail += ", and it no longer answered"
            self.console.print(f"{event.kind}: {detail}", highlight=False)
