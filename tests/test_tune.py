"""`rtlab tune` on a fake /sys and /proc tree made here: every knob available / not
available / applied / reverted byte for byte, also after a crash in the middle."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import rtlab
from rtlab.system import tune
from rtlab.system.files import Root
from rtlab.system.knobs import KNOBS

pytestmark = pytest.mark.unit  # a fake /sys and /proc: nothing measured

ONLINE = "0-3"


def board(root: Path, irqs: int = 3) -> dict[Path, bytes]:
    """A 4-CPU board's tunable files, as the kernel shows them; returns their bytes."""
    files = {
        "sys/devices/system/cpu/online": f"{ONLINE}\n",
        "proc/sys/kernel/sched_rt_runtime_us": "950000\n",
        "proc/sys/kernel/timer_migration": "1\n",
        "sys/kernel/mm/ksm/run": "1\n",
        "sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never\n",
        "proc/irq/default_smp_affinity": "f\n",
        "sys/devices/virtual/workqueue/cpumask": "f\n",
        "sys/devices/virtual/workqueue/writeback/cpumask": "f\n",
    }
    for cpu in range(4):
        files[f"sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"] = "schedutil\n"
        for state in range(3):
            files[f"sys/devices/system/cpu/cpu{cpu}/cpuidle/state{state}/disable"] = "0\n"
    for irq in range(irqs):
        files[f"proc/irq/{irq + 10}/smp_affinity_list"] = f"{ONLINE}\n"
    out = {}
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        out[path] = text.encode()
    return out


def snapshot(files: dict[Path, bytes]) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in files}


def test_every_knob_is_available_on_the_board(tmp_path):
    board(tmp_path)
    root = Root(tmp_path)
    plan = tune.cpu_plan(root, "2-3", None)
    assert plan.housekeeping == {0, 1}
    # all but the cpuset partition: a fake tree cannot act as cgroupfs (that one is tested in QEMU)
    assert [k.name for k in KNOBS if not k.available(root, plan)] == ["cpuset-partition"]


def test_cpuset_partition_plan_creates_a_group_and_undoes_by_removing_it(tmp_path):
    board(tmp_path)
    cgroup = tmp_path / "sys/fs/cgroup"
    cgroup.mkdir(parents=True)
    (cgroup / "cgroup.controllers").write_text("cpuset cpu io memory\n")
    (cgroup / "cgroup.subtree_control").write_text("cpu memory\n")
    root = Root(tmp_path)
    changes, _ = tune.plan(root, tune.cpu_plan(root, "2-3", None))
    partition = [(c.path, c.old, c.new, c.revert_value) for c in changes if c.knob == "cpuset-partition"]
    assert partition == [
        ("/sys/fs/cgroup/cgroup.subtree_control", "cpu memory", "+cpuset", "-cpuset"),
        ("/sys/fs/cgroup/rtlab-rt", "(absent)", "(create)", "(remove)"),
        ("/sys/fs/cgroup/rtlab-rt/cpuset.cpus", "(absent)", "2-3", "(nothing)"),
        ("/sys/fs/cgroup/rtlab-rt/cpuset.cpus.partition", "(absent)", "root", "(nothing)"),
    ]


def test_a_minimal_board_reports_missing_knobs_as_unavailable(tmp_path):
    # busybox board: no cpufreq, no cpuidle, no THP, no KSM
    (tmp_path / "sys/devices/system/cpu").mkdir(parents=True)
    (tmp_path / "sys/devices/system/cpu/online").write_text("0-1\n")
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/sched_rt_runtime_us").write_text("950000\n")
    root = Root(tmp_path)
    changes, unavailable = tune.plan(root, tune.cpu_plan(root, "1", None))
    assert [c.path for c in changes] == ["/proc/sys/kernel/sched_rt_runtime_us"]
    assert set(unavailable) == {
        "governor",
        "cpuidle",
        "irq-affinity",
        "default-irq-affinity",
        "workqueues",
        "timer-migration",
        "ksm",
        "thp",
        "cpuset-partition",
    }


