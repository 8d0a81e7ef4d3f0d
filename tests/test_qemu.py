"""QEMU targets with real kernels: Debian's PREEMPT_RT and standard x86_64 kernels, a
riscv64 guest, and guests that hang or are interrupted (killed, reported, never left)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import time
from csv import DictReader
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import (
    AGENT,
    event_seen,
    processes_named,
    read_json,
    rtlab,
    run_args,
    spin_binary,
    start_rtlab,
    wait_for,
)
from rtlab.boundary import paths
from rtlab.errors import UsageError
from rtlab.plan.loads import BUILTIN
from rtlab.targets.qemu import cpio
from rtlab.targets.qemu.spec import GuestSpec

LOADS = ["idle", "cpu", "os", "memory", "storage"]
needs_x86 = pytest.mark.skipif(
    not shutil.which("qemu-system-x86_64"), reason="make test installs qemu-system-x86"
)
needs_riscv = pytest.mark.skipif(
    not shutil.which("qemu-system-riscv64"), reason="make test installs qemu-system-misc"
)


def guests() -> set[int]:
    names = ("qemu-system-x86", "qemu-system-x86_64", "qemu-system-riscv64", "qemu-system-ris")
    names += ("qemu-system-aarch64", "qemu-system-aar")  # arm64 guests (tests/test_arm64.py)
    return processes_named(*names, session=True)


@pytest.fixture(scope="module")
def rt_and_standard(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("qemu")
    runs = {}
    for kernel in ("debian-rt", "debian"):
        out = base / kernel
        # 1 s of settling: without it a guest's stressor may count no operation in the 2 s
        # measured (seen on a busy host), and the throughput ratio compared below needs both
        done = rtlab(
            "run", "--target", f"qemu:{kernel}", "--duration", "2s", "--settle", "1s", "--out", str(out)
        )
        assert done.returncode == 0, done.stderr
        runs[kernel] = out
    return runs


@pytest.mark.guests
@needs_x86
def test_rt_guest_reports_realtime_and_every_load(rt_and_standard):
    run = rt_and_standard["debian-rt"]
    info = read_json(run / "sysinfo.json")
    assert info["kernel"]["realtime"] == "1"
    assert "PREEMPT_RT" in info["kernel"]["version"]
    assert info["derived"]["preemption"]["model"] == "PREEMPT_RT"
    assert info["hostname"] == "rtlab-guest" and info["cpus"]["count"] == 2
    # the package's own config reached the guest
    assert info["config"]["options"]["CONFIG_PREEMPT_RT"] == "y"
    manifest = read_json(run / "run.json")
    assert manifest["target"]["kind"] == "qemu"
    assert manifest["target"]["accel"] in ("kvm", "tcg")
    assert manifest["target"]["kernel"]["package"].endswith("-rt-amd64")
    # Debian's bzImage unpacked on the host and started at its PVH entry (pvh.py): the
    # kernel that ran is still the package's, as its version and config above say
    assert manifest["target"]["kernel"]["entry"] == "pvh"
    summary = read_json(run / "summary.json")
    assert list(summary["loads"]) == LOADS
    assert all(
        entry["status"] == "complete" and entry["merged"]["samples"] > 0
        for entry in summary["loads"].values()
    )
    assert any(w["code"] == "emulated" for w in summary["warnings"])
    # the time axis comes back from a guest too: the guest's clock, every load placed on it
    assert summary["clock"] is not None
    for entry in summary["loads"].values():
        assert entry["phases"]["measure_start"] is not None and entry["timeline"] is not None
        assert entry["timeline"]["check"] in ("ok", "unverified")


@pytest.mark.guests
@needs_x86
def test_standard_guest_is_not_realtime(rt_and_standard):
    info = read_json(rt_and_standard["debian"] / "sysinfo.json")
    assert info["kernel"]["realtime"] is None and "/sys/kernel/realtime" in info["missing"]
    assert info["derived"]["preemption"]["realtime"] is False
    assert "PREEMPT_RT" not in info["kernel"]["version"]


@pytest.mark.guests
@needs_x86
def test_compare_rt_and_standard_and_nothing_left_running(rt_and_standard):
    done = rtlab(
        "compare",
        str(rt_and_standard["debian-rt"]),
        str(rt_and_standard["debian"]),
        "--labels",
        "RT,Standard",
        "--format",
        "md",
    )
    assert done.returncode == 0
    latency, _, cost = done.stdout.partition("### Throughput")
    rows = [line for line in latency.splitlines() if line.startswith("| ")]
    assert [row.split("|")[1].strip() for row in rows[1:]] == LOADS
    # what real time costs, beside what it buys: each stress-ng load's throughput on the
    # standard kernel as a multiple of the RT kernel's, recomputed here from both summaries
    assert "| Load | RT Ops/s | Standard Ops/s | Standard ×RT |" in cost
    csv = rtlab(
        "compare", *(str(rt_and_standard[k]) for k in ("debian-rt", "debian")), "--labels", "RT,Standard",
        "--format", "csv",
    )  # fmt: skip
    shown = {(r["label"], r["load"]): r for r in DictReader(io.StringIO(csv.stdout)) if r["cpu"] == "all"}
    rt, standard = (read_json(rt_and_standard[k] / "summary.json")["loads"] for k in ("debian-rt", "debian"))
    for load in LOADS[1:]:
        a, b = rt[load]["throughput"]["stressors"], standard[load]["throughput"]["stressors"]
        assert set(a) == set(b) == {BUILTIN[load].stress_ng[0].lstrip("-")}
        name = next(iter(a))
        if a[name]["ops_per_s"] > 0:
            expected = b[name]["ops_per_s"] / a[name]["ops_per_s"]
            assert float(shown[("Standard", load)]["ops_ratio"]) == pytest.approx(expected, abs=0.006)
        else:  # nothing done on the RT side (2 s in an emulated guest on a busy host): no multiple
            assert shown[("Standard", load)]["ops_ratio"] == "", shown[("Standard", load)]
        # a guest has memory figures and no power sensor: recorded as missing, no error
        used = standard[load]["resources"]
        assert used["mem_available_min_kb"] > 0 and used["cyclictest_hwm_kb"] > 0
        assert used["power_mw"] is None and used["missing"] == ["power_mw"]
    assert rt["idle"]["throughput"] is None
    assert guests() == set()


@pytest.mark.guests
@needs_riscv
def test_riscv64_guest(tmp_path):
    out = tmp_path / "riscv"
    done = rtlab(*run_args(out, "idle", "2s", "--target", "qemu:riscv64:debian"))
    said = done.stderr
    if done.returncode == 2 and "apt-get update failed" in said and "index files failed" in said:
        # rtlab asked three times over a minute and said so in one line: the mirror's riscv64
        # index disagrees with its Release file (seen for days on this machine's registry)
        pytest.skip(f"the Debian mirror serves a broken riscv64 index: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0, done.stderr
    info = read_json(out / "sysinfo.json")
    assert info["kernel"]["machine"] == "riscv64"
    assert read_json(out / "summary.json")["loads"]["idle"]["merged"]["samples"] > 0
    # the kernel's boot from its first line (the device tree's early console: a boot that stops
    # says where), then nothing of it below an alert once /init turned the console down
    console = (out / "console.log").read_text()
    assert "earlycon: ns16550a0 at MMIO" in console, console[:2000]
    after = console[console.index("@rtlab-ready") :].splitlines()
    assert not [line for line in after if re.match(r"\[ *\d+\.\d+\] ", line)], after
    assert guests() == set()


def initrd(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    """A user initrd whose files (programs, all of them) override rtlab's (the kernel unpacks it last)."""
    buffer = io.BytesIO()
    w = cpio.Writer(buffer)
    made: set[str] = set()
    for name, content in files.items():
        parents = list(Path(name).parents)[-2::-1]  # usr, usr/local, usr/local/bin
        for folder in map(str, parents):
            if folder not in made:
                w.directory(folder)
                made.add(folder)
        w.file(name, content.encode() if isinstance(content, str) else content, 0o755)
    w.close()
    path = tmp_path / "extra.cpio"
    path.write_bytes(buffer.getvalue())
    return path


