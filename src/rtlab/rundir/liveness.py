"""Whether the rtlab process that carries out a run is still there.

run.json says `running` until the host process writes how the run ended; a host killed
with SIGKILL (or a machine that lost power) never does. run.json therefore names that
process by PID, start time and boot, which no other process can share, so a report can
tell a run still measuring from one whose host is gone.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _start_ticks(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def scratch(base: Path) -> Path:
    """A new folder of this process's own under BASE, named by its PID and start time; the
    folders there of processes that are gone (killed before they could remove theirs) are
    removed first. For what a host writes only for itself (a guest's initramfs)."""
    import shutil
    import tempfile

    base.mkdir(parents=True, exist_ok=True)
    for old in base.iterdir():
        pid, _, rest = old.name.partition("-")
        start = rest.partition("-")[0]
        if pid.isdigit() and start.isdigit() and _start_ticks(int(pid)) != start:
            shutil.rmtree(old, ignore_errors=True)
    me = os.getpid()
    return Path(tempfile.mkdtemp(prefix=f"{me}-{_start_ticks(me) or 'x'}-", dir=base))


def this_process() -> dict[str, Any]:
    """What run.json records about the host process."""
    pid = os.getpid()
    return {"pid": pid, "start": _start_ticks(pid), "boot_id": _boot_id(), "host": platform.node()}


def host_alive(record: Mapping[str, Any]) -> bool | None:
    """True or False for a process of this machine; None when it ran on another machine."""
    if record.get("host") != platform.node() or record.get("boot_id") != _boot_id():
        return None if record.get("host") != platform.node() else False
    pid = record.get("pid")
    return isinstance(pid, int) and record.get("start") is not None and _start_ticks(pid) == record["start"]


def measuring(manifest: Mapping[str, Any]) -> bool:
    """Whether the run is still being carried out by a live rtlab on this machine."""
    return manifest.get("status") == "running" and host_alive(manifest.get("host_process") or {}) is True


def abandoned(manifest: Mapping[str, Any], path: Path | None = None) -> str | None:
    """One line for a run left `running` by a host process that is gone; None otherwise."""
    if manifest.get("status") != "running":
        return None
    record = manifest.get("host_process") or {}
    alive = host_alive(record)
    if alive:
        return "still measuring: this report covers the loads done so far"
    if alive is None and record:
        return f"measured from {record.get('host')}: whether it still runs cannot be told here"
    if (manifest.get("target") or {}).get("kind") in ("ssh", "labgrid"):
        run = path if path is not None else Path(str(manifest.get("id") or "RUN"))
        return f"the host process ended without finishing this run: rtlab collect {run}"
    return "the host process ended without finishing this run: the loads shown are what it measured"
