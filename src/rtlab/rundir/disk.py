"""The run directory: raw results, written atomically, never edited by analysis. Its files
and folders, each with its shape, writer and meaning, are the table in layout.py (the
"The run directory" section of docs/run-folder.md shows them); this module reads and writes them.

run.json is rewritten (atomically) as the run goes, so a run whose host died
still says how far it got: status `running` then means it never finished.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import json
import os
import re
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from rtlab.boundary import paths, shape_check, shapes, untrusted
from rtlab.boundary.shapes import Manifest, PlanJSON, Sysinfo
from rtlab.boundary.untrusted import LOG_BYTES, TRACE_BYTES
from rtlab.errors import RunFailed, UsageError
from rtlab.plan import probes
from rtlab.plan.loads import valid_name
from rtlab.rundir import cyclictest, events, layout, timeline

SCHEMA = "rtlab.run/1"
SAID_BYTES = 256 << 10  # of a probe's output, read for its verdict (pi_stress's last lines)
# The table's names (layout.py), for every module that reads or writes a run.
MANIFEST, SYSINFO, EVENTS, SUMMARY = layout.MANIFEST, layout.SYSINFO, layout.EVENTS, layout.SUMMARY
TUNING, CONSOLE, COLLECT_ERROR = layout.TUNING, layout.CONSOLE, layout.COLLECT_ERROR
DEADLINE, PLAN_LOADS, PLAN_PROBES = layout.DEADLINE, layout.PLAN_LOADS, layout.PLAN_PROBES
LOADS, HWLAT_FOLDER, CYCLICTEST_ARGV = layout.LOADS, layout.HWLAT_FOLDER, layout.CYCLICTEST_ARGV
LOAD_ARGV, LOAD_CHECK, LOAD_PREPARE_ARGV = layout.LOAD_ARGV, layout.LOAD_CHECK, layout.LOAD_PREPARE_ARGV
TRACE_ARGV, RTLA_ARGV, PROBE_ARGV = layout.TRACE_ARGV, layout.RTLA_ARGV, layout.PROBE_ARGV
LOAD_LOG, HOST_FILES, PLAN_FILES = layout.LOAD_LOG, layout.HOST_FILES, layout.PLAN_FILES


def write_atomic(path: Path, text: str) -> None:
    """Readers see the old file or the new one, never half of either. A file that cannot be
    written (a full disk, a read-only folder) is a RunFailed naming it; the old one stays."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise RunFailed(f"cannot write {path}: {e.strerror}{_fix(e)}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise RunFailed(f"cannot write {path}: {e.strerror}{_fix(e)}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _fix(e: OSError) -> str:
    if e.errno == errno.ENOSPC:
        return ": free some space"
    if e.errno in (errno.EACCES, errno.EROFS, errno.EPERM):
        return ": choose a folder you can write"
    return ""


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def move_aside(folder: Path, why: str = "interrupted") -> Path:
    """A run cut off (or failed) before it ended, kept beside as FOLDER.interrupted-N for the
    one measured again in its place: nothing measured is deleted."""
    n = 1
    while (aside := folder.with_name(f"{folder.name}.{why}-{n}")).exists():
        n += 1
    folder.rename(aside)
    return aside


def append_line(path: Path, line: str) -> None:
    """LINE (made one line) at the end of PATH, through no link: a run's events and notes;
    after a last line cut short (a board lost power mid-write), on a line of its own."""
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "r+", encoding="utf-8") as f:
        cut = (size := os.fstat(fd).st_size) > 0 and os.pread(fd, 1, size - 1) != b"\n"
        f.write(("\n" if cut else "") + untrusted.one_line(line.removesuffix("\n")) + "\n")


def write_note(path: Path, text: str) -> None:
    """A note of rtlab's own in the run (collect-error.txt, console.log): replaced whole, never
    written through a link a target may have left; what a target said in it, line by line,
    made one line each (untrusted.one_line)."""
    with contextlib.suppress(RunFailed):  # a full disk: the error is told on the terminal too
        write_atomic(path, untrusted.each_one_line(text))


def read_json(path: Path) -> Any:
    """A JSON document, read with untrusted's bounds: untrusted.Damaged (a ValueError, as
    json's own errors are) when it is a link, too large or not JSON."""
    return untrusted.json_file(path)


def read_index(path: Path) -> dict[str, Any]:
    """A campaign's own index (repeats.json, study.json, scan.json) when it goes on: a JSON
    object, or a UsageError in one line that says what to do with the folder."""
    try:
        doc = untrusted.json_file(path, str(path))
    except untrusted.Damaged as e:
        raise UsageError(f"{e}: move {path.parent} aside, or give another --out") from None
    if not isinstance(doc, dict):
        raise UsageError(
            f"damaged {path}: not an index of rtlab's: move {path.parent} aside, or give another --out"
        )
    return doc