@pytest.mark.guests
@needs_x86
def test_guest_that_never_starts_is_killed_and_reported(tmp_path):
    hang = initrd(tmp_path, {"init": "#!/bin/busybox sh\n/bin/busybox sleep 100000\n"})
    started = time.monotonic()
    done = rtlab(
        "run",
        "--target",
        f"qemu:debian,initrd={hang},boot-timeout=20",
        "--loads",
        "idle",
        "--duration",
        "2s",
        "--out",
        str(tmp_path / "run"),
    )
    assert done.returncode == 3
    assert "guest did not start (no shell within 20 s); it was stopped" in done.stderr
    assert time.monotonic() - started < 120
    assert guests() == set()


@pytest.mark.guests
@needs_x86
def test_guest_that_hangs_mid_run_is_killed_and_the_run_marked_failed(tmp_path):
    # A guest that stops answering mid-measurement, as one whose runaway real-time threads own
    # every CPU: SCHED_FIFO 99 busy loops on both, with no time left to anything else (RT
    # throttling off), so neither the agent's watchdog nor init's command loop runs again.
    # Every other cyclictest call is the real one. Before it hangs, the guest claims on its
    # console that it died: a target's line cannot speak for the host.
    spin = "/usr/local/bin/spin"
    fake = (
        '#!/bin/sh\ncase " $* " in *" -D "*) echo -1 >/proc/sys/kernel/sched_rt_runtime_us\n'
        "  echo '@rtlab guest-died t=1 reason=a word the guest made up' >/dev/console\n"
        f"  {spin} 0 100000000 0 & exec {spin} 1 100000000 0 ;; esac\n"
        'exec /usr/bin/cyclictest "$@"\n'
    )
    hang = initrd(tmp_path, {"usr/local/bin/cyclictest": fake, spin[1:]: spin_binary(tmp_path).read_bytes()})
    out = tmp_path / "run"
    done = rtlab(*run_args(out, "idle", "2s", "--target", f"qemu:debian,initrd={hang},accel=tcg,margin=120"))
    assert done.returncode == 3
    manifest = read_json(out / "run.json")
    assert manifest["status"] == "failed" and manifest["loads"]["idle"]["status"] == "failed"
    # the reason says what the host saw: a guest silent for its plan's longest phase (the 15 s
    # a load is given to stop) and ASK_SILENT_S more, that did not answer a question on its
    # console within ASK_ANSWER_S, was stopped then, before its timeout (under TCG three times
    # the whole plan and margin=120: 177 s), and no advice to wait longer
    from rtlab.plan import Plan
    from rtlab.targets.qemu import ASK_ANSWER_S, ASK_SILENT_S

    quiet = Plan(loads=("idle",), duration_s=2, settle_s=0).quiet_seconds()
    assert quiet == 15
    reason = manifest["loads"]["idle"]["reason"]
    said = re.fullmatch(
        r"the guest had not finished (\d+) s after the start and was stopped: it no longer answered on "
        r"its console, silent for its last (\d+) s \(its last words: console\.log\)",
        reason,
    )
    assert said, reason
    after, silent = int(said[1]), int(said[2])
    assert quiet + ASK_SILENT_S + ASK_ANSWER_S <= silent <= after < 177, reason
    assert f"guest-timeout: no end after {after} s, and it no longer answered" in done.stderr
    # said once in the events (the guest's own file never came, so the streamed copy stays),
    # after the guest's claim, which is kept as what the guest said
    events = (out / "events").read_text()
    assert events.count("@rtlab guest-timeout ") == 1
    assert events.index("reason=a word the guest made up") < events.index("@rtlab guest-timeout ")
    console = (out / "console.log").read_text()
    assert "@rtlab load-start t=" in console and "load=idle" in console
    assert guests() == set()


