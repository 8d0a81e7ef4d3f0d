"""rtlab study: a whole study from one file, as the StarFive study and the Linaro talk are
laid out: targets (kernels) x tuning stages x loads. Each target x stage is one ordinary run
in STUDY/runs/<target>/<stage>/, measured in the file's order; STUDY/study.json is rewritten
after each, so the same command again goes on where an interrupted study stopped. The end is
the comparison of every run, one column group each.

    [study]
    name = "rb5"
    loads = ["idle", "cpu60", "cpu100"]   # and any option of rtlab run, spelled as there
    duration = "10m"

    [targets]                             # label = target, in the report's order
    Real-time = "qemu:debian-rt"
    Mainline = "qemu:debian"

    [stages.none]                         # as the target is (the only stage when none is given)
    [stages.tuned]
    tune = true                           # rtlab tune for the run, reverted after
    rt-cpus = "1"
    [stages.isolated]
    boot = "isolcpus=1 nohz_full=1"       # kernel parameters: appended to a qemu target's;
                                          # a board (ssh://) is booted with them by rtlab
On a board, kernels are an axis of their own, each booted by rtlab (rtlab.boot.ensure),
verified before its cells are measured (the kernel, /proc/cmdline, what took effect), and
the board back on its default kernel at the end; cells that share a kernel and command line
share a boot:

    [kernels]                             # label = a path (from the study file's folder), a
    RT = "linux-image-rt-amd64"           # linux-image .deb, a Debian metapackage, or
    Standard = "out/mainline/bzImage"     # "default" (the board's own)
    [boot]                                # how rtlab boots the board (rtlab boot's options)
    initrd = "board.cpio"
    power-cycle = "relay-cycle vf2"
    boot-timeout = "300"
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

from rtlab.boot.ensure import DEFAULT, PACKAGE, Want, split_append
from rtlab.campaigns import loop as campaign
from rtlab.errors import UsageError
from rtlab.names import slug
from rtlab.plan.options import OPTION
from rtlab.rundir.disk import read_index, write_json
from rtlab.units import read_user_file

SCHEMA = "rtlab.study/1"
FILE = "study.json"
STANDING = ("complete", "partial")  # a run's statuses a resumed study keeps

# [study] keys given to rtlab run as its options of the same name (plan.options.OPTIONS); the rest are
# the study's.
RUN_OPTIONS = ("preset", *OPTION)
STUDY_KEYS = ("name", "loads-file", "deadline", *RUN_OPTIONS)
STAGE_KEYS = ("tune", "rt-cpus", "loads-on", "boot", "about")
BOOT_KEYS = ("initrd", "dtb", "power-cycle", "boot-timeout", "console")
_TOP = ("study", "targets", "stages", "kernels", "boot")


class Checked(TypedDict, total=False):
    """What a cell's entry keeps of the board beside how it ended (the command's measure)."""

    board: dict[str, object]  # the kernel and command line it was verified on (boot.ensure.On.fields)
    refused: list[str]  # the evidence that it does not run what the cell asks


class StudyRun(campaign.Entry, Checked):
    """A cell's entry in study.json: the loop's, the cell's target, stage and kernel (the
    step's: the loop adds them), and the board it was checked on."""

    target: NotRequired[str]
    spec: NotRequired[str]
    stage: NotRequired[str]
    kernel: NotRequired[str]  # only with [kernels]


class StudyIndex(TypedDict):
    """OUT/study.json: which study, from which file, and each cell's entry by its folder, in
    the study file's order."""

    schema: str
    study: str
    source: str
    runs: dict[str, StudyRun]


@dataclass(frozen=True)
class Stage:
    name: str
    tune: bool = False
    rt_cpus: str | None = None
    loads_on: str | None = None
    boot: str = ""  # kernel parameters the target must boot with
    about: str = ""