def test_apply_then_revert_restores_every_file_byte_for_byte(tmp_path):
    before = board(tmp_path)
    root = Root(tmp_path)
    cpus = tune.cpu_plan(root, "2-3", None)
    changes, _ = tune.plan(root, cpus)
    results = tune.apply(root, cpus, changes)
    assert all(r.outcome == "applied" for r in results)
    r = tmp_path
    assert (r / "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").read_text() == "performance\n"
    assert (r / "sys/devices/system/cpu/cpu2/cpuidle/state1/disable").read_text() == "1\n"
    assert (r / "sys/devices/system/cpu/cpu2/cpuidle/state0/disable").read_text() == "0\n"  # polling kept
    assert (r / "sys/devices/system/cpu/cpu0/cpuidle/state1/disable").read_text() == "0\n"  # housekeeping
    assert (r / "proc/irq/10/smp_affinity_list").read_text() == "0-1\n"
    assert (r / "proc/irq/default_smp_affinity").read_text() == "3\n"
    assert (r / "sys/devices/virtual/workqueue/writeback/cpumask").read_text() == "3\n"
    assert (r / "proc/sys/kernel/sched_rt_runtime_us").read_text() == "-1\n"
    assert (r / "sys/kernel/mm/transparent_hugepage/enabled").read_text() == "never\n"
    tune.revert(root)
    # the THP file reads back "always [madvise] never" from the word written: same for this tree
    expected = dict(before)
    thp = tmp_path / "sys/kernel/mm/transparent_hugepage/enabled"
    expected[thp] = b"madvise\n"
    assert snapshot(before) == expected
    assert not root.exists(tune.STATE)


def test_applying_twice_keeps_the_first_saved_values(tmp_path):
    before = board(tmp_path)
    root = Root(tmp_path)
    cpus = tune.cpu_plan(root, "3", None)
    tune.apply(root, cpus, tune.plan(root, cpus)[0])
    again, _ = tune.plan(root, cpus)
    assert again == []  # nothing left to change
    tune.apply(root, cpus, again)
    tune.revert(root)
    after = snapshot(before)
    after.pop(tmp_path / "sys/kernel/mm/transparent_hugepage/enabled")
    assert after == {p: b for p, b in before.items() if p.name != "enabled"}


def test_unmovable_irq_is_reported_not_fatal(tmp_path):
    board(tmp_path)
    # An IRQ the kernel will not move reads fine and fails on write (EIO for a per-CPU
    # interrupt). A real kernel attribute that refuses writes, even from root, stands in.
    irq = tmp_path / "proc/irq/10/smp_affinity_list"
    irq.unlink()
    irq.symlink_to("/sys/devices/system/cpu/online")
    root = Root(tmp_path)
    cpus = tune.cpu_plan(root, "1", None)
    results = tune.apply(root, cpus, tune.plan(root, cpus)[0])
    outcomes = {r.change.path: r.outcome for r in results}
    assert outcomes["/proc/irq/10/smp_affinity_list"].startswith("failed")
    assert outcomes["/proc/irq/11/smp_affinity_list"] == "applied"
    assert (tmp_path / "proc/irq/11/smp_affinity_list").read_text() == "0,2-3\n"


@pytest.mark.parametrize(
    ("rt", "house", "fix"),
    [
        ("4-5", None, "not online: choose from 0-3"),
        ("0-3", None, "no housekeeping CPU would be left"),
        ("2-3", "1-2", "both RT and housekeeping"),
        ("two", None, "bad CPU list"),
    ],
)
def test_bad_cpu_lists_change_nothing(tmp_path, rt, house, fix):
    before = board(tmp_path)
    args = ["tune", "--rt-cpus", rt, "--apply"] + (["--housekeeping", house] if house else [])
    done = rtlab(*args, env={"RTLAB_ROOT": str(tmp_path)})
    assert done.returncode == 2 and fix in done.stderr
    assert snapshot(before) == before
    assert not (tmp_path / tune.STATE.lstrip("/")).exists()