@pytest.mark.guests
@needs_x86
def test_a_guest_that_dies_keeps_the_loads_it_finished(tmp_path):
    # The second load's stress-ng crashes the guest's kernel (sysrq c): QEMU is gone, as a
    # board that lost power would be. The first load came back as soon as it ended.
    crash = '#!/bin/sh\ncase " $* " in *" --timeout "*) echo c > /proc/sysrq-trigger ;; esac\n'
    crash += 'exec /usr/bin/stress-ng "$@"\n'
    extra = initrd(tmp_path, {"usr/local/bin/stress-ng": crash})
    out = tmp_path / "run"
    done = rtlab(*run_args(out, "idle,cpu", "2s", "--target", f"qemu:debian,initrd={extra}"))
    assert done.returncode == 3, done.stderr
    summary = read_json(out / "summary.json")
    assert summary["loads"]["idle"]["status"] == "complete"
    assert summary["loads"]["idle"]["merged"]["samples"] > 0
    assert summary["loads"]["cpu"]["status"] == "failed"
    assert summary["status"] == "partial"
    assert (out / "events").read_text().count("@rtlab guest-died ") == 1
    assert guests() == set()


@pytest.mark.guests
@needs_x86
def test_interrupted_guest_run_is_partial_and_the_guest_gone(tmp_path):
    out = tmp_path / "run"
    proc = start_rtlab(*run_args(out, "idle,cpu", "60s", "--target", "qemu:debian-rt"))
    deadline = time.monotonic() + 180
    while (
        not (out / "run.json").exists() or read_json(out / "run.json")["loads"]["idle"]["status"] != "running"
    ):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.2)
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 3, stderr
    manifest = read_json(out / "run.json")
    assert manifest["status"] == "partial"
    assert manifest["loads"] == {"idle": manifest["loads"]["idle"], "cpu": {"status": "not-run"}}
    assert manifest["loads"]["idle"]["status"] == "partial"
    assert read_json(out / "loads/idle/cyclictest.json")["thread"]["0"]["cycles"] > 0
    assert guests() == set()


@pytest.mark.guests
@needs_x86
def test_ctrl_c_before_the_guests_agent_listens_still_stops_it(tmp_path):
    """The agent's command reaches the guest over its console, and the agent sets its trap and
    writes agent.pid only once it runs: a stop sent between the two finds no one to stop. Here
    that window lasts 5 s: the user's initrd puts the agent behind one that waits before a run
    and says so on the console (the host streams that line into RUN/events)."""
    wrapper = (
        '#!/bin/sh\nif [ "$1" = run ]; then echo "@rtlab waiting t=0"; sleep 5; fi\n'
        'exec sh /rtlab/shipped.sh "$@"\n'
    )
    slow = initrd(tmp_path, {"rtlab/agent.sh": wrapper, "rtlab/shipped.sh": AGENT.read_text()})
    out = tmp_path / "run"
    proc = start_rtlab(*run_args(out, "idle", "60s", "--target", f"qemu:debian,initrd={slow}"))
    try:
        wait_for(lambda: (out / "events").is_file() and "@rtlab waiting" in (out / "events").read_text(), 180)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 3, stderr
    manifest = read_json(out / "run.json")
    # the stop went again when the agent first spoke, so it never measured its 60 s: where the
    # agent had started cyclictest by then, it stopped it at once (nothing measured, or a moment)
    idle = manifest["loads"]["idle"]
    assert idle["status"] in ("failed", "not-run", "partial"), idle
    if idle["status"] == "failed":  # stopped before cyclictest began, or before it had every CPU
        reason = idle.get("reason") or ""
        # the agent's words when cyclictest had written nothing yet (agent/parts/70-run.sh)
        before = ("", "stopped before cyclictest had measured anything", "stopped before measuring")
        assert reason in before or reason.startswith(
            "stopped before every CPU was measured: cyclictest.json: thread"
        ), idle
    if "measuring_since" in idle:
        took = datetime.fromisoformat(idle["ended"]) - datetime.fromisoformat(idle["measuring_since"])
        assert took.total_seconds() < 20, idle
    assert manifest["status"] == ("partial" if idle["status"] == "partial" else "failed")
    assert guests() == set()


@pytest.mark.guests
@pytest.mark.parametrize(
    ("text", "fix"),
    [
        ("", "needs a kernel"),
        ("debian-rt,cpus=zero", "give a whole number"),
        ("debian-rt,colour=red", "unknown"),
        ("riscv64:debian-rt", "rtlab kernel build"),
        ("kernel=/nonexistent/Image", "does not exist"),
        ("debian-rt,memory=lots", "e.g. 1G"),
    ],
)
def test_bad_guest_specs(text, fix):
    with pytest.raises(UsageError, match=fix):
        GuestSpec.parse(text)
    done = rtlab("run", "--target", f"qemu:{text}", "--duration", "1s")
    assert done.returncode == 2 and fix in done.stderr


@pytest.mark.guests
def test_no_guest_process_survives_the_tests():
    assert guests() == set() or os.environ.get("RTLAB_KEEP_GUESTS")


@pytest.mark.guests
@needs_x86
def test_tune_applies_and_reverts_real_sysfs_values_in_the_guest(tmp_path):
    out = tmp_path / "tuned"
    done = rtlab(*run_args(out, "idle", "2s", "--target", "qemu:debian-rt", "--rt-cpus", "1", "--tune"))
    assert done.returncode == 0, done.stderr
    tuning = read_json(out / "tuning.json")
    applied = {c["path"]: c for c in tuning["applied"]}
    reverted = {c["path"]: c for c in tuning["reverted"]}
    runtime = "/proc/sys/kernel/sched_rt_runtime_us"
    # read back from the guest's own /proc after each step
    assert applied[runtime]["now"] == "-1" and reverted[runtime]["now"] == applied[runtime]["old"] == "950000"
    moved = [c for c in applied.values() if c["knob"] == "irq-affinity" and c["outcome"] == "applied"]
    assert moved and all(c["now"] == "0" for c in moved)  # housekeeping CPU 0
    assert all(reverted[c["path"]]["now"] == c["old"] for c in moved)
    # the timer interrupt cannot move: reported per IRQ, the run goes on
    assert applied["/proc/irq/0/smp_affinity_list"]["outcome"].startswith("failed")
    # the RT CPU became a valid cpuset partition, and the group went away again
    partition = "/sys/fs/cgroup/rtlab-rt/cpuset.cpus.partition"
    assert applied[partition]["outcome"] == "applied" and applied[partition]["now"] == "root"
    group = reverted["/sys/fs/cgroup/rtlab-rt"]
    assert group["outcome"] == "applied" and group["now"] is None
    # cyclictest measured inside the partition, on the RT CPU only
    data = read_json(out / "loads/idle/cyclictest.json")
    assert [t["cpu"] for t in data["thread"].values()] == [1]
    assert "ERROR" not in (out / "loads/idle/cyclictest.log").read_text()
    assert guests() == set()