@dataclass(frozen=True)
class TraceCapture:
    """One cyclictest run of a load's trace pass (loads/L/trace/NNN), as the agent left it."""

    n: int
    trace_path: str | None = None  # level b: the spiking CPU's trace, relative to the run
    trace_text: str | None = None
    verbose: timeline.Verbose | None = None  # level c: cyclictest's --spike list
    counters: str | None = None  # level c: the interrupts file
    rtla_text: str | None = None  # level a: rtla's output (its auto-analysis)


@dataclass(frozen=True)
class RawProbe:
    """One probe's folder besides cyclictest (loads/L/P, plan/probes.py), as the agent left it."""

    name: str
    argv: tuple[str, ...] = ()  # its command, program first
    result: Any = None  # its JSON (rt-tests tools) or its output (rtla); None: absent or unreadable
    problem: str | None = None  # why `result` cannot be used (the agent's event says why it failed)
    said: str = ""  # what a functional test printed (probe.out, then probe.log): its verdict's words


@dataclass(frozen=True)
class RawLoad:
    """What a load's folder holds, read but not yet analysed."""

    cyclictest: dict[str, Any] | None = None  # cyclictest's JSON, None when absent or unreadable
    problem: str | None = None  # why cyclictest's JSON cannot be used
    stressed: bool = False  # the plan ran something (stress-ng or a command) under this load
    stress_end: dict[str, str] | None = None  # the agent's last load.log line: exit, running_at_end
    stress_words: str = ""  # the load's last error line
    check: str = "alive"  # how the load is checked (load.check): alive or oom-kill
    argv: tuple[str, ...] = ()  # the load's command line (load.argv), program first
    log: str = ""  # what the load printed (load.log): stress-ng's throughput table at its end
    # the time axis as cyclictest printed it: (segment number, 0 without segments, output)
    verbose: tuple[tuple[int, timeline.Verbose], ...] = ()
    segments_lost: tuple[str, ...] = ()  # segments whose result is missing or cut off
    trace_events: tuple[str, ...] = ()  # the events the trace pass enabled
    traces: tuple[TraceCapture, ...] = ()  # the trace pass, capture by capture
    probes: tuple[RawProbe, ...] = ()  # the other probes (--probe), in the plan's order


# (runs of rtlab before loads files: stress.log, stress.argv and "@rtlab stress-ng")
_STRESS_END = re.compile(r"^@rtlab (?:load-process|stress-ng) (.*)$", re.MULTILINE)
_STRESS_ERROR = re.compile(r"^.*(?:error|fail|must|invalid|cannot).*$", re.MULTILINE | re.IGNORECASE)


class UnreadableFile(ValueError):
    """A run file that is there but cannot be read: one line naming it."""


