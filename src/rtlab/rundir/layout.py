"""The run folder's table: every file and folder a run holds, written once with its shape,
who writes it and what it means. disk.py and the readers of a run take their names from
here, and the agent's names are generated from it (rtlab.agent.names: `F_<NAME>` shell
variables, one per row the agent spells), so host and agent cannot spell a file two ways.
docs/run-folder.md's "The run directory" section is checked against this table (tests/test_agent.py).

Adding a file to the run folder: one `_row(...)` here (its name, shape, writer, folders,
meaning; `agent=True` when the agent spells it), then its use on both sides: the host reads
or writes `layout.NAME`, the agent `$F_NAME`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Shape(StrEnum):
    JSON = "json"  # one JSON document
    EVENTS = "events"  # `@rtlab KIND key=value` lines (rundir/events.py)
    LINES = "lines"  # one name or value a line
    ARGV = "argv"  # a command, one argument a line, program first (or options only: cyclictest's)
    TEXT = "text"  # a tool's output or log, kept as it printed it
    PID = "pid"  # a process (group) id, while it runs (the agent's: and its start time)
    MARK = "mark"  # an empty file whose presence says something
    FOLDER = "folder"
    SUFFIX = "suffix"  # added to a name: a file being written, not yet renamed into place


class Writer(StrEnum):
    HOST = "host"  # rtlab on the host (the plan, its own notes); the agent only reads it
    AGENT = "agent"  # the agent, or a tool it runs, on the target


# The folders a row lives in, as docs/run-folder.md's run-directory section spells them.
RUN, LOAD, SEGMENT, TRACE, CAPTURE, PROBE, HWLAT = (
    "", "loads/<load>/", "loads/<load>/segments/<n>/", "loads/<load>/trace/", "loads/<load>/trace/<n>/",
    "loads/<load>/<probe>/", "hwlat/",
)  # fmt: skip


@dataclass(frozen=True)
class Row:
    name: str
    shape: Shape
    writer: Writer
    where: tuple[str, ...]  # the folders it is found in (RUN, LOAD, ...)
    about: str
    agent: bool  # the agent spells it: it gets a generated shell variable
    variable: str  # the agent's shell variable, F_<NAME>

    @property
    def folder(self) -> bool:
        return self.shape is Shape.FOLDER


TABLE: list[Row] = []


def _row(name: str, shape: Shape, writer: Writer, where: tuple[str, ...], about: str,
         agent: bool = False, variable: str = "") -> str:  # fmt: skip
    """A row of the table; returns its name, for the module's constant."""
    variable = variable or "F_" + re.sub(r"\W", "_", name.strip(".")).upper()
    TABLE.append(Row(name, shape, writer, where, about, agent, variable))
    return name


S, H, A = Shape, Writer.HOST, Writer.AGENT
# fmt: off
# -- the run's own folder
MANIFEST = _row("run.json", S.JSON, H, (RUN,), "manifest: schema, plan, target, times, status per load")
SYSINFO = _row("sysinfo.json", S.JSON, H, (RUN,), "what the agent found on the target (agent.sh sysinfo)")
EVENTS = _row("events", S.EVENTS, A, (RUN,), "the agent's progress lines, each with the target's uptime",
              agent=True)