@pytest.mark.guests
@needs_x86
def test_a_killed_host_leaves_the_events_the_guest_streamed(tmp_path):
    # SIGKILL: no handler runs. What the guest said so far was written as it came, so the
    # load it was measuring is reported as measured-and-cut, never "not-run".
    out = tmp_path / "run"
    proc = start_rtlab(*run_args(out, "idle,cpu", "60s", "--target", "qemu:debian"))
    deadline = time.monotonic() + 180
    while not event_seen(out / "events", "measure-start", load="idle"):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.2)
    proc.kill()
    proc.communicate(timeout=60)
    wait_for(lambda: guests() == set(), 30)  # the guest dies with its host
    assert read_json(out / "run.json")["loads"]["idle"]["status"] == "running"
    done = rtlab("report", str(out), "--format", "json")
    assert done.returncode == 0, done.stderr
    idle = json.loads(done.stdout)["loads"]["idle"]
    assert idle["status"] in ("partial", "failed") and idle["status"] != "not-run"
    assert "host process ended" in idle["reason"] or "host process ended" in done.stdout, idle
    assert json.loads(done.stdout)["loads"]["cpu"]["status"] == "not-run"


@pytest.mark.guests
def test_the_guest_release_is_the_first_whose_index_apt_verifies(tmp_path):
    # a release the mirror does not have is refused by apt as a damaged index is; the next is taken
    from rtlab import debian

    chosen = debian.Apt.first_verified(tmp_path, ("rtlab-no-such-release", "forky"), "riscv64")
    assert chosen.release == "forky" and chosen.updated()
    assert chosen.depends_on("linux-image-riscv64", "linux-image-").startswith("linux-image-")
    # asked again, the one verified before is taken without asking the mirror
    again = debian.Apt.first_verified(tmp_path, ("rtlab-no-such-release", "forky"), "riscv64")
    assert again.release == "forky"
    with pytest.raises(
        UsageError, match="no Debian release of rtlab-none-a, rtlab-none-b has a riscv64 index"
    ):
        debian.Apt.first_verified(tmp_path, ("rtlab-none-a", "rtlab-none-b"), "riscv64")


@pytest.mark.guests
def test_one_archive_of_several_keeps_every_file_and_the_later_one_wins(tmp_path):
    def archive(files: dict[str, bytes]) -> bytes:
        buffer = io.BytesIO()
        w = cpio.Writer(buffer)
        for name, data in files.items():
            w.file(name, data)
        w.close()
        return buffer.getvalue()

    first, second = archive({"a": b"12345", "b": b"old"}), archive({"b": b"new!", "c": b""})
    joined = cpio.joined([first, second])
    assert joined.count(b"TRAILER!!!") == 1
    # GNU cpio, with the options LAVA unpacks an initramfs with, reads the one archive whole
    (tmp_path / "x").mkdir()
    done = subprocess.run(
        ["cpio", "--extract", "--make-directories", "--unconditional", "--quiet"],
        input=joined,
        cwd=tmp_path / "x",
        capture_output=True,
    )
    assert done.returncode == 0, done.stderr
    assert {p.name: p.read_bytes() for p in (tmp_path / "x").iterdir()} == {
        "a": b"12345",
        "b": b"new!",
        "c": b"",
    }


@pytest.mark.unit
def test_a_killed_hosts_initramfs_is_removed_by_the_next_guest(tmp_path):
    """A host killed with SIGKILL cannot remove its guest's initramfs (35 MB); the next guest's
    scratch folder takes the place of every one whose process is gone, and of no live one."""
    from rtlab.rundir import liveness

    base = tmp_path / "qemu" / "scratch"
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = base / f"{gone.pid}-12345-abc"
    dead.mkdir(parents=True)
    (dead / "initrd.cpio").write_bytes(b"\0" * 1024)
    ours = liveness.scratch(base)
    assert not dead.exists()
    assert ours.is_dir() and ours.name.startswith(f"{os.getpid()}-")
    again = liveness.scratch(base)  # a second guest of this live process: the first one stays
    assert ours.is_dir() and again.is_dir() and again != ours


@pytest.mark.unit
def test_a_guest_that_overran_but_answers_is_told_to_take_longer():
    """The other side of a hung guest: one that still answered when its time ran out was only
    slow (a busy host), so the reason names the margin that gives it longer."""
    from rtlab.analysis.status import load_status
    from rtlab.rundir.events import Kind, line, parse

    said = [
        parse(line(Kind.LOAD_START, load="idle", seconds=600)),
        parse(line(Kind.GUEST_TIMEOUT, seconds=2100, margin=120, silent=7, answered="yes")),
    ]
    assert load_status("idle", [e for e in said if e is not None], has_data=False) == (
        "failed",
        "the guest had not finished 2100 s after the start and was stopped, silent for its last 7 s: "
        "give it longer with the qemu target's margin=SECONDS (now 120)",
    )


# --- the cache of Debian's kernels: whole or not at all ---------------------------------------

needs_apt = pytest.mark.skipif(
    not (shutil.which("apt-get") and shutil.which("dpkg-deb")), reason="Debian's apt and dpkg-deb"
)
RELEASE = "6.1.0-9-amd64"  # the kernel of the local archive below


def deb(folder: Path, package: str, files: dict[str, bytes], depends: str = "") -> Path:
    """A real .deb (dpkg-deb -b) of PACKAGE 1:6.1-1 holding FILES."""
    tree = folder / f"{package}.tree"
    (tree / "DEBIAN").mkdir(parents=True)
    control = (
        f"Package: {package}\nVersion: 1:6.1-1\nArchitecture: all\nMaintainer: rtlab <rtlab@example.org>\n"
    )
    control += (f"Depends: {depends}\n" if depends else "") + "Description: rtlab's test package\n"
    (tree / "DEBIAN" / "control").write_text(control)
    for name, data in files.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_bytes(data)
    out = folder / f"{package}.deb"
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-b", str(tree), str(out)], check=True, capture_output=True
    )
    shutil.rmtree(tree)
    return out


