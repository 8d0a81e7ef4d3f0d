"""An always-on monitor (rtlab monitor): one load measured block after block for as long as it
runs, each block an ordinary run in OUT/block-NNNNNN, added to the history as it ends and
judged there, as OSADL's farm records a board's 5-minute maxima for as long as it stays up.

Per block, in this order:
1. the limit in force: derived from the board's history *before* the block is added (the
   block is held out from what judges it); none while the history is too short (said);
2. the block measured (a run of the plan, the load for the block's length);
3. its max against that limit, then the block added to the history and the gate asked
   (a confirmed regression standing since the baseline, history/changes.py: a change point
   with runs on both sides, not one block against the ones before it);
4. an alert when the block exceeds the limit or the gate closes: a line, the --on-alert
   command (the block, its folder and the reason in its environment), and exit code 1 at
   the end.

monitor.json keeps every block's entry and every gap; a monitor stopped (a signal, the host
restarting, a connection lost) is resumed by the same command, which says how long the gap
was. A block cut off by a hard kill stays where it is, as its run.json left it.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

from rtlab import children
from rtlab.errors import Stopped, UsageError
from rtlab.rundir.disk import MANIFEST, read_index, write_json

SCHEMA = "rtlab.monitor/1"
FILE = "monitor.json"
HOOK_TIMEOUT_S = 60
SAME = ("target", "load", "block_s")  # what a resumed monitor must keep


class Block(TypedDict):
    """A block's entry in monitor.json. A block cut off by a hard kill has only its number,
    status ("cut off"), folder and alert (None)."""

    n: int
    folder: str
    started: NotRequired[str]
    ended: NotRequired[str]
    status: str  # the run's, or "cut off"
    max_us: NotRequired[int | None]
    limit_us: NotRequired[int | None]  # the limit in force before it (None: none yet)
    limit: NotRequired[str]  # where that limit came from, or why there was none
    gate: NotRequired[str | None]  # the confirmed regressions standing once it was added
    alert: str | None
    added: NotRequired[bool]  # in the history (a stop in between leaves it to the next start)


class Gap(TypedDict):
    """A time nothing was measured: the monitor stopped after block AFTER, resumed later."""

    after: int
    seconds: float
    resumed: str


class MonitorIndex(TypedDict):
    """OUT/monitor.json: what is monitored (SAME), every block and every gap, and the board
    as the history names it (once a block is in the history)."""

    schema: str
    target: str
    load: str
    block_s: int
    blocks: list[Block]
    gaps: list[Gap]
    board: NotRequired[str]


def folder(n: int) -> str:
    return f"block-{n:06d}"


@dataclass(frozen=True)
class Monitor:
    out: Path
    target: str
    load: str
    block_s: int
    blocks: int | None  # stop after this many (this invocation's and earlier ones'); None: until stopped
    hook: str | None
    # the parts with I/O, given by the command: a block measured (its status, max, whether a
    # signal came), the limit before it, the block added and the gate asked
    measure: Callable[[int, Path], tuple[str, int | None, bool]]
    limit: Callable[[], tuple[int | None, str]]
    remember: Callable[[Path], str | None]
    say: Callable[[str], None]


def _now() -> datetime:
    return datetime.now(UTC)


def open_index(m: Monitor) -> MonitorIndex:
    """monitor.json as it stands (or a new one); a gap said and kept when resuming."""
    path = m.out / FILE
    mine: dict[str, object] = {"target": m.target, "load": m.load, "block_s": m.block_s}
    if not path.is_file():
        if m.out.exists() and any(m.out.iterdir()):
            raise UsageError(f"--out {m.out} is not empty and holds no monitor: give a new folder")
        m.out.mkdir(parents=True, exist_ok=True)
        new: MonitorIndex = {"schema": SCHEMA, "target": m.target, "load": m.load, "block_s": m.block_s,
                             "blocks": [], "gaps": []}  # fmt: skip
        write_json(path, new)
        return new
    found = read_index(path)
    if found.get("schema") != SCHEMA or not _whole(found):
        raise UsageError(f"{path} is not an rtlab monitor's index, or a damaged one: give another --out")
    for key in SAME:
        if found.get(key) != mine[key]:
            raise UsageError(
                f"{m.out} monitors {key} {found.get(key)!r}, not {mine[key]!r}: "
                "give the same options, or another --out"
            )
    index = cast(MonitorIndex, found)  # what resuming reads checked by _whole, SAME by the loop above
    last = index["blocks"][-1] if index["blocks"] else None
    if last is not None and last["status"] == "complete" and not last.get("added"):
        # stopped between measuring it and the history: adding again is a no-op if it got there
        last["gate"], last["added"] = m.remember(m.out / folder(last["n"])), True
    n = last["n"] if last else 0
    # a block cut off by a hard kill has a folder and no entry: kept, said, not measured again
    while (m.out / folder(n + 1) / MANIFEST).is_file():
        n += 1
        index["blocks"].append({"n": n, "status": "cut off", "folder": folder(n), "alert": None})
        m.say(f"block {n} was cut off (its run.json says how far it got): kept in {m.out / folder(n)}")
    ended = next((b.get("ended") for b in reversed(index["blocks"]) if b.get("ended")), None)
    if ended is not None:
        gap = (_now() - datetime.fromisoformat(ended)).total_seconds()
        index["gaps"].append({"after": n, "seconds": round(gap, 1), "resumed": _now().isoformat()})
        m.say(f"resuming after block {n}: a gap of {gap:.0f} s since it ended (nothing was measured then)")
    write_json(path, index)
    return index


def _whole(index: Mapping[str, object]) -> bool:
    """Whether monitor.json holds what resuming reads: blocks numbered 1, 2, ... with a status,
    dates that parse, a list of gaps (a folder's name is always made from the number)."""
    blocks, gaps = index.get("blocks"), index.get("gaps")
    if not isinstance(blocks, list) or not isinstance(gaps, list):
        return False
    for k, b in enumerate(blocks, start=1):
        if not isinstance(b, dict) or b.get("n") != k or not isinstance(b.get("status"), str):
            return False
        try:
            if b.get("ended") is not None:
                datetime.fromisoformat(str(b["ended"]))
        except ValueError:
            return False
    return True


def run(m: Monitor, index: MonitorIndex) -> int:
    """Blocks until m.blocks are measured or a signal (INDEX: open_index's, kept up to date);
    the alerts of this invocation. SIGTERM and SIGHUP between two blocks (while one is judged)
    stop it as Ctrl-C does; within a block the run's own handling stops the block first."""
    previous = {s: signal.signal(s, _interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        return _blocks(m, index)
    except KeyboardInterrupt:
        write_json(m.out / FILE, index)
        raise Stopped(f"the monitor stopped between two blocks; {len(index['blocks'])} block(s) kept in "
                      f"{m.out}: run the same command again to go on") from None  # fmt: skip
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _blocks(m: Monitor, index: MonitorIndex) -> int:
    path = m.out / FILE
    alerts = 0
    n = index["blocks"][-1]["n"] if index["blocks"] else 0
    while m.blocks is None or n < m.blocks:
        n += 1
        where = m.out / folder(n)
        limit_us, note = m.limit()
        started = _now().isoformat()
        status, max_us, interrupted = m.measure(n, where)
        entry: Block = {"n": n, "folder": folder(n), "started": started, "ended": _now().isoformat(),
                        "status": status, "max_us": max_us, "limit_us": limit_us, "limit": note,
                        "gate": None, "alert": None, "added": False}  # fmt: skip
        index["blocks"].append(entry)
        write_json(path, index)  # before the history: a stop in between leaves it to be added
        if status == "complete":
            entry["gate"], entry["added"] = m.remember(where), True
            reasons = []
            if limit_us is not None and max_us is not None and max_us > limit_us:
                reasons.append(f"max {max_us} µs exceeds the limit {limit_us} µs ({note})")
            if entry["gate"]:
                reasons.append(f"the gate is closed: {entry['gate']}")
            if reasons:
                entry["alert"] = "; ".join(reasons)
                alerts += 1
        write_json(path, index)
        m.say(_line(entry))
        if entry["alert"]:
            _hook(m, entry, where)
        if interrupted:
            raise Stopped(f"the monitor stopped in block {n} ({status}); {len(index['blocks'])} block(s) "
                          f"kept in {m.out}: run the same command again to go on")  # fmt: skip
    return alerts


def _line(entry: Block) -> str:
    worst = f"max {entry['max_us']} µs" if entry["max_us"] is not None else "no max"
    limit = f", limit {entry['limit_us']} µs" if entry["limit_us"] is not None else f" ({entry['limit']})"
    head = f"block {entry['n']}: {entry['status']}, {worst}{limit}"
    return f"ALERT {head}: {entry['alert']}" if entry["alert"] else head


def _hook(m: Monitor, entry: Block, where: Path) -> None:
    """--on-alert: the user's command, through the shell, the alert in its environment; one
    that fails or hangs is a warning, never the end of the monitor."""
    if not m.hook:
        return
    env = {**os.environ, "RTLAB_ALERT_BLOCK": str(entry["n"]), "RTLAB_ALERT_RUN": str(where),
           "RTLAB_ALERT_REASON": entry["alert"], "RTLAB_ALERT_LOAD": m.load}  # fmt: skip
    try:
        done = children.run(["/bin/sh", "-c", m.hook], env=env, timeout=HOOK_TIMEOUT_S, capture_output=True)
    except subprocess.TimeoutExpired:
        m.say(f"warning: --on-alert took more than {HOOK_TIMEOUT_S} s: stopped")
        return
    if done.returncode != 0:
        m.say(f"warning: --on-alert exited {done.returncode}")
