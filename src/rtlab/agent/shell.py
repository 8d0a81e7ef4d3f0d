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
