"""A guest's run folder on its way home: the loads come as each ends (the agent's
--stream-results), the rest at the run's end, in one archive over the console."""

from __future__ import annotations

import shlex

from rtlab.rundir import disk


def folder_but(remote: str, loads: list[str]) -> str:
    """A shell command that writes the run folder REMOTE as a tar to stdout, without the
    folders of LOADS, which came home as each ended: the UART carries each load once (the
    whole folder again cost a 2-load run of 2 s about a second more under emulation). Busybox's
    tar has no --exclude, so the folder's entries are listed instead."""
    skipped = "|".join(shlex.quote(f"{disk.LOADS}/{load}") for load in loads) or "''"
    return (
        f"cd {shlex.quote(remote)} && {{ set --; "
        f"for f in * .[!.]* ..?* {disk.LOADS}/* {disk.LOADS}/.[!.]*; do "
        f'case $f in {disk.LOADS}|{skipped}) ;; *) [ -e "$f" ] && set -- "$@" "$f" ;; esac; '
        'done; tar -cf - "$@"; }'
    )
