"""Reading runs from disk into summaries: the I/O edge in front of analysis.

A damaged file costs only what it holds: a cut-off run.json leaves the plan's own files
(plan.loads, cyclictest.argv) to say what was measured, a damaged sysinfo.json or events
file leaves the loads reportable, and each such file is named in the summary's warnings.
"""

from __future__ import annotations

from pathlib import Path

from rtlab.analysis import repeats
from rtlab.analysis.summary import summarize
from rtlab.boundary.shapes import Manifest, PlanJSON, Sysinfo
from rtlab.boundary.summary_shapes import Summary
from rtlab.errors import UsageError
from rtlab.plan import CYCLICTEST_FLAGS, Plan
from rtlab.rundir import disk, liveness
from rtlab.rundir.disk import RunDir, UnreadableFile, read_json
from rtlab.rundir.events import Event


def _plan_from_files(run: RunDir) -> PlanJSON:
    """The plan as the agent's own files hold it: the loads and cyclictest's arguments."""
    loads = run.planned_loads()
    options: dict[str, int] = {}
    field = {flag: name for name, flag in CYCLICTEST_FLAGS.items()}  # read back by the table it was built by
    for load in loads:
        argv = run.load_dir(load) / disk.CYCLICTEST_ARGV
        if argv.is_file():
            words = run.text(argv).split("\n")
            options = {
                field[w]: int(v)
                for w, v in zip(words, words[1:], strict=False)
                if w in field and v.isascii() and v.isdigit() and len(v) < 12
            }
            break
    return Plan(
        loads=tuple(loads),
        duration_s=options.get("duration_s", 0),
        interval_us=options.get("interval_us", 0),
        priority=options.get("priority", 0),
        histogram_us=options.get("histogram_us", 0),
        block_us=options.get("block_samples", 0) * options.get("interval_us", 0),
    ).to_json()


def read(run: RunDir) -> tuple[Manifest, Sysinfo | None, list[Event], list[str]]:
    """manifest, sysinfo, events and the one-line problems of the files that could not be read."""
    problems: list[str] = []
    try:
        manifest = run.manifest()
    except UnreadableFile as e:
        problems.append(f"{e}; the plan is read from plan.loads and cyclictest.argv")
        try:
            plan = _plan_from_files(run)
        except UnreadableFile as also:  # the plan's own files damaged too: no load to report
            problems.append(str(also))
            plan = Plan(loads=()).to_json()
        manifest = Manifest(id=run.path.name, plan=plan, status="unknown")
    try:
        info = run.sysinfo()
    except UnreadableFile as e:
        problems.append(f"{e}; the system facts are missing")
        info = None
    try:
        events = run.events()
    except UnreadableFile as e:
        problems.append(str(e))
        events = []
    return manifest, info, events, problems


def replicates(path: Path) -> list[Summary]:
    """The whole runs a folder holds: each repeat of a campaign measured more than once
    (--repeat), else the run itself. Comparisons replicate at this level."""
    done = _repeats(path)
    if done is not None:
        # a repeat an interrupted campaign never began holds no manifest: not a run yet
        return [summary(p) for p in done if (p / disk.MANIFEST).is_file()]
    return [summary(path)]


def repeat_folders(path: Path) -> list[tuple[Path, str]] | None:
    """The repeats of a campaign measured more than once (--repeat), as many as its
    repeats.json says (read through the boundary's JSON reader: a damaged one is a UsageError
    in one line naming it), each with why it is not read, "" when it is: a repeat folder that
    is a link (to another run) is never followed. None when PATH is no campaign. `report` and
    `history add` both read a campaign through this."""
    index = path / repeats.FILE
    if not (index.is_file() or index.is_symlink()):
        return None
    found = []
    for k in range(1, _repeat_count(path) + 1):
        folder = path / repeats.folder(k)
        linked = folder.is_symlink()
        found.append((folder, f"{folder} is a link: rtlab reads no links in a run" if linked else ""))
    return found


def _repeats(path: Path) -> list[Path] | None:
    """A campaign's repeat folders (repeat_folders), the first one refused a UsageError."""
    found = repeat_folders(path)
    if found is None:
        return None
    refused = next((why for _, why in found if why), None)
    if refused is not None:
        raise UsageError(refused)
    return [folder for folder, _ in found]


def _repeat_count(path: Path) -> int:
    try:
        n = read_json(path / repeats.FILE).get("n")
    except (UnreadableFile, ValueError, AttributeError):
        n = None
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 1000:
        raise UsageError(f"{path}/{repeats.FILE} is damaged: it does not say how many repeats (1 to 1000)")
    return n


def summary(path: Path) -> Summary:
    """The summary of the run at `path`, always recomputed from its raw results; of a campaign
    measured several times (--repeat), its repeats read together."""
    done = _repeats(path)
    if done is not None:
        measured = [k for k, p in enumerate(done, start=1) if (p / disk.MANIFEST).is_file()]
        found = [summary(done[k - 1]) for k in measured]
        if not found:
            raise UsageError(f"{path} holds no repeat measured yet: run the same command again")
        combined = repeats.combine(found, path.name, measured)
        missing = [str(k) for k, p in enumerate(done, start=1) if not (p / disk.MANIFEST).is_file()]
        if missing:  # a repeat never measured is said, and the pooled campaign is not complete
            combined["status"] = "partial"
            combined["warnings"].append({
                "code": "repeat-missing", "load": "",
                "message": f"repeat {', '.join(missing)} of {len(done)} has no run.json (never measured, or "
                f"killed before it began): the figures pool {len(found)} repeats; run the same command "
                "again to measure it",
            })  # fmt: skip
        return combined
    run = RunDir.open(path)
    manifest, info, events, problems = read(run)
    note = liveness.abandoned(manifest, path)
    if note:
        problems.append(note)
    measuring = liveness.measuring(manifest)
    loads = manifest["plan"]["loads"]
    raw = {load: run.raw_load(load) for load in loads}
    return summarize(manifest, info, raw, events, problems, measuring=measuring)


def with_identity(path: Path, deadline_us: int | None = None) -> tuple[Summary, Sysinfo | None, str]:
    """A run as exporters send it: its summary (judged against the deadline, if any), what
    its target reported, and its unique id (the board folder's name, stable across exports)."""
    from rtlab.analysis.verdict import with_deadline

    run = RunDir.open(path)
    _, info, _, _ = read(run)
    try:
        manifest = run.manifest()
    except UnreadableFile as e:
        raise UsageError(f"{e}: a run without its run.json has no identity to send") from None
    uid = str(manifest.get("uid") or manifest.get("id") or path.name)
    return with_deadline(summary(path), deadline_us), info, uid