def test_cli_dry_run_changes_nothing_and_revert_without_apply_is_clear(tmp_path):
    before = board(tmp_path)
    env = {"RTLAB_ROOT": str(tmp_path), "COLUMNS": "200"}
    done = rtlab("tune", "--rt-cpus", "2-3", "--dry-run", env=env)
    assert done.returncode == 0 and "would change" in done.stdout and "sched_rt_runtime_us" in done.stdout
    assert snapshot(before) == before
    done = rtlab("tune", "--revert", env=env)
    assert done.returncode == 2 and "nothing to revert" in done.stderr


def test_revert_after_a_crash_in_the_middle_of_apply(tmp_path):
    before = board(tmp_path)
    # A FIFO among the knob files: the plan's read of it is fed once (below), then the
    # apply's write blocks with no reader, so rtlab is stuck mid-apply and is killed, as a
    # crash or a power cut would stop it.
    stuck = tmp_path / "sys/kernel/mm/ksm/run"
    stuck.unlink()
    os.mkfifo(stuck)
    feeder = threading.Thread(target=lambda: stuck.write_text("1\n"), daemon=True)
    feeder.start()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rtlab", "tune", "--rt-cpus", "2-3", "--apply"],
        env={**os.environ, "RTLAB_ROOT": str(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    state = tmp_path / tune.STATE.lstrip("/")
    governor = tmp_path / "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
    try:
        # wait until it blocks on the FIFO: the governor files (written before KSM) have changed
        deadline = time.monotonic() + 30
        while governor.read_text() != "performance\n":
            assert time.monotonic() < deadline, "rtlab tune never reached the FIFO"
            time.sleep(0.05)
        time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert state.exists()  # written before anything changed
    assert (tmp_path / "sys/kernel/mm/transparent_hugepage/enabled").read_text() == "always [madvise] never\n"
    stuck.unlink()
    stuck.write_text("1\n")
    done = rtlab("tune", "--revert", env={"RTLAB_ROOT": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    after = snapshot(before)
    thp = tmp_path / "sys/kernel/mm/transparent_hugepage/enabled"
    assert after.pop(thp) in (b"always [madvise] never\n", b"madvise\n")
    assert after == {p: b for p, b in before.items() if p != thp}
    assert not state.exists()


def test_a_snapshot_answers_what_it_read_and_reads_anew_what_changed(tmp_path):
    from rtlab.system.files import Root, Snapshot

    board(tmp_path)
    root = Root(tmp_path)
    seen = Snapshot(root, ["/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor", "/sys/fs/cgroup/g/x"])
    governor = "/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor"
    (tmp_path / governor.lstrip("/")).write_text("changed behind its back\n")
    assert seen.read(governor) == "schedutil"  # as it was read
    assert seen.glob("sys/devices/system/cpu/cpu1/cpufreq/scaling_governor") == [governor]
    assert seen.glob("/sys/devices/system/cpu/cpu9/cpufreq/*") == []  # not one of its patterns: asked
    assert not seen.exists("/sys/devices/system/cpu/cpu9/cpufreq/scaling_governor")  # read: not there
    assert seen.exists("/sys/devices/system/cpu/online")  # not one of its patterns: asked
    seen.write(governor, "performance")  # a change through it: read anew
    assert seen.read(governor) == "performance"
    assert seen.read("/sys/fs/cgroup/g/x") is None
    (tmp_path / "sys/fs/cgroup").mkdir(parents=True)
    seen.mkdir("/sys/fs/cgroup/g")  # a folder made: what it holds is read anew
    (tmp_path / "sys/fs/cgroup/g/x").write_text("made\n")
    assert seen.read("/sys/fs/cgroup/g/x") == "made"