def local_debian(tmp_path: Path, image: bytes, module: bytes) -> tuple[Any, Path]:
    """apt over a Debian archive on disk (a copy: source, no network): the metapackage
    linux-image-amd64, its kernel (an image and a config) and that kernel's modules; its index
    fetched."""
    from rtlab.debian import Apt

    repo = tmp_path / "archive"
    repo.mkdir()
    debs = [
        deb(repo, "linux-image-amd64", {}, f"linux-image-{RELEASE}"),
        deb(
            repo,
            f"linux-image-{RELEASE}",
            {f"boot/vmlinuz-{RELEASE}": image, f"boot/config-{RELEASE}": b"CONFIG_PREEMPT_RT=y\n"},
            f"linux-modules-{RELEASE}",
        ),
        deb(
            repo,
            f"linux-modules-{RELEASE}",
            {f"usr/lib/modules/{RELEASE}/kernel/drivers/net/e1000.ko": module},
        ),
    ]
    stanzas = []
    for path in debs:
        control = subprocess.run(
            ["dpkg-deb", "-f", str(path)], check=True, capture_output=True, text=True
        ).stdout
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        stanzas.append(
            f"{control.strip()}\nFilename: ./{path.name}\nSize: {path.stat().st_size}\nSHA256: {digest}\n"
        )
    (repo / "Packages").write_text("\n".join(stanzas))
    arch = subprocess.run(["dpkg", "--print-architecture"], check=True, capture_output=True, text=True).stdout
    # copy: (not file:) as a mirror: apt copies each package into place instead of using it there
    source = (("local.list", f"deb [trusted=yes] copy:{repo} ./\n"),)
    apt = Apt(tmp_path / "apt", "local", arch.strip(), sources=source)
    apt.update()
    return apt, repo