@dataclass(frozen=True)
class Cell:
    """One run of the study: a target in a stage."""

    target: str  # its label
    spec: str  # what rtlab run --target gets, boot parameters included
    stage: Stage
    kernel: tuple[str, str] | None = None  # (label, kernel) that rtlab boots on the board

    @property
    def folder(self) -> str:
        middle = f"{slug(self.kernel[0])}/" if self.kernel else ""
        return f"runs/{slug(self.target)}/{middle}{slug(self.stage.name)}"

    @property
    def on_board(self) -> bool:
        """Whether rtlab boots the board for this cell (a kernel, or boot parameters)."""
        return self.spec.startswith("ssh://") and (self.kernel is not None or bool(self.stage.boot))

    def want(self) -> Want:
        return Want(self.kernel[1] if self.kernel else DEFAULT, split_append(self.stage.boot))


@dataclass(frozen=True)
class Study:
    name: str
    source: Path
    options: Mapping[str, str]  # rtlab run's options, as text (RUN_OPTIONS)
    loads_file: Path | None
    deadline: str | None
    targets: tuple[tuple[str, str], ...]  # (label, target), in order
    stages: tuple[Stage, ...]
    kernels: tuple[tuple[str, str], ...] = ()  # (label, kernel) booted on a board, in order
    boot: Mapping[str, str] = field(default_factory=dict)  # BOOT_KEYS, as text

    def cells(self) -> list[Cell]:
        """Every target in every stage (and with [kernels], every kernel): a target's stages
        one after another."""
        kernels: tuple[tuple[str, str] | None, ...] = self.kernels or (None,)
        return [
            Cell(label, with_boot(spec, stage.boot), stage, kernel)
            for label, spec in self.targets
            for kernel in kernels
            for stage in self.stages
        ]

    def order(self) -> list[Cell]:
        """The cells in the order they are measured: the file's, except that cells that need
        the same boot of the same board follow one another (one boot for them all)."""
        groups: dict[tuple[str, Want | None], list[Cell]] = {}
        for cell in self.cells():
            groups.setdefault((cell.spec, cell.want() if cell.on_board else None), []).append(cell)
        return [cell for group in groups.values() for cell in group]

    def label(self, cell: Cell) -> str:
        """The cell's column in the report: only what differs between cells."""
        parts = (
            [cell.target] * (len(self.targets) > 1)
            + [cell.kernel[0] if cell.kernel else ""] * (len(self.kernels) > 1)
            + [cell.stage.name] * (len(self.stages) > 1)
        )
        return " / ".join(parts) or cell.target


def with_boot(spec: str, boot: str) -> str:
    """A target booted with extra kernel parameters: a qemu guest's are appended to its spec;
    a board (ssh://) is booted with them by rtlab (the spec unchanged); this machine cannot be."""
    if not boot or spec.startswith("ssh://"):
        return spec
    if not spec.startswith("qemu:"):
        raise UsageError(
            f"boot parameters ({boot}) go to qemu: and ssh:// targets, not {spec}: boot the board with "
            "them and give it as a target of its own, or give it as ssh://"
        )
    if "," in boot:
        raise UsageError(
            f"boot = {boot!r}: a qemu target's parameters cannot hold commas: write CPU lists as "
            "ranges (isolcpus=1-3), or use a kernel=PATH built with them"
        )
    head, sep, current = spec.partition(",append=")
    if not sep:
        return f"{spec},append={boot}"
    rest, comma, tail = current.partition(",")
    return f"{head},append={rest} {boot}{comma}{tail}"


def _text(value: Any, where: str) -> str:
    """A run option as rtlab run reads it: "10m", 99, ["idle", "cpu"] -> "idle,cpu"."""
    if isinstance(value, bool) or not isinstance(value, str | int | list):
        raise UsageError(f'{where}: give a string such as "10m", a number, or a list of load names')
    if isinstance(value, list):
        if not value or not all(isinstance(v, str) for v in value):
            raise UsageError(f'{where}: give a list of names, e.g. ["idle", "cpu"]')
        return ",".join(value)
    return str(value)


def _table(doc: dict[str, Any], key: str, source: Path) -> dict[str, Any]:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise UsageError(f"{source}: {key} must be a table, [{key}]")
    return value