class RunDir:
    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def create(cls, path: Path) -> RunDir:
        """A new run directory; refuses one that holds anything, so nothing is overwritten."""
        try:
            if path.exists():
                if not path.is_dir():
                    raise UsageError(f"{path} exists and is not a directory: choose another --out")
                if (path / MANIFEST).exists():
                    raise UsageError(f"{path} already holds a run: choose another --out")
                if any(path.iterdir()):
                    raise UsageError(f"{path} exists and is not an empty run directory: choose another --out")
            path.mkdir(parents=True, exist_ok=True)
            (path / LOADS).mkdir(exist_ok=True)
        except OSError as e:
            raise UsageError(
                f"cannot make the run directory {path}: {e.strerror}; choose another --out"
            ) from None
        return cls(path)

    @classmethod
    def create_new(cls, path: Path) -> RunDir:
        """A run directory at `path`, or `path-2`, `path-3`... when another run took it first
        (two runs started in the same second): mkdir decides atomically who gets which."""
        for n in range(1, 1000):
            candidate = path if n == 1 else path.with_name(f"{path.name}-{n}")
            try:
                candidate.parent.mkdir(parents=True, exist_ok=True)
                candidate.mkdir()
            except FileExistsError:
                continue
            except OSError as e:
                raise UsageError(
                    f"cannot make the run directory {candidate}: {e.strerror}; choose another --out"
                ) from None
            return cls.create(candidate)
        raise UsageError(f"{path}: a thousand runs with this name already: choose another --out")

    @classmethod
    def open(cls, path: Path) -> RunDir:
        if not (path / MANIFEST).is_file():
            raise UsageError(
                f"{path} is not an rtlab run (no {MANIFEST}): give a directory made by `rtlab run`"
            )
        return cls(path)

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    def manifest(self) -> Manifest:
        """run.json, its values checked against their shape (a board's LAVA bundle brings its
        own): UnreadableFile "damaged run.json: <field>: <why>" else."""
        data = self.json(self.manifest_path)
        if not isinstance(data, dict) or not isinstance(data.get("plan"), dict):
            raise UnreadableFile(f"{self.manifest_path} holds no run manifest")
        problem = shape_check.problem(shapes.Manifest, data, required=shape_check.MANIFEST_NEEDS)
        if problem is None:
            problem = next((f"plan.loads: {n[:40]!r} is no load name" for n in data["plan"]["loads"]
                            if not valid_name(n)), None)  # fmt: skip
        if problem is not None:
            raise UnreadableFile(f"damaged {self.manifest_path}: {problem}")
        return cast(Manifest, data)

    def json(self, path: Path) -> Any:
        """A JSON document of the run, read within the boundary's bounds and through no link
        (anywhere below the run folder): UnreadableFile naming it else."""
        try:
            return untrusted.json_file(path, str(path), root=self.path)
        except untrusted.Damaged as e:
            raise UnreadableFile(str(e)) from None

    def plan(self) -> PlanJSON | None:
        """The plan in run.json (the host's own file), None when it cannot be read."""
        try:
            return self.manifest()["plan"]
        except UnreadableFile:
            return None

    def write_manifest(self, data: Manifest) -> None:
        write_json(self.manifest_path, data)

    def load_dir(self, load: str) -> Path:
        """A load's folder; a name read back from a run becomes a path only if a load could
        have it (letters, digits, ._+-: never `..` or `/`)."""
        try:
            return self.path / LOADS / paths.component(load, "a load's name")
        except paths.BadName as e:
            raise UnreadableFile(f"{self.path}: {e}") from None

    def planned_loads(self) -> list[str]:
        path = self.path / PLAN_LOADS
        if not path.is_file():
            return []
        return [line for line in untrusted.lines(self.text(path)) if valid_name(line)]

    def text(self, path: Path, cap: int = untrusted.DOCUMENT_BYTES) -> str:
        """A file of the run as text: no link, no file larger than CAP (UnreadableFile)."""
        try:
            return untrusted.read_text(path, cap, path.relative_to(self.path).as_posix(), self.path)
        except untrusted.Damaged as e:
            raise UnreadableFile(str(e)) from None

    def sysinfo(self) -> Sysinfo | None:
        """What the agent found on the target; UnreadableFile when the file is damaged."""
        path = self.path / SYSINFO
        if not path.is_file():
            return None
        data = self.json(path)
        if not isinstance(data, dict):
            raise UnreadableFile(f"{path} holds no system information")
        problem = shape_check.problem(shapes.Sysinfo, data)
        if problem is not None:
            raise UnreadableFile(f"damaged {path}: {problem}")
        return cast(Sysinfo, data)

    def raw_load(self, load: str) -> RawLoad:
        """The files of one load as the agent left them, each read defensively: a file that
        is a link or larger than it can be fails the load with its reason."""
        try:
            return self._raw_load(load)
        except UnreadableFile as e:
            return RawLoad(problem=str(e))

    def _raw_load(self, load: str) -> RawLoad:
        folder = self.load_dir(load)
        data: dict[str, Any] | None = None
        problem = None
        path = folder / cyclictest.FILE
        verbose: list[tuple[int, timeline.Verbose]] = []
        lost: list[tuple[str, str]] = []  # (segment, why its result is not whole)
        linked = paths.link_along(self.path, folder)
        if linked is not None:
            raise UnreadableFile(f"{linked} is a link: rtlab reads no links in a run")
        segments = paths.numbered(folder / layout.SEGMENTS)
        if segments and not path.is_file():
            parts = []
            for n, segment in segments:
                try:
                    part = cyclictest.read(segment / cyclictest.FILE, self.path)
                except cyclictest.InvalidResult as e:
                    lost.append((segment.name, str(e)))  # cut off by a crash or a power loss: that one only
                    continue
                idle = cyclictest.idle_threads(part)
                if idle:  # a CPU starved for a whole segment: no sum hides it
                    lost.append((segment.name, cyclictest.starved(idle)))
                    continue
                parts.append(part)
                found = timeline.read(segment, self.path)
                if found is not None:
                    verbose.append((n, found))
            try:
                data = cyclictest.combine(parts) if parts else None
            except cyclictest.InvalidResult as e:
                problem = str(e)
            if not parts:  # not "no cyclictest.json": the files are there, and say why
                said = "; ".join(f"{name}: {why}" for name, why in lost[:3])
                more = f"; and {len(lost) - 3} more" if len(lost) > 3 else ""
                problem = f"no segment left a whole result ({said}{more})"
        elif path.is_file():
            try:
                data = cyclictest.read(path, self.path)
            except cyclictest.InvalidResult as e:
                problem = str(e)
        elif (folder / (part_name := f"{cyclictest.FILE}{layout.PART}")).is_file():
            problem = f"cyclictest did not finish writing {cyclictest.FILE} (kept as {part_name})"
        stress_end = None
        words = text = ""
        log = next((f for f in (folder / LOAD_LOG, folder / layout.OLD_NAMES[LOAD_LOG]) if f.is_file()), None)
        if log is not None:
            text = self.text(log, LOG_BYTES)
            ends = _STRESS_END.findall(text)
            if ends:
                stress_end = dict(f.partition("=")[::2] for f in ends[-1].split())
            errors = [line for line in _STRESS_ERROR.findall(text) if not line.startswith("@rtlab")]
            words = errors[-1].strip()[:200] if errors else ""
        argvs = (folder / LOAD_ARGV, folder / layout.OLD_NAMES[LOAD_ARGV])
        argv_file = next((f for f in argvs if f.is_file()), None)
        argv = tuple(self.text(argv_file).split("\n")[:-1]) if argv_file else ()
        stressed = argv_file is not None
        if not segments:
            whole = timeline.read(folder, self.path)
            verbose = [(0, whole)] if whole is not None else []
        events_file = folder / layout.TRACE_FOLDER / layout.TRACE_EVENTS
        trace_events = tuple(self.text(events_file).split()) if events_file.is_file() else ()
        check_file = folder / LOAD_CHECK
        check = self.text(check_file).strip() if check_file.is_file() else "alive"
        return RawLoad(
            data, problem, stressed, stress_end, words, check, argv, text, tuple(verbose),
            tuple(name for name, _ in lost), trace_events, self._traces(folder / layout.TRACE_FOLDER),
            self._probes(folder),
        )  # fmt: skip

    def _probe_order(self) -> list[str]:
        """The other probes in the plan's order (plan.probes), known ones only."""
        path = self.path / PLAN_PROBES
        try:
            names = self.text(path).split() if path.is_file() else []
        except UnreadableFile:
            names = []
        return [n for n in dict.fromkeys(names) if n in probes.PROBES] or [
            n for n in probes.PROBES if any((self.path / LOADS).glob(f"*/{n}/{PROBE_ARGV}"))
        ]

    def _probes(self, folder: Path) -> tuple[RawProbe, ...]:
        found = []
        for name in self._probe_order():
            probe = probes.PROBES[name]
            where = folder / name
            if not (where / PROBE_ARGV).is_file():
                continue
            try:
                argv = tuple(self.text(where / PROBE_ARGV).split("\n")[:-1])
            except UnreadableFile as e:
                found.append(RawProbe(name, problem=str(e)))
                continue
            result, problem = None, None
            path = where / probe.result
            try:
                if not path.is_file():
                    part = where / f"{probe.result}.part"
                    problem = f"{name} did not finish writing {probe.result}" if part.is_file() else None
                elif path.suffix == ".json":
                    result = self.json(path)
                else:
                    result = self.text(path, LOG_BYTES)
            except UnreadableFile as e:
                problem = str(e)
            found.append(RawProbe(name, argv, result, problem, self._said(where) if probe.verdict else ""))
        return tuple(found)

    def _said(self, where: Path) -> str:
        """How a probe ended in its own words: the tail of its output, then of its log (the tail
        only: a board's 64 MiB logs, kept for each probe of each load, add up to gigabytes)."""
        names = (layout.PROBE_OUT, layout.PROBE_LOG)
        return "\n".join(untrusted.tail_text(where / name, SAID_BYTES, self.path) for name in names)

    def _traces(self, folder: Path) -> tuple[TraceCapture, ...]:
        found = []
        for n, capture in paths.numbered(folder):
            path = next(iter(sorted(capture.glob(f"cpu*{layout.CPU_TRACE}*"))), None)
            text = None
            if path is not None:
                try:
                    raw = untrusted.read_bytes(path, TRACE_BYTES, root=self.path)
                    if path.suffix == ".gz":  # read no further than a trace can be
                        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as f:
                            raw = untrusted.read_at_most(f, TRACE_BYTES + 1)
                    text = raw.decode("utf-8", errors="replace") if len(raw) <= TRACE_BYTES else None
                except (untrusted.Damaged, OSError, EOFError, zlib.error):
                    text = None  # cut off, or too large: the capture says it explains nothing
            counters = capture / layout.INTERRUPTS
            rtla = capture / layout.RTLA_OUT
            kept = path or (rtla if rtla.is_file() else None)  # the raw record of the capture
            found.append(
                TraceCapture(
                    n,
                    kept.relative_to(self.path).as_posix() if kept is not None else None,
                    text,
                    timeline.read(capture, self.path),
                    self.text(counters) if counters.is_file() else None,
                    self.text(rtla) if rtla.is_file() else None,
                )
            )
        return tuple(found)

    def events(self) -> list[events.Event]:
        path = self.path / EVENTS
        if not path.is_file():
            return []
        lines = untrusted.lines(self.text(path, LOG_BYTES))
        return [e for e in map(events.parse, lines) if e is not None]