SUMMARY = _row("summary.json", S.JSON, H, (RUN,), "the statistics, derived from the raw files")
TUNING = _row("tuning.json", S.JSON, H, (RUN,), "--tune: what was changed and put back")
CONSOLE = _row("console.log", S.TEXT, H, (RUN,), "a QEMU guest's whole console")
COLLECT_ERROR = _row("collect-error.txt", S.TEXT, H, (RUN,), "why the results could not (all) come home")
DEADLINE = _row("deadline.json", S.JSON, H, (RUN,), "--deadline history: each load's limit, its source")
PLAN_LOADS = _row("plan.loads", S.LINES, H, (RUN,), "the loads' names, in order", agent=True)
PLAN_PROBES = _row("plan.probes", S.LINES, H, (RUN,), "--probe: the other probes, in order", agent=True)
LOADS = _row("loads", S.FOLDER, H, (RUN,), "a folder per load", agent=True)
HWLAT_FOLDER = _row("hwlat", S.FOLDER, H, (RUN,), "--hwlat-gate: the hwlat pass before measuring")
# -- a board's run, a board farm's (rtlab lava job, then lava import)
AGENT_OUT = _row("agent.out", S.TEXT, H, (RUN,), "what a detached agent printed (a board's, a LAVA job's)")
SYSINFO_LOG = _row("sysinfo.log", S.TEXT, H, (RUN,), "a LAVA job's: agent.sh sysinfo's standard error")
LAVA_RESULTS = _row("lava-results.json", S.JSON, H, (RUN,), "lava import: the job's results, as LAVA said")
LAVA_IMPORT = _row("lava-import.json", S.JSON, H, (RUN,), "lava import: bundle uid, console lines skipped")
AGENT_PID = _row("agent.pid", S.PID, A, (RUN,), "the agent (PID, start time), for agent.sh stop", agent=True)
GOVERNORS_SAVED = _row("governors.saved", S.TEXT, A, (RUN,), "the governors to put back, while changed",
                       agent=True)
TRACEFS_SAVED = _row("tracefs.saved", S.TEXT, A, (RUN,), "tracefs to put back, while changed", agent=True)
# -- a load's folder: the plan (the host's), then what the agent and its tools write
CYCLICTEST_ARGV = _row("cyclictest.argv", S.ARGV, H, (LOAD, SEGMENT, CAPTURE),
                       "cyclictest's options (a segment's and a capture's: the agent's)", agent=True)
LOAD_ARGV = _row("load.argv", S.ARGV, H, (LOAD,), "the load's command (stress-ng or any)", agent=True)
LOAD_CHECK = _row("load.check", S.TEXT, H, (LOAD,), "how the load is checked: alive, or oom-kill", agent=True)
LOAD_PREPARE_ARGV = _row("load.prepare.argv", S.ARGV, H, (LOAD,),
                         "the load's preparation, run to its end before it starts, unmeasured", agent=True)
TRACE_ARGV = _row("trace.argv", S.ARGV, H, (LOAD,), "--trace: the trace pass's cyclictest", agent=True)
RTLA_ARGV = _row("rtla.argv", S.ARGV, H, (LOAD, CAPTURE), "--trace level a: rtla's command", agent=True)
CYCLICTEST_JSON = _row("cyclictest.json", S.JSON, A, (LOAD, SEGMENT, CAPTURE),
                       "exactly as cyclictest wrote it (only when it exited 0)", agent=True)
CYCLICTEST_OUT = _row("cyclictest.out", S.TEXT, A, (LOAD, SEGMENT, CAPTURE),
                      "its standard output: block maxima and spikes (the time axis)", agent=True)
CYCLICTEST_LOG = _row("cyclictest.log", S.TEXT, A, (LOAD, SEGMENT, CAPTURE),
                      "its standard error and exit status", agent=True)
CYCLICTEST_PID = _row("cyclictest.pid", S.PID, A, (LOAD, SEGMENT, CAPTURE), "cyclictest's process group",
                      agent=True)
LOAD_LOG = _row("load.log", S.TEXT, A, (LOAD,), "the load's output, then its exit status and OOM kills",
                agent=True)
LOAD_PID = _row("load.pid", S.PID, A, (LOAD,), "the load's process group", agent=True)
LOAD_PREPARE_PID = _row("load.prepare.pid", S.PID, A, (LOAD,), "the load's preparation", agent=True)
LOAD_MARK = _row("load.mark", S.TEXT, A, (LOAD,), "the mark (RTLAB_LOAD) the load's processes inherit",
                 agent=True)
