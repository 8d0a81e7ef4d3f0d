"""The agent's part that names the run folder's files and the event kinds, generated from the
tables that own them (rtlab.rundir.layout, rtlab.rundir.events) as its options are from
contract.py: `F_<NAME>` for each name the agent spells in a run folder, `E_<KIND>` for each
event kind it writes, `M_<MARK>` for the lines it closes a tool's log with, and its two
writers of those lines (`emit`: an event, on stdout and in the events file; `say`: on stdout
only). No part of the agent spells a name or a kind by hand (tests/test_agent.py)."""

from __future__ import annotations

import re

from rtlab.agent.shell import quote


def _variable(prefix: str, word: str) -> str:
    return prefix + re.sub(r"\W", "_", word).upper()


def _quoted(value: str) -> str:
    """VALUE in single quotes, always: shellcheck takes a bare load-end for arithmetic and done
    for a keyword."""
    said = quote(value)
    return said if said.startswith("'") else f"'{value}'"


def variables() -> dict[str, str]:
    """Every generated variable and its value: the files', the kinds', the marks'."""
    from rtlab.rundir import events, layout

    found = {row.variable: row.name for row in layout.agent_rows()}
    found |= {f"E_{kind.name}": kind.value for kind in events.Kind if kind not in events.HOST_SAID}
    found |= {_variable("M_", mark): mark for mark in events.LOG_MARKS}
    return found


def part() -> str:
    from rtlab.rundir import events

    lines = ["# --- the run folder's names and the event kinds, generated from rtlab.rundir.layout",
             "# and rtlab.rundir.events (rtlab.agent.names) ----------------------------", ""]  # fmt: skip
    lines += [f"{name}={_quoted(value)}" for name, value in variables().items()]
    lines += [
        f"EVENT_MARK={quote(events.PREFIX.strip())}",
        "",
        "# say KIND [FIELD=VALUE...]: a line for the host, on stdout only (preflight, scan, hwlat).",
        "say() {",
        "\tif [ $# -gt 1 ]; then",
        "\t\tkind=$1",
        "\t\tshift",
        '\t\tprintf \'%s %s %s\\n\' "$EVENT_MARK" "$kind" "$*"',
        "\telse",
        '\t\tprintf \'%s %s\\n\' "$EVENT_MARK" "$1"',
        "\tfi",
        "}",
        "",
        "# emit KIND [FIELD=VALUE...]: an event of the run, on stdout and in its events file. Every",
        "# event carries t=, seconds since boot (/proc/uptime, which busybox boards have too): the",
        "# clock the host places phases and cyclictest's spikes on (CLOCK_MONOTONIC, the same",
        "# clock unless the system was suspended while measuring).",
        "emit() {",
        "\tkind=$1",
        "\tshift",
        "\tread -r up _ </proc/uptime 2>/dev/null || up=",
        '\tprintf \'%s %s t=%s %s\\n\' "$EVENT_MARK" "$kind" "$up" "$*"',
        '\tif [ -n "$EVENTS" ]; then',
        '\t\tprintf \'%s %s t=%s %s\\n\' "$EVENT_MARK" "$kind" "$up" "$*" >>"$EVENTS"',
        "\tfi",
        "}",
        "",
    ]
    return "\n".join(lines) + "\n"
