"""A bisection on a board, over real kernel builds (make test-slow): `rtlab bisect --kernel-build
qemu-x86_64:rt --target ssh://board` on tests/test_boot.py's x86_64 kexec board (Debian's
standard kernel its default). Each revision is built by rtlab from its worktree (the small
x86_64 preset: x86_64's defconfig trimmed, PREEMPT_RT), booted by kexec, verified, measured.

The range is Debian's 6.12 source made into a git repository with five commits on it:

    0  linux-source-6.12 as Debian ships it                 good end
    1  lib/string.c: a comment                              harmless
    2  init: a panic before the first process               does not boot
    3  init: the panic removed                              the fix
    4  kernel: a periodic interrupts-off delay              the culprit (20 ms of every 50 ms)
    5  kernel/fork.c: a comment                             bad end

The search's first step is revision 2 (the nearest the middle of 0..5, the lower of two): its
kernel panics, the board reboots itself (panic=-1 of its command line) into its default kernel,
and rtlab skips the revision (git bisect's 125) with the boot's record named in its log; then
3 (good), 4 (bad), and 4 is confirmed against 3 in turns.

About 40 minutes on 2 CPUs shared with other work (the first build 12 to 18 of them, each
later revision an incremental build of under a minute; a change of kernel on the board is a
reboot back to the default and a kexec boot, under a minute each under software emulation)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import test_boot
from conftest import read_json, rtlab, wait_for
from rtlab.boot import image
from rtlab.kernel import recipe
from test_board import ssh_banner
from test_boot import KexecBoard
from test_which_kernel import DELAY

kexec_board = test_boot.kexec_board  # the board test_boot.py boots, its fixture here too

pytestmark = [
    pytest.mark.boards,
    pytest.mark.slow,
    pytest.mark.skipif(
        not recipe.DEBIAN_SOURCE.exists() or shutil.which("gcc") is None,
        reason="make test installs linux-source-6.12 and gcc",
    ),
]

PANIC = """// SPDX-License-Identifier: GPL-2.0
/* A planted boot failure for rtlab's bisection test: the kernel panics before userspace. */
#include <linux/init.h>
#include <linux/panic.h>

static int __init no_boot(void)
{
\tpanic("rtlab test: this revision does not boot");
\treturn 0;
}
late_initcall(no_boot);
"""
SUBJECTS = [
    "linux-source-6.12 as Debian ships it",
    "lib/string.c: a comment",
    "init: a panic before the first process",
    "init: the panic removed",
    "kernel: a periodic interrupts-off delay",
    "kernel/fork.c: a comment",
]
BROKEN, CULPRIT = 2, 4
RUN = ("--loads", "idle", "--duration", "10s", "--settle", "1s")


def _said(board: KexecBoard, command: str) -> str:
    """COMMAND's output over the board's console: not what the kernels booted on it left there
    before (their boot steps' lines, insmod of a module the built kernel has built in)."""
    said = board.sh(f"echo @said; {command}").split("\n")
    return "\n".join(said[said.index("@said") + 1 :])


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout


def _commit(repo: Path, subject: str) -> str:
    _git(repo, "add", "-f", "-A")  # Debian's .gitignore ignores the whole top level
    _git(repo, "commit", "-qm", subject)
    return _git(repo, "rev-parse", "HEAD").strip()


def _append(path: Path, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)


def make_series(folder: Path) -> tuple[Path, list[str]]:
    """Debian's 6.12 source in FOLDER as a git repository, then the five commits: (repo, shas)."""
    subprocess.run(["tar", "-xJf", str(recipe.DEBIAN_SOURCE), "-C", str(folder)], check=True)
    repo = next(p for p in folder.iterdir() if p.is_dir())
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "lab@example.org")
    _git(repo, "config", "user.name", "lab")
    shas = [_commit(repo, SUBJECTS[0])]
    _append(repo / "lib/string.c", "/* a comment only */\n")
    shas.append(_commit(repo, SUBJECTS[1]))
    makefile = repo / "init/Makefile"
    plain = makefile.read_text()
    (repo / "init/no_boot.c").write_text(PANIC)
    _append(makefile, "obj-y += no_boot.o\n")
    shas.append(_commit(repo, SUBJECTS[2]))
    (repo / "init/no_boot.c").unlink()
    makefile.write_text(plain)
    shas.append(_commit(repo, SUBJECTS[3]))
    (repo / "kernel/irqoff_delay.c").write_text(DELAY)
    _append(repo / "kernel/Makefile", "obj-y += irqoff_delay.o\n")
    shas.append(_commit(repo, SUBJECTS[4]))
    _append(repo / "kernel/fork.c", "/* a comment only */\n")
    shas.append(_commit(repo, SUBJECTS[5]))
    return repo, shas