@pytest.mark.unit
@needs_apt
def test_a_kernel_cut_short_in_the_cache_is_fetched_again_and_no_other_deb_unpacked(tmp_path):
    from rtlab.targets.qemu import kernels

    image, module = os.urandom(200_000), os.urandom(100_000)
    apt, repo = local_debian(tmp_path, image, module)
    cache = tmp_path / "cache"
    folder = cache / "kernels" / apt.arch / f"linux-image-{RELEASE}"
    # what a fetch cut off left: half an image written in place, no VERSION, half a package
    # in the download folder, and a package of another fetch beside it
    (folder / "root" / "boot").mkdir(parents=True)
    (folder / "root" / "boot" / f"vmlinuz-{RELEASE}").write_bytes(image[:4096])
    (folder / "debs").mkdir()
    whole_deb = (repo / f"linux-image-{RELEASE}.deb").read_bytes()
    (folder / "debs" / f"linux-image-{RELEASE}_1%3a6.1-1_all.deb").write_bytes(
        whole_deb[: len(whole_deb) // 2]
    )
    deb(folder / "debs", "linux-image-0.0-other", {"boot/vmlinuz-0.0-other": b"not this kernel"})
    path, package, _ = kernels.fetch_kernel(apt, cache, "linux-image-amd64")
    assert path.read_bytes() == image and package == f"linux-image-{RELEASE}"
    assert sorted(p.name for p in (folder / "root" / "boot").iterdir() if not p.name.startswith(".")) == [
        f"config-{RELEASE}",
        f"vmlinuz-{RELEASE}",
    ]
    # a module written in place and cut short is not served as whole: it is fetched again
    modules = folder / "modules"
    modules.mkdir()
    (modules / "e1000.ko").write_bytes(module[:1000])
    fetched = kernels.fetch_modules(apt, cache, "linux-image-amd64", ["e1000"])
    assert [p.read_bytes() for p in fetched] == [module]
    # once whole, both are taken from the cache: the archive's packages are no longer needed
    for path in repo.glob("*.deb"):
        path.unlink()
    assert kernels.fetch_kernel(apt, cache, "linux-image-amd64")[0].read_bytes() == image
    fetched = kernels.fetch_modules(apt, cache, "linux-image-amd64", ["e1000"])
    assert [p.read_bytes() for p in fetched] == [module]


@pytest.mark.unit
@needs_apt
def test_a_package_cut_short_is_refused_in_one_line_and_leaves_nothing(tmp_path):
    from rtlab.targets.qemu import kernels

    module = os.urandom(300_000)
    package = deb(tmp_path, "linux-modules-x", {"usr/lib/modules/x/kernel/e1000.ko": module})
    cut = tmp_path / "cut.deb"
    cut.write_bytes(package.read_bytes()[:-50_000])
    into = tmp_path / "modules"
    with pytest.raises(UsageError, match=r"^cut\.deb is damaged .*: run rtlab again") as refused:
        kernels._extract(cut, into, lambda name, base: base if base.endswith(".ko") else None)
    assert "\n" not in str(refused.value)
    assert list(into.iterdir()) == []  # no part of the module, under its name or another
    # asked again with the whole package, the module is there, whole
    got = kernels._extract(package, into, lambda name, base: base if base.endswith(".ko") else None)
    assert got == [into / "e1000.ko"] and (into / "e1000.ko").read_bytes() == module


@pytest.mark.unit
@needs_apt
def test_only_what_apt_fetched_this_time_is_unpacked(tmp_path):
    apt, _ = local_debian(tmp_path, b"image", b"module")
    into = tmp_path / "debs"
    other = deb(into, "linux-image-0.0-other", {"boot/vmlinuz-0.0-other": b"not this kernel"})
    assert [p.name for p in apt.download([f"linux-modules-{RELEASE}"], into)] == [
        f"linux-modules-{RELEASE}_1%3a6.1-1_all.deb"
    ]
    archives = apt.root / "var/cache/apt/archives"
    shutil.copy(other, archives / other.name)  # left by a fetch of other packages
    fetched = apt.download_with_dependencies([f"linux-image-{RELEASE}"])
    assert sorted(p.name for p in fetched) == [
        f"linux-image-{RELEASE}_1%3a6.1-1_all.deb",
        f"linux-modules-{RELEASE}_1%3a6.1-1_all.deb",
    ]
    assert all(p.parent == archives and p.stat().st_size > 0 for p in fetched)


@pytest.mark.unit
@needs_apt
def test_apt_caches_answers_are_kept_until_the_index_changes(tmp_path, monkeypatch):
    apt, repo = local_debian(tmp_path, b"image", b"module")
    assert apt.depends_on("linux-image-amd64", "linux-image-") == f"linux-image-{RELEASE}"
    answers = apt.root / "var/cache/rtlab-answers"
    [kept] = [path for folder in answers.iterdir() for path in folder.iterdir()]
    # asked again, the kept answer is the answer: no apt-cache runs (none could, here)
    path = os.environ["PATH"]
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    assert apt.depends_on("linux-image-amd64", "linux-image-") == f"linux-image-{RELEASE}"
    monkeypatch.setenv("PATH", path)
    # a link put in its place is not followed: apt-cache is asked again
    planted = tmp_path / "planted"
    planted.write_text("Depends: linux-image-planted\n")
    kept.unlink()
    kept.symlink_to(planted)
    assert apt.depends_on("linux-image-amd64", "linux-image-") == f"linux-image-{RELEASE}"
    # the archive moves on to a new kernel: the updated index gives the new answer, and the
    # answers of the old one are gone
    packages = (repo / "Packages").read_text()
    newer = "Package: linux-image-7.0\nVersion: 7.0-1\nArchitecture: all\nFilename: ./n.deb\nDescription: n\n"
    packages = packages.replace(f"Depends: linux-image-{RELEASE}", "Depends: linux-image-7.0")
    (repo / "Packages").write_text(f"{packages.rstrip()}\n\n{newer}")
    apt.update(force=True)
    assert apt.depends_on("linux-image-amd64", "linux-image-") == "linux-image-7.0"
    assert len(list(answers.iterdir())) == 1 and not kept.parent.exists()


@pytest.mark.unit
@needs_apt
def test_a_link_on_the_way_to_apt_caches_answers_is_never_followed(tmp_path):
    # the answers' folder made a link to a user's folder that holds an answer of its own where
    # the kept one would be: nothing is read, written or removed there, and the answer is
    # apt-cache's own
    apt, _ = local_debian(tmp_path, b"image", b"module")
    apt.depends_on("linux-image-amd64", "linux-image-")
    answers = apt.root / "var/cache/rtlab-answers"
    [kept] = [path for folder in answers.iterdir() for path in folder.iterdir()]
    kept.write_text("linux-image-amd64\n  Depends: linux-image-planted\n")
    users = tmp_path / "users"
    answers.rename(users)
    (users / "photos").mkdir()
    (users / "photos" / "one.jpg").write_bytes(b"kept")
    before = {p: p.read_bytes() for p in users.rglob("*") if p.is_file()}
    answers.symlink_to(users)
    for _ in range(2):
        assert apt.depends_on("linux-image-amd64", "linux-image-") == f"linux-image-{RELEASE}"
    assert {p: p.read_bytes() for p in users.rglob("*") if p.is_file()} == before
    assert len(before) == 2 and len(list(users.rglob("*"))) == 4  # two folders, two files


@pytest.fixture(scope="module")
def kept_answer(tmp_path_factory) -> tuple[Any, Path]:
    """apt over a local archive and the file its answer to `depends linux-image-amd64` is kept in."""
    apt, _ = local_debian(tmp_path_factory.mktemp("answers"), b"image", b"module")
    apt.depends_on("linux-image-amd64", "linux-image-")
    answers = apt.root / "var/cache/rtlab-answers"
    [kept] = [path for folder in answers.iterdir() for path in folder.iterdir()]
    return apt, kept


_NAMED = st.text(max_size=40).map(lambda name: f"linux-image-amd64\n  Depends: linux-image-{name}\n")


@pytest.mark.unit
@needs_apt
@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(st.text(max_size=300), _NAMED))
def test_whatever_a_kept_apt_answer_says_the_kernel_package_is_a_name(kept_answer, text):
    # the package becomes a folder of the cache (kernels/ARCH/PACKAGE): a kept answer someone
    # wrote in is read through the boundary, and one that names no package is asked anew
    apt, kept = kept_answer
    kept.write_text(text, encoding="utf-8")
    package = apt.depends_on("linux-image-amd64", "linux-image-")
    assert package.startswith("linux-image-") and paths.is_component(package), package
    first = next((n for n in re.findall(r"Depends:\s*(\S+)", text) if n.startswith("linux-image-")), None)
    if first is not None and paths.is_component(first):
        assert package == first  # a name: the cache's, as the kernel's own folder is
    else:
        assert package == f"linux-image-{RELEASE}"  # apt-cache's own answer, kept again
        assert kept.read_text() != text


# --- the guest's libraries: found inside the packages, never beside them ------------------------


def needing(folder: Path, soname: str) -> tuple[Path, Path]:
    """A program (gcc) whose DT_NEEDED names SONAME, and the library it was linked with."""
    if shutil.which("gcc") is None:
        pytest.skip("make test installs gcc and libc6-dev")
    folder.mkdir(parents=True, exist_ok=True)
    # without the C library: the program needs that one library and nothing else (it is read, never run)
    (folder / "lib.c").write_text("int f(void) { return 1; }\n")
    (folder / "main.c").write_text("int f(void);\nvoid _start(void) { f(); }\n")
    lib, program = folder / "libneeded.so", folder / "program"
    gcc = ["gcc", "-nostdlib", "-fPIC"]
    subprocess.run(
        [*gcc, "-shared", f"-Wl,-soname,{soname}", "-o", str(lib), str(folder / "lib.c")], check=True
    )
    subprocess.run([*gcc, "-o", str(program), str(folder / "main.c"), str(lib)], check=True)
    return program, lib


