"""Which change, on real kernels (make test-slow): rtlab's PREEMPT_RT build of Debian's 6.12
source, each revision or configuration built by `--kernel-build` and booted in
qemu-system-riscv64.

- bisect: a series of 8 patches on the source (a git repository made of it here), one of which
  adds a periodic interrupts-off delay (20 ms of every 50 ms, with local_irq_save: large enough
  to stand out of software emulation's own noise, whose p99 is several ms); rtlab bisect must
  name that patch.
- sweep: a lock-debugging option (CONFIG_PROVE_LOCKING, expected worse) and a harmless one
  (CONFIG_LOCALVERSION, expected same or unknown) on the same build; the table is in
  docs/which-change.md.

About 50 minutes on 2 CPUs from a clean cache (the first build about 8, later ones
incremental or a few minutes each)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import rtlab
from rtlab.kernel import recipe

pytestmark = [
    pytest.mark.guests,
    pytest.mark.slow,
    pytest.mark.skipif(
        not recipe.DEBIAN_SOURCE.exists() or shutil.which(f"{recipe.ARCHES['riscv64'].cross}gcc") is None
        or not shutil.which("qemu-system-riscv64"),
        reason="make test installs linux-source-6.12, gcc-riscv64-linux-gnu and qemu-system-misc",
    ),
]  # fmt: skip

TARGET = "qemu:kernel={kernel},arch=riscv64"
RUN = ("--loads", "idle", "--duration", "10s", "--settle", "1s")
DELAY = """// SPDX-License-Identifier: GPL-2.0
/* A planted regression for rtlab's bisection test: every 50 ms, 20 ms with interrupts off. */
#include <linux/delay.h>
#include <linux/init.h>
#include <linux/irqflags.h>
#include <linux/jiffies.h>
#include <linux/workqueue.h>

static void irqoff_delay(struct work_struct *work);
static DECLARE_DELAYED_WORK(irqoff_work, irqoff_delay);

static void irqoff_delay(struct work_struct *work)
{
\tunsigned long flags;

\tlocal_irq_save(flags);
\tmdelay(20);
\tlocal_irq_restore(flags);
\tschedule_delayed_work(&irqoff_work, msecs_to_jiffies(50));
}

static int __init irqoff_delay_init(void)
{
\tschedule_delayed_work(&irqoff_work, msecs_to_jiffies(50));
\treturn 0;
}
late_initcall(irqoff_delay_init);
"""
# harmless patches: a comment in a file the kernel compiles
HARMLESS = ["kernel/panic.c", "kernel/sys.c", "lib/string.c", "kernel/exit.c", "kernel/fork.c",
            "kernel/signal.c", "lib/sort.c"]  # fmt: skip
CULPRIT = 5  # the revision (1-based patch number) that adds the delay


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout


@pytest.fixture(scope="module")
def series(tmp_path_factory) -> tuple[Path, list[str]]:
    """Debian's 6.12 source as a git repository, then 8 patches, the fifth the delay."""
    base = tmp_path_factory.mktemp("kernel-series")
    subprocess.run(["tar", "-xJf", str(recipe.DEBIAN_SOURCE), "-C", str(base)], check=True)
    repo = next(p for p in base.iterdir() if p.is_dir())
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "lab@example.org")
    _git(repo, "config", "user.name", "lab")
    _git(repo, "add", "-f", "-A")  # Debian's .gitignore ignores the whole top level
    _git(repo, "commit", "-qm", "linux-source-6.12 as Debian ships it")
    shas = [_git(repo, "rev-parse", "HEAD").strip()]
    harmless = iter(HARMLESS)
    for patch in range(1, 9):
        if patch == CULPRIT:
            (repo / "kernel/irqoff_delay.c").write_text(DELAY)
            with open(repo / "kernel/Makefile", "a") as f:
                f.write("obj-y += irqoff_delay.o\n")
            subject = "kernel: a periodic interrupts-off delay"
        else:
            path = next(harmless)
            with open(repo / path, "a") as f:
                f.write(f"/* patch {patch}: a comment only */\n")
            subject = f"{path}: a comment"
        _git(repo, "add", "-f", "-A")  # Debian's .gitignore ignores the whole top level
        _git(repo, "commit", "-qm", subject)
        shas.append(_git(repo, "rev-parse", "HEAD").strip())
    return repo, shas


def test_bisect_names_the_patch_that_adds_an_interrupts_off_delay(series, tmp_path):
    repo, shas = series
    out = tmp_path / "bisect"
    done = rtlab("bisect", "--repo", str(repo), "--good", shas[0], "--bad", shas[-1], "--kernel-build",
                 "qemu-virt:rt", "--target", TARGET, *RUN, "--out", str(out), "--format", "json",
                 timeout=7200)  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["result"]["kind"] == "culprit", doc["result"]
    assert doc["result"]["first"] == shas[CULPRIT]
    # each measured revision ran its own kernel: the one built from that revision
    for step in doc["steps"]:
        info = json.loads((out / step["folder"] / "repeat-1" / "sysinfo.json").read_text())
        assert "PREEMPT_RT" in info["kernel"]["version"]
        assert (out / step["folder"] / "kernel" / "Image").is_file()
    (tmp_path.parent / "bisect-kernel.md").write_text((out / "report.md").read_text())


def test_sweep_calls_lock_debugging_worse(tmp_path):
    out = tmp_path / "sweep"
    done = rtlab("sweep", "--kernel-build", "qemu-virt:rt", "--target", TARGET, *RUN, "--option",
                 "CONFIG_PROVE_LOCKING=y", "--option", 'CONFIG_LOCALVERSION="-sweep"', "--out", str(out),
                 "--format", "json", timeout=7200)  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    verdicts = {r["name"]: r["verdict"] for r in doc["effects"]}
    assert verdicts["CONFIG_PROVE_LOCKING=y"] == "worse", doc["effects"]
    assert verdicts["CONFIG_LOCALVERSION=-sweep"] in ("same", "unknown"), doc["effects"]
    for row in doc["effects"]:
        config = (out / row["folder"] / "kernel" / ".config").read_text()
        name, value = row["options"][0]
        assert f"{name}={value}" in config or f'{name}="{value}"' in config
    (tmp_path.parent / "sweep-kernel.md").write_text((out / "report.md").read_text())
