"""Board farms through LAVA: an rtlab campaign as one `test` action appended to the lab's
own job, and the job's log read back into a run directory like any other.

The lab's deploy and boot actions are the user's (they are lab-specific: rtlab never guesses
them). The test action carries the agent and the plan inline, base64 in one step; on the
board it measures with nothing printed (console output adds latency), then reports each load
to LAVA (lava-test-set, lava-test-case per CPU: min, avg, max with the deadline's verdict,
p99.99) and prints the whole run folder between two marks, since LAVA copies no file back
from a board.
`rtlab lava import` finds those marks in the job's log and rebuilds the run; a job without
them (cut off, or a health other than Complete) is imported as failed, never as a pass.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
import shutil
import tarfile
import tempfile
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from rtlab import __version__, units
from rtlab.agent import contract, script
from rtlab.agent.shell import quote, words
from rtlab.boundary import unpack as archive
from rtlab.boundary import untrusted
from rtlab.boundary.shapes import Manifest, TargetJSON
from rtlab.errors import RunFailed, UsageError
from rtlab.plan import Plan
from rtlab.plan.loads import BUILTIN, Load, valid_name
from rtlab.rundir import disk, events, layout
from rtlab.rundir.disk import RunDir, append_line, write_atomic, write_json
from rtlab.runner import now, write_plan_files
from rtlab.runner.record import new_manifest
from rtlab.targets.base import target_dir
from rtlab.units import read_user_file

if TYPE_CHECKING:
    from rtlab.runner import Outcome

BEGIN = "@rtlab-bundle-begin"
END = "@rtlab-bundle-end"
MARGIN_S = 600  # beyond the plan: the agent's own setup, sysinfo, the report and the bundle
REFUSED_FILE = "refused"  # lava-report writes why the run did not measure (a busy board) here
# A job's log as rtlab reads it: the bundle (base64 of the gzipped run) and LAVA's own lines.
LOG_BYTES = 256 << 20
LOG_LINE_CHARS = 1 << 20
ERROR_CHARS = 300  # of the job's error message, kept in the run's reason
IMPORT_FILE = layout.LAVA_IMPORT  # the bundle's uid and the console lines skipped inside it


def read_base(path: Path) -> dict[str, Any]:
    """The lab's job, checked for what rtlab relies on."""
    try:
        text = read_user_file(path, "base job")
    except OSError as e:
        raise UsageError(f"cannot read base job {path}: {e.strerror}: give the lab's job YAML") from None
    base = read_job(text, path)
    if not any("boot" in action for action in base["actions"]):
        raise UsageError(
            f"{path} has no boot action: rtlab's test runs on the booted board, after the lab's boot"
        )
    return base


def read_job(text: str, path: Path) -> dict[str, Any]:
    """A LAVA job's YAML, as far as it must be one before a server sees it."""
    try:
        job = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise UsageError(f"{path} is not valid YAML ({e}): fix it first") from None
    if not isinstance(job, dict) or not isinstance(job.get("actions"), list) or "device_type" not in job:
        raise UsageError(
            f"{path} is not a LAVA job: it needs device_type and a list of actions (deploy, boot)"
        )
    return job


def qemu_base(arch: str, kernel: Path, initrd: Path, cmdline: str, prompt: str) -> dict[str, Any]:
    """The lab's part of a job for LAVA's own qemu device type, booting rtlab's guest: the kernel
    and the initramfs as images (LAVA adds its test shell's files to the initramfs), booted by
    the dispatcher's QEMU with a shell on the serial console, which the test shell drives."""
    append = f'-kernel {{kernel}} -append "{cmdline}"'
    return {
        "device_type": "qemu",
        "job_name": f"rtlab on a QEMU {arch} guest",
        "visibility": "public",
        "priority": "medium",
        "context": {"arch": arch},  # LAVA's qemu device type chooses its emulator by it
        "timeouts": {"job": {"minutes": 30}, "action": {"minutes": 10}, "connection": {"minutes": 2}},
        "actions": [
            {
                "deploy": {
                    "to": "tmpfs",
                    "timeout": {"minutes": 5},
                    "images": {
                        "kernel": {"url": kernel.resolve().as_uri(), "image_arg": append},
                        "rootfs": {
                            "url": initrd.resolve().as_uri(),
                            "image_arg": "-initrd {rootfs}",
                            "format": "cpio.newc",
                            "overlays": {"lava": True},
                        },
                    },
                }
            },
            {"boot": {"method": "qemu", "media": "tmpfs", "timeout": {"minutes": 5}, "prompts": [prompt]}},
        ],
    }