@pytest.mark.unit
@pytest.mark.parametrize("soname", ["../../beside/libneeded.so", "/beside/libneeded.so", ".."])
def test_a_needed_library_named_out_of_the_packages_is_refused(tmp_path, soname):
    from rtlab.errors import RunFailed
    from rtlab.targets.qemu import elfdeps

    program, lib = needing(tmp_path / "build", soname)
    stage = tmp_path / "stage"
    (stage / "usr/bin").mkdir(parents=True)
    shutil.copy(program, stage / "usr/bin/program")
    (tmp_path / "beside").mkdir()  # what the name leads to from stage/lib: a library, not the packages'
    shutil.copy(lib, tmp_path / "beside" / "libneeded.so")
    (stage / "lib").mkdir()
    with pytest.raises(
        RunFailed, match=r"^program needs a library named .*, which is no file name: refused$"
    ):
        elfdeps.closure(stage, [stage / "usr/bin/program"], ["lib"])


@pytest.mark.unit
@pytest.mark.parametrize("link", ["relative", "absolute", "folder"])
def test_a_library_link_that_leads_out_of_the_packages_is_refused(tmp_path, link):
    from rtlab.errors import RunFailed
    from rtlab.targets.qemu import elfdeps

    program, lib = needing(tmp_path / "build", "libneeded.so")
    stage = tmp_path / "stage"
    (stage / "usr/bin").mkdir(parents=True)
    shutil.copy(program, stage / "usr/bin/program")
    beside = tmp_path / "beside"
    beside.mkdir()
    shutil.copy(lib, beside / "libneeded.so")  # the host's, not the packages'
    if link == "folder":  # lib -> the host's folder: the system follows it, whatever rtlab reads
        (stage / "lib").symlink_to(beside)
    else:
        (stage / "lib").mkdir()
        target = "../../beside/libneeded.so" if link == "relative" else "/../beside/libneeded.so"
        (stage / "lib" / "libneeded.so").symlink_to(target)
    with pytest.raises(RunFailed, match=r"^lib/libneeded\.so in the guest's packages leads outside them"):
        elfdeps.closure(stage, [stage / "usr/bin/program"], ["lib"])
    # the same library inside the packages, linked as Debian links its libraries, is found
    if (stage / "lib").is_symlink():
        (stage / "lib").unlink()
    else:
        shutil.rmtree(stage / "lib")
    (stage / "usr/lib").mkdir()
    shutil.copy(lib, stage / "usr/lib/libneeded.so.1")
    (stage / "lib").symlink_to("usr/lib")
    (stage / "usr/lib/libneeded.so").symlink_to("/usr/lib/libneeded.so.1")
    found, _ = elfdeps.closure(stage, [stage / "usr/bin/program"], ["lib"])
    assert found == {"libneeded.so": (stage / "usr/lib/libneeded.so.1").resolve()}


@pytest.mark.unit
@pytest.mark.parametrize(
    ("plan", "quiet"),
    [
        ({"loads": ("idle",), "duration_s": 2, "settle_s": 0}, 15),  # the load's stop
        ({"loads": ("idle", "cpu"), "duration_s": 600, "settle_s": 5}, 602),  # one measurement
        ({"loads": ("cpu",), "duration_s": 3600, "segment_s": 60}, 62),  # a soak run's segment
        ({"loads": ("cpu",), "duration_s": 2, "probes": ("oslat", "timerlat")}, 62),  # rtla's start
        ({"loads": ("cpu",), "duration_s": 10, "settle_s": 30}, 30),  # settling
        ({"loads": ("kcompile",), "duration_s": 10, "settle_s": 3}, 903),  # preparing, then settling
        ({"loads": ("idle",), "duration_s": 10, "idle_after_boot_s": 180}, 180),  # the study's wait
        # the trace pass: 30 s, and a second for each capture's restart
        ({"loads": ("idle",), "duration_s": 10, "trace_us": 50, "trace_s": 30, "trace_spikes": 5}, 35),
    ],
)
def test_a_plans_longest_quiet_is_its_longest_phase_and_never_more_than_the_plan(plan, quiet):
    from rtlab.plan import GRACE_S, STOP_GRACE_S, Plan
    from rtlab.targets.qemu import ASK_SILENT_S

    made = Plan(**plan).validate()
    assert made.quiet_seconds() == quiet
    assert made.quiet_seconds() <= made.planned_seconds()
    # the agent's own limits end a phase at most GRACE_S past its plan, and a tool that
    # ignores its stop STOP_GRACE_S after that: within the silence the host allows past it
    assert GRACE_S + STOP_GRACE_S < ASK_SILENT_S


# A guest that stands in for QEMU behind a Console: it answers each command as init does, and
# on the run's command says what SAYS gives, as the agent's lines, one every 0.2 s.
STAND_IN = """
import sys, threading, time
says = sys.argv[1].split(",")
asked = open(sys.argv[2], "a")
print("@rtlab-ready", flush=True)
def run(ident):
    for word in says:
        if word == "hang":
            time.sleep(600)
        elif word == "pause":
            time.sleep(1.5)
        else:
            print(word.replace("_", " "), flush=True)
            time.sleep(0.2)
    print(f"@rtlab-exit {ident} 0", flush=True)
for line in sys.stdin:
    _, ident, command = line.rstrip("\\n").split(" ", 2)
    if command == "true":
        asked.write(f"{time.monotonic()}\\n")
        asked.flush()
        if "hang" not in says:
            print(f"@rtlab-exit {ident} 0", flush=True)
    else:
        threading.Thread(target=run, args=(ident,), daemon=True).start()
"""


RESULT = "@rtlab_result"