@pytest.fixture(scope="module")
def series(tmp_path_factory) -> tuple[Path, list[str]]:
    return make_series(tmp_path_factory.mktemp("kernel-series"))


def test_a_bisection_on_a_board_skips_a_revision_that_does_not_boot_and_names_the_culprit(
    kexec_board, series, tmp_path
):
    board = kexec_board
    repo, shas = series
    out = tmp_path / "bisect"
    started = time.monotonic()
    try:
        done = rtlab("bisect", "--repo", str(repo), "--good", shas[0], "--bad", shas[-1],
                     "--kernel-build", "qemu-x86_64:rt", "--target", "ssh://board", *RUN,
                     "--initrd", str(board.initrd), "--boot-timeout", "240",
                     "--power-cycle", board.power_cycle(), "--out", str(out), "--format", "json",
                     env=board.env, timeout=3 * 3600)  # fmt: skip
    finally:
        # what the board's serial console said (the kernels' panics): rtlab has no console here
        console = board.guest.console
        said = "\n".join(console.tail) if console is not None else ""
        (tmp_path.parent / "board-console.log").write_text(said)
    took = time.monotonic() - started
    (tmp_path.parent / "bisect-board.log").write_text(done.stderr)
    assert done.returncode == 0, done.stderr[-6000:]
    doc = json.loads(done.stdout)
    steps = {s["index"]: s for s in doc["steps"]}
    result = doc["result"]

    # the culprit is the planted delay, confirmed against the revision before it
    assert result["kind"] == "culprit", result
    assert result["first"] == shas[CULPRIT], result
    # the revision that does not boot: visited, skipped, named with the boot's record
    assert doc["prepared"][shas[BROKEN]] == "skip", doc["prepared"]
    assert steps[BROKEN]["standing"] == "skip", steps[BROKEN]
    folder = out / steps[BROKEN]["folder"]
    log = (folder / "prepare.log").read_text()
    assert "the kernel did not boot as asked, skipped (125)" in log, log
    assert "(record: " in log, log
    record = Path(log.split("(record: ")[1].split(")")[0])
    boot = read_json(record / "boot.json")
    assert boot["verdict"] not in ("booted", "booted with warnings"), boot
    assert boot["kernel"]["path"] == str((folder / "kernel/Image").resolve()), boot["kernel"]
    assert not list(folder.glob("repeat-*")), "a kernel that did not boot was measured"
    assert f"{shas[BROKEN][:12]}" in done.stderr and "skipped, its kernel did not boot" in done.stderr

    # each measured revision ran the kernel built from it: its release names the revision
    measured = {i: s for i, s in steps.items() if s["standing"] != "skip"}
    assert set(measured) >= {0, 3, 4, 5}, sorted(measured)
    for i, step in measured.items():
        built = image.read(out / step["folder"] / "kernel" / "Image")
        assert built.release.endswith(f"-g{shas[i][:12]}"), (i, built)
        runs = sorted((out / step["folder"]).glob("repeat-*/sysinfo.json"))
        assert runs, step
        for run in runs:
            kernel = read_json(run)["kernel"]
            assert kernel["release"] == built.release, (run, kernel, built)
            assert kernel["version"].strip().endswith(built.build), (run, kernel, built)
            assert "PREEMPT_RT" in kernel["version"], kernel

    # the board is back on its default kernel, nothing of rtlab's on its command line
    assert f"is back on its default kernel {board.default_release}" in done.stderr
    wait_for(lambda: ssh_banner(board.port), 120)
    assert _said(board, "uname -r").strip() == board.default_release
    assert "rtlab.boot=" not in _said(board, "cat /proc/cmdline")

    builds = {
        i: read_json(out / s["folder"] / "kernel/build-manifest.json")["seconds"] for i, s in steps.items()
    }
    print(f"bisection on the board: {took:.0f} s; builds (s) {builds}")
    for s in doc["steps"]:
        print(f"  [{s['index']}] {s['sha'][:12]} {s['standing']} runs={s['runs']}: {s['reason'][:200]}")
    print(f"  result: {result['reason'][:300]}")
