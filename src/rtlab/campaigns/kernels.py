"""rtlab compare --target ssh://B --kernel A --kernel B: the seed's Table 5-1 on one board,
each kernel booted by rtlab (boot/ensure.py), verified, measured, and the board back on its
default kernel at the end.

With --repeat N the kernels alternate, A B B A A B ...: each repeat goes forward or backward
through them, so a board that drifts over a night (temperature, a slow leak) weighs on every
kernel alike instead of deciding the verdict. A kernel measured twice in a row is measured on
one boot. Each kernel's runs are a --repeat campaign of their own (OUT/<label>/repeat-K and
its repeats.json), so compare reads them as it reads any; OUT/kernels.json is the index, its
entries in the order measured, rewritten after each, and the same command again goes on
where an interrupted one stopped, measuring nothing twice and nothing on another kernel."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from rtlab.analysis import repeats as repeated
from rtlab.boot.ensure import Want, in_folder
from rtlab.boundary import untrusted
from rtlab.cache import sha256_of
from rtlab.campaigns import loop as campaign
from rtlab.errors import UsageError
from rtlab.names import slug
from rtlab.rundir.disk import read_index, write_json

SCHEMA = "rtlab.kernels/1"
FILE = "kernels.json"
OWN = (FILE, "boots")  # OUT's own names, never a kernel's folder (boots: each boot's record)


class Asked(TypedDict):
    """What a comparison of kernels was asked: the same command again resumes it."""

    target: str
    n: int
    sides: list[list[str]]  # [label, kernel, appended boot parameters]


class KernelRun(campaign.Entry):
    """A run's entry in kernels.json (and in its side's repeats.json): the loop's, the side and
    repeat it measured, and the board it was verified on (boot.ensure.On.fields)."""

    label: NotRequired[str]  # the step's: the loop adds them
    repeat: NotRequired[int]
    board: NotRequired[dict[str, object]]  # none on a run that failed before it was verified


class KernelsIndex(Asked):
    """OUT/kernels.json: what was asked, the sha256 of each kernel given as a file (a label's
    null: a package name) and each run's entry (the loop's: its status, reason, label and
    repeat, the board it was verified on), in the order measured."""

    schema: str
    digests: dict[str, str | None]
    runs: dict[str, KernelRun]


def digest(kernel: str) -> str | None:
    """The sha256 of the image KERNEL names (a file: an image or a .deb; a folder: the image
    rtlab kernel build left in it), else None (a package's name: what it installs is verified
    on the board)."""
    path = Path(kernel)
    if path.is_dir():
        try:
            path = in_folder(path)
        except UsageError:
            return None  # said when the kernel is booted
    if not path.is_file():
        return None
    return sha256_of(path)


def _same_kernels(out: Path, before: Mapping[str, object], now: dict[str, str | None]) -> None:
    """A comparison goes on only with the kernels it began with: a kernel rebuilt at the same
    path since would be measured under the label of another."""
    was = before.get("digests")
    if not isinstance(was, dict):
        return  # an index from before digests were kept: nothing to hold it to
    for label, sha in now.items():
        if label in was and was[label] != sha:
            now_is = f"now {sha}" if sha else "now no image there"
            raise UsageError(
                f"{untrusted.printable(label)[:60]}'s kernel changed since {out} began (sha256 "
                f"{untrusted.printable(str(was[label]))[:64]}, {now_is}): put it back to go on, "
                "or give another --out"
            )


@dataclass(frozen=True)
class Side:
    label: str
    want: Want

    @property
    def folder(self) -> str:
        return slug(self.label)


def order(sides: list[Side], n: int) -> list[tuple[Side, int]]:
    """(side, repeat) in the order measured: forward in odd repeats, backward in even ones."""
    return [(side, k) for k in range(1, n + 1) for side in (sides if k % 2 else sides[::-1])]


def run(
    sides: list[Side],
    n: int,
    target: str,
    out: Path,
    measure: Callable[[Side, Path], tuple[KernelRun, bool]],
    say: Callable[[str], None],
) -> KernelsIndex:
    """Every (side, repeat) not yet measured, in order(); `measure(side, folder)` boots,
    verifies and measures one and returns its entry and whether a signal came."""
    if len({s.folder for s in sides}) < len(sides):
        raise UsageError("two kernels have the same label: give --labels A,B")
    for side in sides:
        if side.folder in OWN:
            raise UsageError(f"--labels: {side.label} names the comparison's own {side.folder}: give another")
    index = out / FILE
    asked: Asked = {
        "target": target,
        "n": n,
        "sides": [[s.label, s.want.kernel, " ".join(s.want.append)] for s in sides],
    }
    before: dict[str, Any] = read_index(index) if index.is_file() else {}
    if before and {k: before.get(k) for k in asked} != asked:
        raise UsageError(
            f"{out} holds another comparison ({untrusted.printable(str(before.get('n')))[:20]} repeats "
            f"on {untrusted.printable(str(before.get('target')))[:200]}): "
            "give the same command, or another --out"
        )
    digests = {s.label: digest(s.want.kernel) for s in sides}
    if before:
        _same_kernels(out, before, digests)
    kept = before.get("runs", {})
    if not isinstance(kept, dict) or not all(isinstance(e, dict) for e in kept.values()):
        raise UsageError(
            f"damaged {index}: its runs are not rtlab's: move {out} aside, or give another --out"
        )
    if not before and out.exists() and any(out.iterdir()):
        raise UsageError(f"--out {out} is not empty: give a new folder for the comparison")
    out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, KernelRun] = dict(kept)
    doc: KernelsIndex = {"schema": SCHEMA, **asked, "digests": digests, "runs": runs}
    by_label = {s.label: s for s in sides}

    def save() -> None:
        write_json(index, doc)
        for side in sides:  # each side a --repeat campaign compare reads
            mine = {str(k): runs[f"{side.folder}/{repeated.folder(k)}"]
                    for k in range(1, n + 1) if f"{side.folder}/{repeated.folder(k)}" in runs}  # fmt: skip
            (out / side.folder).mkdir(exist_ok=True)
            write_json(out / side.folder / repeated.FILE, {"schema": repeated.SCHEMA, "n": n, "runs": mine})

    steps = [
        campaign.Step(f"{side.folder}/{repeated.folder(k)}", f"{side.folder}/{repeated.folder(k)}",
                      f"{side.label} (repeat {k} of {n})", side.want.said, {"label": side.label, "repeat": k})
        for side, k in order(sides, n)
    ]  # fmt: skip
    save()  # at once: a host killed during the first boot leaves a comparison to resume

    def one(step: campaign.Step, folder: Path) -> tuple[KernelRun, bool]:
        return measure(by_label[step.fields["label"]], folder)

    stands = lambda entry: entry.get("status") == "complete"  # noqa: E731
    campaign.run(campaign.Campaign(out, "command", steps, stands, save), runs, one, say)
    save()
    return doc