def _serial(base: dict[str, Any]) -> bool:
    """Whether the test shell is a serial console (signals then go through the kernel log)."""
    boots = [a["boot"] for a in base["actions"] if "boot" in a]
    return not any(b.get("method") == "ssh" or b.get("connection") == "ssh" for b in boots)


def _skeleton(plan: Plan, manifest: Manifest, remote: str) -> bytes:
    """agent.sh and the run folder as the agent reads it (plan files, run.json), gzipped tar."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        agent = script()
        info = tarfile.TarInfo("agent.sh")
        info.size, info.mode = len(agent), 0o755
        tar.addfile(info, io.BytesIO(agent))
        with tempfile.TemporaryDirectory(prefix="rtlab-lava-") as folder:
            run = RunDir(Path(folder))
            write_plan_files(run, plan, f"{remote}/run")
            write_json(run.path / disk.MANIFEST, manifest)
            tar.add(run.path, arcname="run")
    return buffer.getvalue()


def job(base: dict[str, Any], plan: Plan, name: str, deadline_us: int | None) -> dict[str, Any]:
    """The lab's job with rtlab's test action appended (the plan fixed: stress-ng's workers
    are 0, one per online CPU of the board, unless --workers says otherwise)."""
    uid = uuid.uuid4().hex[:12]
    base_dir = target_dir()  # the board's rtlab folder, as for an ssh:// target: its lock is there
    remote = f"{base_dir}/lava/{uid}"
    target: TargetJSON = {"kind": "lava", "name": f"lava:{base.get('device_type')}"}
    manifest = new_manifest(name, uid, plan, target, remote=remote)
    bundle = base64.b64encode(_skeleton(plan, manifest, remote)).decode()
    agent_args = words(contract.argv(plan))
    # LAVA runs the steps under `set -e`: a step that fails ends the test run there, with no
    # word of why. Only the last may: lava-test-raise ends the job with the reason a run that
    # did not measure gave (another run holding the board), after its report and its bundle.
    # Every value is quoted and every expansion in double quotes: $RTLAB_TARGET_DIR may hold a
    # space, and `rm -rf $R` would then remove a folder beside rtlab's.
    steps = [
        f"export RTLAB_TARGET_DIR={quote(base_dir)}; R={quote(remote)}",
        'rm -rf "$R" && mkdir -p "$R" && cd "$R"',
        f"echo {quote(bundle)} | base64 -d | tar -xzf -",
        f"sh ./agent.sh sysinfo > run/{layout.SYSINFO} 2> run/{layout.SYSINFO_LOG} || true",
        # measured with nothing on the console: output there adds latency
        f'status=0; sh ./agent.sh run "$R/run" {agent_args} > run/{layout.AGENT_OUT} 2>&1 || status=$?; '
        'echo rtlab agent exit "$status"',
        f'sh ./agent.sh lava-report "$R/run" {quote(deadline_us or 0)} "$R"/{quote(REFUSED_FILE)}',
        # the kernel's messages kept off the console while the bundle prints (an emulated
        # board on a busy host logs RCU stalls): one inside a line of it would cut the line
        "level=$(cut -f1 /proc/sys/kernel/printk 2>/dev/null || true); dmesg -n 1 2>/dev/null || true; "
        f"echo {BEGIN} {quote(uid)}; tar -czf - run | base64; echo {END} {quote(uid)}; "
        '[ -z "$level" ] || dmesg -n "$level" 2>/dev/null || true',
        f'why=$(cat "$R"/{quote(REFUSED_FILE)} 2>/dev/null || true); cd / && rm -rf "$R"; '
        '[ -z "$why" ] || lava-test-raise "$why"',
    ]
    definition: dict[str, Any] = {
        "from": "inline",
        "name": "rtlab",
        "path": "inline/rtlab.yaml",
        "repository": {
            "metadata": {
                "format": "Lava-Test Test Definition 1.0",
                "name": "rtlab",
                "description": f"rtlab {__version__}: scheduling latency under {', '.join(plan.loads)}",
            },
            "run": {"steps": steps},
        },
    }
    if _serial(base):
        definition["lava-signal"] = "kmsg"
    seconds = int(plan.planned_seconds()) + MARGIN_S
    out = dict(base)
    out["actions"] = [
        *base["actions"],
        {"test": {"timeout": {"seconds": seconds}, "definitions": [definition]}},
    ]
    out["metadata"] = {**(base.get("metadata") or {}), "rtlab.run": name, "rtlab.uid": uid}
    out["timeouts"] = _timeouts(base.get("timeouts") or {}, seconds)
    return out


def _timeouts(timeouts: dict[str, Any], test_s: int) -> dict[str, Any]:
    """The job's own timeout raised to hold the test (and the lab's deploy and boot)."""
    job_s = _seconds(timeouts.get("job") or {})
    return {**timeouts, "job": {"seconds": max(job_s, test_s + MARGIN_S)}}


def _seconds(timeout: dict[str, Any]) -> int:
    scale = {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400}
    return sum(int(timeout.get(k, 0)) * v for k, v in scale.items())


def dump(document: dict[str, Any]) -> str:
    return yaml.safe_dump(document, sort_keys=False, width=1 << 20)


def read_log(path: Path) -> str:
    """A job's log file (the user's own: it may be a link), up to LOG_BYTES."""
    # a regular file only (a FIFO or a device would be waited on or read without end), through
    # the one reader of the user's files
    try:
        return units.read_user_file(path, "the job's log", most=LOG_BYTES, lenient=True)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}: give the job's log file") from None


def log_entries(text: str) -> Iterable[dict[str, Any]]:
    """The job's log, entry by entry: lava-run's lines or the server's YAML list. Read as YAML,
    not JSON: some values carry YAML tags (`! "176"`). Anyone who can submit a job writes into
    its log: a line too long, too deep or with aliases is skipped, as any line not an entry."""
    for raw in untrusted.lines(text):
        entry_line = raw[2:] if raw.startswith("- ") else raw
        if not entry_line.startswith("{") or len(entry_line) > LOG_LINE_CHARS:
            continue
        try:
            entry = untrusted.yaml_loads(entry_line, "log line")
        except untrusted.Damaged:
            continue
        if isinstance(entry, dict):
            yield entry


@dataclass
class Found:
    """What a job's log holds for rtlab: the run bundle (the run folder's tar.gz), its uid, the
    console lines between its lines that were not its own (a kernel's messages on a serial
    console), the test results and the job's own result."""

    data: bytes | None = None
    uid: str | None = None
    noise: int = 0
    results: list[dict[str, Any]] = field(default_factory=list)
    health: str | None = None
    error: str | None = None  # why the job failed, as LAVA says (its error_msg: lava-test-raise's)
    damaged: str | None = None  # why a bundle the log began holds no run