@pytest.mark.tools
@pytest.mark.parametrize(
    ("says", "status", "questions"),
    [
        # results streamed for 2.4 s: the agent speaks all the while, nobody asks
        (f"@rtlab_load-start_t=1,{RESULT}_load=idle" + ",QUJD" * 12 + f",{RESULT}-end_load=idle", 0, 0),
        # quiet for 1.7 s, longer than its longest phase: asked once, it answers and goes on
        ("@rtlab_load-start_t=1,pause,@rtlab_load-end_t=3", 0, 1),
        # quiet and deaf: found hung once asked, long before its plan's 1000 s
        ("@rtlab_load-start_t=1,hang", 124, 1),
    ],
    ids=["streaming", "slow", "hung"],
)
def test_a_guest_silent_past_its_longest_phase_is_asked_and_not_before(
    says, status, questions, tmp_path, monkeypatch
):
    import sys

    import rtlab.targets.qemu as qemu
    from rtlab.targets.qemu import QemuTarget
    from rtlab.targets.qemu.console import Console
    from rtlab.targets.qemu.spec import GuestSpec

    monkeypatch.setattr(qemu, "ASK_SILENT_S", 1.0)
    monkeypatch.setattr(qemu, "ASK_ANSWER_S", 1.0)
    script, asked = tmp_path / "guest.py", tmp_path / "asked"
    script.write_text(STAND_IN)
    target = QemuTarget(GuestSpec.parse("debian"), cache=tmp_path / "cache")
    console = target.console = Console([sys.executable, str(script), says, str(asked)])
    try:
        assert console.wait_for("@rtlab-ready", 30)
        lines: list[str] = []
        started = time.monotonic()
        got = target.run_agent(["run", "/tmp/rtlab/runs/x"], lines.append, planned_s=1000, quiet_s=0.1)
        took = time.monotonic() - started
    finally:
        target.close()
    assert got == status, lines
    assert len(asked.read_text().splitlines()) == questions if asked.exists() else questions == 0
    if "QUJD" in says:  # what it streamed came home whole
        assert target._results == {"idle": b"ABC" * 12}
    if status == 124:  # asked past 0.1 + 1 s of silence, found hung 1 s later: not at 1060 s
        assert took < 100
        assert any(line.startswith("@rtlab guest-timeout ") and "answered=no" in line for line in lines)
    assert not console.alive()


@pytest.mark.tools
def test_a_console_silent_for_longer_than_a_boot_ever_is_says_so_at_once():
    from rtlab.targets.qemu.console import BootSilent, Console

    console = Console(["sh", "-c", "echo '[    0.27] ASID allocator'; exec sleep 600"])
    try:
        started = time.monotonic()
        with pytest.raises(BootSilent, match=r"silent for 1 s while it booted"):
            console.wait_for("@rtlab-ready", 300, silent_s=1.0)
        assert time.monotonic() - started < 30  # not the 300 s of the boot's timeout
        assert console.wait_for("@rtlab-ready", 0.5) is None  # without: only the timeout ends it
    finally:
        console.close(grace=0)
    assert not console.alive()


@pytest.mark.tools
@needs_riscv
@pytest.mark.parametrize(
    ("boots", "append", "outcome"),
    [
        (["hangs", "starts"], "", "started again"),
        (["hangs", "hangs"], "", "silent for 1 s while it booted"),
        (["starts"], "", "started"),  # quiet for longer than 1 s once its /init began: no hang
        (["dies"], "", "QEMU exited with status 1"),  # not silent: not started again
        (["hangs"], "loglevel=3", "no shell within 4 s"),  # a boot made quiet: silence says nothing
        (["hangs", "hangs"], "loglevel=8", "silent for 1 s while it booted"),  # louder: still timed
    ],
)
def test_a_boot_that_hangs_silent_is_started_once_more(boots, append, outcome, tmp_path, monkeypatch):
    # A riscv64 guest now and then hangs early in its boot (its console silent after OpenSBI or
    # a few kernel lines), which cannot be had on demand: each boot here is a shell that speaks
    # as such a guest would, standing in for QEMU; the rest is the target's own.
    import dataclasses

    from rtlab.errors import RunFailed
    from rtlab.targets.qemu import QemuTarget

    said = {
        "hangs": "printf '[    0.27] ASID allocator\\033[2J\\n'; exec sleep 600",  # an escape too
        "starts": "echo '[    1.41] Run /init'; echo @rtlab-init; sleep 2; echo @rtlab-ready; read -r _",
        "dies": "echo '[    0.27] ASID allocator'; exit 1",
    }
    scripts = iter(said[b] for b in boots)
    spec = GuestSpec.parse(f"riscv64:debian,accel=tcg,boot-timeout=4,append={append}")
    spec.arch = dataclasses.replace(spec.arch, boot_silence_s=1.0)
    target = QemuTarget(spec, cache=tmp_path)
    monkeypatch.setattr(target, "_kernel", lambda: (tmp_path / "kernel", {}))
    monkeypatch.setattr(target, "_initrd", lambda kernel: tmp_path / "initrd")
    monkeypatch.setattr(target, "_argv", lambda boot, accel: ["sh", "-c", next(scripts)])
    try:
        if outcome.startswith("started"):
            assert target.started().alive()
            note = target.describe().get("boot_note")
            # where it hung, as a line of the report's (the escape made visible, not obeyed)
            last = '"[    0.27] ASID allocator\\x1b[2J"'
            hung = f"its first boot hung (silent for 1 s while it booted, its last line {last})"
            assert note == (
                f"{hung} and was stopped; it was booted once more" if "again" in outcome else None
            )
        else:  # said as any boot that did not start
            with pytest.raises(
                RunFailed, match=rf"did not start \({outcome}.*\)(.*); it was stopped"
            ) as failed:
                target.started()
            quiet = "(a kernel that boots silent is waited for with append=quiet)"
            assert (quiet in str(failed.value)) == (boots == ["hangs", "hangs"])
    finally:
        target.close()
    assert next(scripts, None) is None  # booted as many times as said, no more
    assert processes_named("sleep", "sh") == set()  # every boot's stand-in ended


@pytest.mark.unit
@pytest.mark.parametrize(
    ("append", "silence"),
    [("", 60.0), ("quiet", None), ("loglevel=3", None), ("loglevel=7", 60.0), ("loglevel=15 x", 60.0),
     ("loglevel=\u00b2", None), ("loglevel=" + "9" * 5000, None), ("loglevel", 60.0)],
)  # fmt: skip
def test_a_riscv64_boots_silence_is_timed_unless_append_quietens_it(append, silence):
    # any append= a user gives is one answer, never a traceback (int() of "²" or 5,000 digits)
    assert GuestSpec.parse(f"riscv64:debian,append={append}").boot_silence_s == silence
