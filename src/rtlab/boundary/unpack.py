"""Archives from a target: every tar that comes home (SSH collect, a QEMU guest's console, a
LAVA job's bundle) is unpacked here and nowhere else, by rtlab's own checks, which do not
depend on the Python version (Debian 12's 3.11.2 has no tarfile extraction filters).

What a member may be: a regular file or a folder. Links of any kind, devices, FIFOs and
sparse members are refused, and so is a negative or oversized size. Names are relative and
normal (no `..`, no absolute path, no empty part), their parts made of the characters rtlab's
own file and load names use, and no deeper than a run's layout
(loads/<load>/trace/<capture>/<file>). The archive is read once, as a stream, into a fresh
folder beside the destination; only when every member passed are its files moved into place,
each with a rename that replaces a file, never writes through a link.

The caps come from the plan (`Limits.for_plan`): what its loads, CPUs, histogram range, time
axis and trace pass can make, with room to spare; an archive beyond them is refused with the
cap it broke, and nothing of it is kept.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from rtlab import bounds
from rtlab.boundary.shapes import PlanJSON
from rtlab.boundary.untrusted import LOG_BYTES, TRACE_BYTES

MIB = 1 << 20
DEPTH = 5  # loads/<load>/trace/<capture>/<file>, loads/<load>/segments/<n>/<file>
_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.,+=@-]*|\.[A-Za-z0-9_][A-Za-z0-9_.,+=@-]*")
_CHUNK = 1 << 16
# Fixed parts of the caps: a load's logs, a trace capture (as rtlab reads them) and the run's
# own top-level files.
RUN_BYTES = 16 * MIB
FILES_PER_LOAD = 64  # argv, logs, JSON, the time axis, scratch leftovers
# Without a plan to go by (a LAVA log, whose run.json is itself from the board): what a
# day-long campaign of five loads on 16 CPUs needs.
DEFAULT_CPUS = 16
DAY_S = 86400

GZIP_MAGIC = b"\x1f\x8b"


class Refused(ValueError):
    """An archive that breaks a rule: the message names the member and the rule or cap."""


@dataclass(frozen=True)
class Limits:
    file_bytes: int  # one member
    total_bytes: int  # all members together
    members: int

    @classmethod
    def for_plan(cls, given: PlanJSON | None) -> Limits:
        plan: dict[str, Any] = dict(given or {})
        cpus = _bounded(plan.get("cpu_count"), 1, 4096, DEFAULT_CPUS)
        loads = max(1, min(len(plan.get("loads") or ()) or 5, 1000))
        duration = _bounded(plan.get("duration_s"), 1, bounds.MAX_DURATION_S, DAY_S)
        block_us = _bounded(
            plan.get("block_us"), bounds.MIN_BLOCK_US, bounds.MAX_BLOCK_US, bounds.DEFAULT_BLOCK_US
        )
        histogram_us = _bounded(
            plan.get("histogram_us"),
            bounds.MIN_HISTOGRAM_US,
            bounds.MAX_HISTOGRAM_US,
            bounds.DEFAULT_HISTOGRAM_US,
        )
        spikes = _bounded(plan.get("spike_nodes"), 1, bounds.MAX_SPIKE_NODES, bounds.DEFAULT_SPIKE_NODES)
        segment = _bounded(plan.get("segment_s"), 0, duration, 0)
        segments = -(-duration // segment) if segment else 1
        traces = (
            _bounded(plan.get("trace_spikes"), 1, bounds.MAX_TRACE_SPIKES, bounds.DEFAULT_TRACE_SPIKES)
            if plan.get("trace_us")
            else 0
        )
        probes = min(len(plan.get("probes") or ()), 8)  # --probe: each a folder of its own per load
        # cyclictest's JSON: up to 20 bytes per histogram µs per thread; its printed time axis:
        # one line (~40 bytes) per block per CPU and one per listed spike
        histogram = cpus * histogram_us * 20 + MIB
        timeaxis = cpus * (duration * 1_000_000 // block_us + 2) * 40 + cpus * spikes * 48 + MIB
        per_load = segments * histogram + timeaxis + traces * (cpus + 2) * TRACE_BYTES + 2 * LOG_BYTES
        per_load += probes * (histogram + 2 * LOG_BYTES)  # a probe's histogram, its output and log
        return cls(
            file_bytes=max(LOG_BYTES, histogram, timeaxis, TRACE_BYTES),
            total_bytes=loads * per_load + RUN_BYTES,
            members=loads * (FILES_PER_LOAD + segments * 8 + traces * (cpus + 8) + probes * 8) + 64,
        )


def _bounded(value: object, low: int, high: int, default: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return max(low, min(value, high))


def unpack(
    source: bytes | IO[bytes],
    into: Path,
    limits: Limits,
    what: str,
    prefix: str = "",
    keep: Iterable[str] = (),
) -> list[str]:
    """The archive SOURCE (tar, gzipped or not) into the folder INTO, every member checked
    first; returns the relative paths written. PREFIX: only members under it, with it taken
    off. KEEP: names (relative paths) the host owns in INTO, skipped if the archive has them.
    Refused names the rule an archive broke; then nothing of it is in INTO."""
    into.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(dir=into, prefix=".unpacking-"))
    try:
        written = _extract(source, fresh, limits, what, prefix.strip("/"), set(keep))
        _move(fresh, into, written)
        return written
    finally:
        shutil.rmtree(fresh, ignore_errors=True)


def _extract(source: bytes | IO[bytes], fresh: Path, limits: Limits, what: str, prefix: str,
             keep: set[str]) -> list[str]:  # fmt: skip
    stream: IO[bytes] = io.BytesIO(source) if isinstance(source, bytes) else source
    if isinstance(source, bytes) and source[:2] == GZIP_MAGIC:
        # gzip unwrapped here: tarfile's own stream (Python 3.11) fails with an AttributeError
        # on some damaged gzip headers instead of its ReadError
        stream = cast(IO[bytes], gzip.GzipFile(fileobj=stream, mode="rb"))
    written: list[str] = []
    total = members = 0
    try:
        # a stream: one pass, no seeking back (a negative size cannot loop), bounded memory
        with tarfile.open(fileobj=stream, mode="r|*") as tar:
            for member in tar:
                members += 1
                if members > limits.members:
                    raise Refused(f"{what} holds more than {limits.members} members, the cap for this run")
                name = _name(member, what)
                if prefix:
                    if name != prefix and not name.startswith(prefix + "/"):
                        continue
                    name = name[len(prefix) + 1 :]
                if _scratch(name):
                    continue  # what a storage load left in its scratch folder: not a result
                _check(member, name, what, limits)
                if not name or name in keep or name.rpartition("/")[2] in keep:
                    continue
                if member.isdir():
                    (fresh / name).mkdir(parents=True, exist_ok=True)
                    continue
                total += member.size
                if total > limits.total_bytes:
                    raise Refused(
                        f"{what} holds more than {limits.total_bytes} bytes, the cap for this run (at {name})"
                    )
                _write(tar, member, fresh / name)
                written.append(name)
    except tarfile.TarError as e:
        raise Refused(f"{what} is damaged ({e})") from None
    except (EOFError, OSError, zlib.error) as e:
        raise Refused(f"{what} is cut off or damaged ({e})") from None
    return written


def _name(member: tarfile.TarInfo, what: str) -> str:
    raw = member.name
    if "\x00" in raw or "\\" in raw or raw.startswith("/"):
        raise Refused(f"{what}: member {raw[:80]!r} is not a relative path")
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    return "/".join(parts)


def _scratch(name: str) -> bool:
    parts = name.split("/")
    return len(parts) > 2 and parts[0] == "loads" and parts[2] == "scratch"


def _check(member: tarfile.TarInfo, name: str, what: str, limits: Limits) -> None:
    shown = f"{what}: member {name[:80]!r}"
    parts = name.split("/") if name else []
    for part in parts:
        if part == ".." or not _PART.fullmatch(part) or len(part) > 128:
            raise Refused(f"{shown} has a name part rtlab does not write ({part[:40]!r})")
    if len(parts) > DEPTH:
        raise Refused(f"{shown} lies deeper than a run's layout ({DEPTH} levels)")
    if member.issym() or member.islnk():
        raise Refused(f"{shown} is a link: a run holds only files and folders")
    if member.type == tarfile.GNUTYPE_SPARSE or getattr(member, "sparse", None) is not None:
        raise Refused(f"{shown} is a sparse file: a run holds only plain files")
    if not (member.isreg() or member.isdir()):
        raise Refused(f"{shown} is a device, FIFO or other special file: a run holds only files and folders")
    if member.size < 0:
        raise Refused(f"{shown} has a negative size")
    if member.size > limits.file_bytes:
        raise Refused(f"{shown} has {member.size} bytes, more than the {limits.file_bytes} a file may")


def _write(tar: tarfile.TarFile, member: tarfile.TarInfo, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    source = tar.extractfile(member)
    assert source is not None  # a regular member
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as out:
        left = member.size
        while left > 0:
            chunk = source.read(min(_CHUNK, left))
            if not chunk:
                raise EOFError(f"{member.name} is cut off")
            out.write(chunk)
            left -= len(chunk)


def _move(fresh: Path, into: Path, written: list[str]) -> None:
    """Each file into place by rename: a link or file already there is replaced, never
    written through; a folder on the way must be a real folder."""
    for name in written:
        target = into / name
        folder = into
        for part in name.split("/")[:-1]:
            folder = folder / part
            if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
                raise Refused(f"{into}/{name}: {folder} is not a folder rtlab made")
            folder.mkdir(exist_ok=True)
        if target.is_dir() and not target.is_symlink():
            raise Refused(f"{into}/{name}: a folder is in the way")
        os.replace(fresh / name, target)