_BASE64_LINE = re.compile(r"[A-Za-z0-9+/]{1,76}={0,2}")  # base64 wraps at 76 (coreutils, busybox)
# a kernel's message that came in the middle of a bundle's line: the line's start before it
# (its rest is the next line); the gzip's CRC refuses a wrong guess
_CUT_LINE = re.compile(r"([A-Za-z0-9+/]{1,75}={0,2})\[\s*\d+\.\d+\] .*")  # the last line: its padding
_UID = re.compile(r"[0-9A-Za-z_-]{1,64}")  # lava.job's is uuid4().hex[:12]


def bundle(entries: Iterable[dict[str, Any]], uid: str | None = None) -> Found:
    """The run bundle of the job whose uid is UID (else the only one the log holds) from a
    job's log. Anyone who can print to the console can print a bundle: one with another uid is
    not this job's, two uids without UID to choose and two bundles of one uid are refused
    (RunFailed)."""
    found = Found()
    chunks: dict[str, list[str]] = {}
    complete: dict[str, bytes | None] = {}
    noise: dict[str, int] = {}
    current: str | None = None
    for entry in entries:
        msg = entry.get("msg")
        if entry.get("lvl") == "results" and isinstance(msg, dict):
            found.results.append(msg)
            if msg.get("case") == "job" and msg.get("definition") == "lava":
                found.health = str(msg.get("result"))
                if msg.get("error_msg"):
                    found.error = untrusted.printable(str(msg["error_msg"]))[:ERROR_CHARS]
        if entry.get("lvl") != "target" or not isinstance(msg, str):
            continue
        text = msg.strip()
        words = text.split()
        if text.startswith(BEGIN) and len(words) == 2 and _UID.fullmatch(words[1]):
            current = words[1]
            if current in chunks:  # the job prints its bundle once: a second is someone else's
                raise RunFailed(
                    f"the job's log holds two run bundles of uid {current}: one is not the job's; "
                    "nothing was imported"
                )
            chunks[current], noise[current] = [], 0
        elif text.startswith(END) and current is not None and words[1:] == [current]:
            try:
                complete[current] = base64.b64decode("".join(chunks[current]), validate=True)
            except (binascii.Error, ValueError):
                complete[current] = None
                found.damaged = f"the bundle of uid {current} does not decode as base64"
            current = None
        elif current is not None and text and not text.startswith("+ "):
            if _BASE64_LINE.fullmatch(text):
                chunks[current].append(text)
            else:  # a kernel's line on the console between the bundle's: not part of it
                noise[current] += 1
                if cut := _CUT_LINE.fullmatch(text):
                    chunks[current].append(cut[1])
    if current is not None and found.damaged is None:
        found.damaged = f"the bundle of uid {current} begins but does not end (the log was cut off)"
    if uid is None and len(complete) > 1:
        raise RunFailed(
            f"the job's log holds run bundles of {len(complete)} uids ({', '.join(sorted(complete))}): "
            "give --uid, the job's metadata rtlab.uid, to say which is the job's"
        )
    chosen = uid if uid is not None else next(iter(complete), None)
    if chosen is not None and chosen in complete:
        found.data, found.uid, found.noise = complete[chosen], chosen, noise[chosen]
    return found