def _unknown(table: Mapping[str, Any], known: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise UsageError(f"{where}: unknown key {', '.join(unknown)}: use {', '.join(known)}")


def _stage(name: str, table: Any, source: Path) -> Stage:
    where = f"{source}: [stages.{name}]"
    if not isinstance(table, dict):
        raise UsageError(f"{where} must be a table of {', '.join(STAGE_KEYS)}")
    _unknown(table, STAGE_KEYS, where)
    tune = table.get("tune", False)
    if not isinstance(tune, bool):
        raise UsageError(f"{where}: tune = true or false")
    texts = {k: table[k] for k in ("rt-cpus", "loads-on", "boot", "about") if k in table}
    for key, value in texts.items():
        if not isinstance(value, str):
            raise UsageError(f'{where}: {key} is a string, e.g. {key} = "..."')
    if texts.get("loads-on") not in (None, "housekeeping", "all"):
        raise UsageError(f'{where}: loads-on = "housekeeping" or "all"')
    if "loads-on" in texts and "rt-cpus" not in texts:
        raise UsageError(f"{where}: loads-on goes with rt-cpus, the CPUs measured")
    return Stage(
        name, tune, texts.get("rt-cpus"), texts.get("loads-on"), texts.get("boot", "").strip(),
        texts.get("about", ""),
    )  # fmt: skip


def parse(text: str, source: Path) -> Study:
    """A study file, checked whole: one line naming the fix on the first thing wrong."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{source} is not valid TOML ({e}): fix that line") from None
    _unknown(doc, _TOP, str(source))
    head = _table(doc, "study", source)
    _unknown(head, STUDY_KEYS, f"{source}: [study]")
    options = {k: _text(head[k], f"{source}: [study] {k}") for k in RUN_OPTIONS if k in head}
    targets = _table(doc, "targets", source)
    if not targets:
        raise UsageError(f'{source}: no [targets]: add e.g. [targets] then Real-time = "qemu:debian-rt"')
    for label, spec in targets.items():
        if not isinstance(spec, str) or not spec.strip():
            raise UsageError(f'{source}: [targets] {label} = "local", "ssh://..." or "qemu:..."')
    stages = tuple(_stage(n, t, source) for n, t in _table(doc, "stages", source).items())
    for names in (list(targets), [s.name for s in stages]):
        folders = [slug(n) for n in names]
        if len(set(folders)) < len(folders):
            clash = next(f for f in folders if folders.count(f) > 1)
            raise UsageError(f"{source}: two targets or two stages share the folder name {clash}: rename one")
    loads_file = head.get("loads-file")
    if loads_file is not None and not isinstance(loads_file, str):
        raise UsageError(f'{source}: loads-file = "PATH" (relative to the study file)')
    deadline = head.get("deadline")
    kernels = _table(doc, "kernels", source)
    for label, kernel in kernels.items():
        if not isinstance(kernel, str) or not kernel.strip():
            raise UsageError(f'{source}: [kernels] {label} = "PATH", "linux-image-rt-amd64" or "{DEFAULT}"')
    if kernels and not all(spec.startswith("ssh://") for spec in targets.values()):
        raise UsageError(
            f"{source}: [kernels] are booted by rtlab on a board: every target must be ssh://..., "
            "or give a qemu target its kernel as qemu:kernel=PATH"
        )
    if len({slug(k) for k in kernels}) < len(kernels):
        raise UsageError(f"{source}: two kernels share a folder name: rename one")
    boot = _table(doc, "boot", source)
    _unknown(boot, BOOT_KEYS, f"{source}: [boot]")
    boot_texts = {k: _text(v, f"{source}: [boot] {k}") for k, v in boot.items()}
    study = Study(
        name=str(head.get("name") or source.stem),
        source=source,
        options=options,
        loads_file=(source.parent / loads_file) if loads_file else None,
        deadline=_text(deadline, f"{source}: [study] deadline") if deadline is not None else None,
        targets=tuple(targets.items()),
        stages=stages or (Stage("none"),),
        kernels=tuple(
            (label, _kernel_at(kernel.strip(), source.parent)) for label, kernel in kernels.items()
        ),
        boot=boot_texts,
    )
    study.cells()  # boot parameters on a board are refused here, before anything runs
    return study


def _kernel_at(kernel: str, folder: Path) -> str:
    """A [kernels] value that is a path, as an absolute one from the study file's folder (as
    loads-file, initrd and dtb are): the same study runs, and resumes, from any folder. DEFAULT
    and a package's name (linux-image-..., with its suite: linux-image-rt-amd64/bookworm-
    backports) stay as given, unless a file of that name is beside the study file."""
    path = Path(kernel)
    if kernel == DEFAULT or path.is_absolute():
        return kernel
    if PACKAGE.fullmatch(kernel) and not kernel.endswith(".deb") and not (folder / path).exists():
        return kernel
    return os.path.abspath(folder / path)


def read(path: Path) -> Study:
    try:
        text = read_user_file(path, "study file")
    except OSError as e:
        raise UsageError(f"cannot read study file {path}: {e.strerror}: give an existing TOML file") from None
    return parse(text, path)


def run(
    study: Study,
    out: Path,
    measure: Callable[[Cell, Path], tuple[str, str, bool, Checked]],
    say: Callable[[str], None],
) -> StudyIndex:
    """Runs each cell not yet measured (in Study.order); `measure(cell, folder)` runs one and
    returns its status, why, whether a signal came (RunFailed: it failed), and what else its
    entry keeps (the kernel and command line a board was verified on). Returns the study.json it
    wrote. Complete and partial runs stand; a failed one, or one cut off, is measured again."""
    path = out / FILE
    before: dict[str, Any] = read_index(path) if path.is_file() else {}
    cells = {cell.folder: cell for cell in study.order()}
    if before and (before.get("schema") != SCHEMA or before.get("study") != study.name):
        raise UsageError(f"{out} holds another study ({before.get('study')}): choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, StudyRun] = {key: entry for key, entry in before.get("runs", {}).items()
                                 if key in cells and _measured_as_asked(cells[key], entry)}  # fmt: skip
    doc: StudyIndex = {"schema": SCHEMA, "study": study.name, "source": str(study.source), "runs": runs}

    def one(step: campaign.Step, folder: Path) -> tuple[StudyRun, bool]:
        status, reason, interrupted, extra = measure(cells[step.key], folder)
        # the rest of the cell's entry (its target, stage and kernel) comes from its step
        return cast(StudyRun, {"status": status, "reason": reason, **extra}), interrupted

    steps = [
        campaign.Step(
            key, key, study.label(cell), cell.spec,
            {"target": cell.target, "spec": cell.spec, "stage": cell.stage.name,
             **({"kernel": cell.kernel[0]} if cell.kernel else {})},
        )
        for key, cell in cells.items()
    ]  # fmt: skip
    save = lambda: write_json(path, doc)  # noqa: E731
    campaign.run(campaign.Campaign[StudyRun](out, "study", steps, _stands, save), runs, one, say)
    doc["runs"] = {c.folder: runs[c.folder] for c in study.cells() if c.folder in runs}  # the file's order
    write_json(path, doc)
    return doc


def _measured_as_asked(cell: Cell, entry: Any) -> bool:
    """Whether a resumed study's ENTRY was measured as CELL asks now: a cell on a board, on the
    kernel and boot parameters the study file names for it (a file edited between the two
    commands is measured again, its earlier run kept beside, never shown as the new kernel's)."""
    if not isinstance(entry, dict):
        return False
    if not cell.on_board or not _stands(entry):  # one that does not stand is measured again anyway
        return True
    board, want = entry.get("board"), cell.want()
    if not isinstance(board, dict) or board.get("append") != " ".join(want.append):
        return False
    # a study measured when its kernel paths were kept as written (from the folder rtlab ran
    # in): the same image if that path, from here, is the one the study file names now
    kept = board.get("kernel")
    return kept == want.kernel or (
        isinstance(kept, str)
        and not Path(kept).is_absolute()
        and Path(want.kernel).is_absolute()
        and os.path.abspath(kept) == want.kernel
    )


def _stands(entry: Mapping[str, object]) -> bool:
    return entry.get("status") in STANDING
