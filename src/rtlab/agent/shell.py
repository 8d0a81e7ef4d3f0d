"""Values into the shell scripts rtlab writes (a LAVA job's steps, the agent's own defaults):
each through `quote`, the one quoting function, so a folder, a name or an option holding a
space, a quote or `$(...)` stays one word and nothing in it is run."""

from __future__ import annotations

import shlex
from collections.abc import Iterable


def quote(value: object) -> str:
    """VALUE as one word of a POSIX shell (dash, busybox sh): in single quotes unless it is
    made of characters no shell treats specially; nothing inside is expanded."""
    return shlex.quote(str(value))


def words(values: Iterable[object]) -> str:
    """VALUES as that many words, each quoted."""
    return " ".join(quote(v) for v in values)


# A process named for good by its PID and its start time (field 22 of /proc/PID/stat, in clock
# ticks since boot), as the agent names its own (proc_start in parts/20-lock.sh): a PID
# reused since that process ended, or since the board rebooted, names another one.
START_OF = "start_of() { sed -n 's/.*) //p' \"/proc/$1/stat\" 2>/dev/null | cut -d' ' -f20; }"