def job_uid(record: dict[str, Any]) -> str | None:
    """The rtlab uid in a job's definition as the server keeps it (metadata rtlab.uid)."""
    try:
        definition = untrusted.yaml_loads(str(record.get("definition") or ""), "the job's definition")
    except untrusted.Damaged:
        return None
    metadata = definition.get("metadata") if isinstance(definition, dict) else None
    uid = metadata.get("rtlab.uid") if isinstance(metadata, dict) else None
    return uid if isinstance(uid, str) and _UID.fullmatch(uid) else None


def unpack(data: bytes, out: Path) -> RunDir:
    """The board's run folder into OUT (a new folder). Its caps are the defaults: the plan in
    the bundle is the board's word, not the host's."""
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"-o {out} is not empty: give a new folder for the imported run")
    try:
        archive.unpack(data, out, archive.Limits.for_plan(None), "the job's run bundle", prefix="run")
    except archive.Refused as e:
        raise RunFailed(f"{e}: nothing was imported") from None
    return RunDir(out)


def import_log(text: str, out: Path, health: str | None = None, uid: str | None = None) -> Outcome:
    """The run of a LAVA job, from its log: the board's run folder when the job printed it,
    else a failed run holding the job's test results. A job whose own result is not a pass, or
    whose health on the server (`health`, when read from one) is not Complete, ends failed,
    whatever the loads say: LAVA saw it go wrong. With UID (the job's rtlab uid), only the
    bundle of that uid is the job's."""
    from rtlab.runner import conclude

    found = bundle(log_entries(text), uid)
    problem = _problem(found.health, health, found.error)
    if found.data is None:
        why = problem or "the job's own result is a pass"
        if found.damaged:
            why = f"{found.damaged}; {why}"
        if uid is not None:
            why += f"; no bundle of uid {uid}"
        return _without_bundle(found.results, why, out)
    run = unpack(found.data, out)
    try:
        said = run.manifest().get("uid")
    except disk.UnreadableFile:
        said = None
    if said is not None and said != found.uid:
        shutil.rmtree(run.path)
        theirs = untrusted.printable(str(said))[:20]
        why = f"the bundle of uid {found.uid} holds the run of uid {theirs}, not this job's"
        raise RunFailed(f"{why}: nothing was imported")
    write_json(run.path / layout.LAVA_RESULTS, found.results)
    write_json(run.path / IMPORT_FILE, {"uid": found.uid, "console_lines_skipped": found.noise})
    if problem is None:
        return conclude(run, collected=now())
    append_line(
        run.path / disk.EVENTS,
        events.line(events.Kind.DONE, status="failed", source="lava", reason=problem),
    )
    return conclude(run, collected=now(), reason=problem)