LOAD_CGROUP = _row("load.cgroup", S.TEXT, A, (LOAD,), "the load's cgroup, where the target has one",
                   agent=True)
SCRATCH = _row("scratch", S.FOLDER, H, (LOAD,), "a load's own working folder, removed after the load",
               agent=True)
PART = _row(".part", S.SUFFIX, A, (RUN, LOAD, SEGMENT, CAPTURE, PROBE),
            "a file being written (a tool's JSON: renamed without it only when the tool exited 0)",
            agent=True)
SEGMENTS = _row("segments", S.FOLDER, A, (LOAD,), "--segment: cyclictest's files per segment <n>",
                agent=True)
SEGMENTS_COMPLETE = _row("complete", S.MARK, A, ("loads/<load>/segments/",), "every segment measured",
                         agent=True, variable="F_SEGMENTS_COMPLETE")
TRACE_FOLDER = _row("trace", S.FOLDER, A, (LOAD,), "--trace: the trace pass, a folder per capture <n>",
                    agent=True)
TRACE_EVENTS = _row("events", S.LINES, A, (TRACE,), "the trace events the pass enabled", agent=True,
                    variable="F_TRACE_EVENTS")
TRACEFS_BEFORE = _row("tracefs.before", S.TEXT, A, (TRACE, HWLAT), "tracefs as it was found", agent=True)
TRACEFS_AFTER = _row("tracefs.after", S.TEXT, A, (TRACE, HWLAT), "tracefs as it was left", agent=True)
INTERRUPTS = _row("interrupts", S.TEXT, A, (CAPTURE,), "level c: /proc/interrupts and softirqs each second",
                  agent=True)
CPU_TRACE = _row(".trace", S.SUFFIX, A, (CAPTURE,), "level b: the spiking CPU's trace, cpu<N>.trace[.gz]",
                 agent=True, variable="F_CPU_TRACE")
RTLA_OUT = _row("rtla.out", S.TEXT, A, (CAPTURE,), "level a: rtla's output (its auto-analysis)", agent=True)
RTLA_PID = _row("rtla.pid", S.PID, A, (CAPTURE,), "level a: rtla's process group", agent=True)
PROBE_ARGV = _row("probe.argv", S.ARGV, H, (PROBE,), "--probe: the probe's command", agent=True)
PROBE_OUT = _row("probe.out", S.TEXT, A, (PROBE,), "the probe's standard output (rtla's result)", agent=True)
PROBE_LOG = _row("probe.log", S.TEXT, A, (PROBE,), "the probe's standard error, then its exit status",
                 agent=True)
PROBE_JSON = _row("probe.json", S.JSON, A, (PROBE,), "the probe's JSON (rt-tests tools)", agent=True)
PROBE_PID = _row("probe.pid", S.PID, A, (PROBE,), "the probe's process group", agent=True)
HWLAT_TRACE = _row("hwlat.trace", S.TEXT, A, (HWLAT,), "the hwlat tracer's trace", agent=True)
HWLAT_JSON = _row("hwlat.json", S.JSON, H, (HWLAT,), "the gaps the hwlat tracer found, and tracefs's changes")
# fmt: on
del S, H, A

# Names of runs written by older rtlab, still read (the load's files were stress-ng's alone).
OLD_NAMES = {LOAD_LOG: "stress.log", LOAD_ARGV: "stress.argv"}

# What only the host writes in a run: a board's copy of a run folder never replaces them.
HOST_FILES = (MANIFEST, SUMMARY, COLLECT_ERROR, CONSOLE, PLAN_LOADS, DEADLINE)
# The plan's files, which the agent reads.
PLAN_FILES = tuple(r.name for r in TABLE if r.writer is Writer.HOST and r.agent and not r.folder)


def agent_rows() -> list[Row]:
    """The rows the agent spells, each given to it as its shell variable (rtlab.agent.names)."""
    return [r for r in TABLE if r.agent]