def _problem(result: str | None, health: str | None, error: str | None = None) -> str | None:
    """What LAVA says went wrong with the job, if anything, with its error message."""
    why = f": {error}" if error else ""
    if health is not None and health != "Complete":
        return f"the LAVA job's health is {untrusted.printable(health)[:40]}{why}"
    if result != "pass":
        said = untrusted.printable(result or "")[:40] or "missing (the log was cut off)"
        return f"the LAVA job's own result is {said}{why}"
    return None


def _without_bundle(results: list[dict[str, Any]], problem: str, out: Path) -> Outcome:
    from rtlab.runner import conclude

    if out.exists() and any(out.iterdir()):
        raise UsageError(f"-o {out} is not empty: give a new folder for the imported run")
    # the test sets name the loads; one that is no load name rtlab makes is left out
    sets = list(dict.fromkeys(str(r["set"]) for r in results if r.get("set") and valid_name(str(r["set"]))))
    loads = tuple(sets) or ("unknown",)
    # a set of a loads file, or none at all: named as the job named it, defined as nothing
    # rtlab knows, so the import never fails on a name (the run is failed with its reason)
    unknown = tuple(Load(n, about="named by the LAVA job's results") for n in loads if n not in BUILTIN)
    plan = Plan(loads=loads, custom_loads=unknown)
    reason = f"the job's log holds no run from the board ({problem})"
    manifest = new_manifest(
        out.name, "", plan, {"kind": "lava", "name": "lava"}, started=None, status="failed"
    )
    manifest["plan"]["load_definitions"] = {}
    manifest["loads"] = {load: {"status": "failed", "reason": reason} for load in plan.loads}
    out.mkdir(parents=True, exist_ok=True)
    run = RunDir(out)
    write_json(run.path / layout.LAVA_RESULTS, results)
    ends = "".join(
        events.line(events.Kind.LOAD_END, load=load, status="failed", reason=reason) for load in plan.loads
    )
    done = events.line(events.Kind.DONE, status="failed", source="lava", reason=reason)
    write_atomic(run.path / disk.EVENTS, ends + done)
    run.write_manifest(manifest)
    return conclude(run, collected=now(), reason=reason)
