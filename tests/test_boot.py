"""rtlab boot: a kernel on a board by kexec, verified, and the way back.

The board is an x86_64 QEMU machine reached over SSH as tests/test_board.py makes one
(Debian's standard kernel, rtlab's busybox initramfs, Debian's dropbear), with three things
a board has and that guest has not: kexec-tools, a host key that survives a reboot (made once
on the host and carried in the initrd), and a reset that reboots instead of ending QEMU, with
the monitor on a socket as the power switch. It boots once, for the tests of this file.

The unit tests below it judge verify's logic, kexec's command line and the record."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import TARGET_DIR, read_json, rtlab, start_rtlab, wait_for
from rtlab import debian
from rtlab.boot import image, kexec, record, verify
from rtlab.boot.image import KernelVersion
from rtlab.cache import cache_dir
from rtlab.targets.qemu import QemuTarget, cpio, initramfs, kernels, machines
from rtlab.targets.qemu.spec import GuestSpec
from test_board import HOST_KEY, Board, free_port, ssh_banner

pytestmark = pytest.mark.boards

# about 6 minutes together (the board's boot, three kexec boots, a reboot, two power cycles; the
# copies to the board go at ~1.5 MB/s through QEMU's user network): more than make test's budget
BOARD = pytest.mark.slow
DEFAULT = "debian"  # the board's own kernel: Debian's standard one
RT = "linux-image-rt-amd64"  # the kernel rtlab boots on it


class ResettableGuest(QemuTarget):
    """The guest as a board: a reboot resets the machine (no -no-reboot) and the monitor
    listens on MONITOR, through which the tests' power switch resets it."""

    monitor: Path

    def _argv(self, boot, accel):  # type: ignore[no-untyped-def]
        argv = [a for a in super()._argv(boot, accel) if a != "-no-reboot"]
        at = argv.index("-monitor")
        argv[at + 1] = f"unix:{self.monitor},server,nowait"
        return argv


def _step(modules: list[str]) -> str:
    """init.sh's boot.d step: the network driver of the kernel that runs (each kernel has its
    own build of it), the network, and dropbear with the host key the initrd carries."""
    return "\n".join(
        [
            "#!/bin/sh",
            *(f'insmod "/board/$(uname -r)/{name}.ko"' for name in modules),
            "ip link set eth0 up",
            "ip addr add 10.0.2.15/24 dev eth0",
            "ip route add default via 10.0.2.2",
            "hostname board",
            f"dropbear -s -r {HOST_KEY} -p 22 -P /run/dropbear.pid",
            "",
        ]
    )


def _host_key(stage: Path, server: Path) -> tuple[bytes, str]:
    """A dropbear host key made on the host by the board's own dropbearkey: (key, public line)."""
    stage.mkdir()
    subprocess.run(["cpio", "-idm", "--quiet"], input=server.read_bytes(), cwd=stage, check=True)
    env = {**os.environ, "LD_LIBRARY_PATH": str(stage / "usr/lib/x86_64-linux-gnu")}
    key = stage / "host_key"
    subprocess.run([str(stage / "usr/bin/dropbearkey"), "-t", "ed25519", "-f", str(key)], env=env,
                   check=True, capture_output=True)  # fmt: skip
    public = subprocess.run([str(stage / "usr/bin/dropbearkey"), "-y", "-f", str(key)], env=env,
                            check=True, capture_output=True, text=True).stdout  # fmt: skip
    line = next(w for w in public.split("\n") if w.startswith("ssh-"))
    return key.read_bytes(), " ".join(line.split()[:2])


def _board_archive(
    folder: Path, public_key: str, extra_modules: tuple[str, ...] = (), extra_step: str = ""
) -> tuple[Path, str, Path]:
    """(the board's initrd, its host key's public line, the RT kernel image); EXTRA_MODULES of
    each kernel beside the NIC's, and EXTRA_STEP run before the network's (a disk board's /boot)."""
    cache = cache_dir()
    arch = machines.arch("x86_64")
    apt = debian.Apt.first_verified(cache, arch.releases, arch.debian, arch.suites)
    where = cache / "initramfs" / f"{apt.release}-{arch.debian}"
    tools = {"dropbear": "usr/sbin/dropbear", "dropbearkey": "usr/bin/dropbearkey"}
    server = initramfs.build_tools(apt, where / "dropbear.cpio", ["dropbear-bin"], tools)
    kexec_tools = initramfs.build_tools(
        apt, where / "kexec.cpio", ["kexec-tools"], {"kexec": "usr/sbin/kexec"}
    )
    key, public = _host_key(folder / "dropbear", server)
    rt_image, _, _ = kernels.fetch_kernel(apt, cache, RT)
    buffer = io.BytesIO()
    w = cpio.Writer(buffer)
    for name in ("etc", "etc/rtlab", "etc/rtlab/boot.d", "etc/dropbear", "board"):
        w.directory(name)
    w.directory("root/.ssh", 0o700)
    w.file("root/.ssh/authorized_keys", public_key.encode(), 0o600)
    w.file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n")
    w.file("etc/group", b"root:x:0:\n")
    w.file(HOST_KEY.lstrip("/"), key, 0o600)
    for meta in (machines.named_kernel(DEFAULT)[1], RT):
        drivers = kernels.fetch_modules(apt, cache, meta, [*arch.nic_modules, *extra_modules])
        release = kernels.fetch_kernel(apt, cache, meta)[0].name.removeprefix("vmlinuz-")
        w.directory(f"board/{release}")
        for driver in drivers:
            w.file(f"board/{release}/{driver.name}", driver.read_bytes())
    w.file("etc/rtlab/boot.d/50-board", _step(list(arch.nic_modules)).encode(), 0o755)
    if extra_step:
        w.file("etc/rtlab/boot.d/40-board", extra_step.encode(), 0o755)
    w.close()
    out = folder / "board.cpio"
    out.write_bytes(server.read_bytes() + kexec_tools.read_bytes() + buffer.getvalue())
    return out, public, rt_image


class KexecBoard(Board):
    monitor: Path
    initrd: Path  # the whole initramfs the board boots (what a kexec'd kernel is given)
    rt_image: Path
    default_release: str

    @property
    def env(self) -> dict[str, str]:
        # the tests' own HOME, and the cache the fixture filled (a package is not fetched twice)
        return {**super().env, "RTLAB_CACHE": str(cache_dir())}

    def sh(self, command: str, timeout: float = 60) -> str:
        """As Board.sh; what a rebooting board prints on the same console (the kernel's
        messages, /init's ready line) is no output of the command."""
        said = super().sh(command, timeout).split("\n")
        return "\n".join(line for line in said if not re.match(r"@rtlab-ready|\[ *\d+\.\d+\] ", line))

    def power_cycle(self) -> str:
        """A command that resets the machine through QEMU's monitor: the board's power switch."""
        code = (
            "import socket,sys,time; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
            "s.sendall(b'system_reset\\n'); time.sleep(0.5)"
        )
        return f"{sys.executable} -c {code!r} {self.monitor}"


@contextlib.contextmanager
def running_kexec_board(folder: Path) -> Iterator[KexecBoard]:
    """The x86_64 kexec board booted, its files in FOLDER, for as long as the block lasts (the
    session's fixture, and bench/bench_boot.py)."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / "key")], check=True)
    archive, public, rt_image = _board_archive(folder, (folder / "key.pub").read_text())
    port = free_port()
    guest = ResettableGuest(GuestSpec.parse(f"{DEFAULT},cpus=2,memory=2G,initrd={archive},ssh={port}"))
    guest.monitor = folder / "monitor.sock"
    try:
        board = KexecBoard(guest, port, folder / "home", "PREEMPT_DYNAMIC")
        guest.started()
        wait_for(lambda: ssh_banner(port), 120)
        board.trust(public, folder / "key")
        assert guest.boot is not None
        board.monitor, board.initrd, board.rt_image = guest.monitor, guest.boot.initrd, rt_image
        board.default_release = board.sh("uname -r").strip()
        yield board
    finally:
        guest.close()


# the board is booted once for the file that uses it and ends with it: a guest left running
# until the session ends would be counted by the files that check that no guest survives them
@pytest.fixture(scope="module")
def kexec_board(tmp_path_factory) -> Iterator[KexecBoard]:
    arch = machines.arch("x86_64")
    if not shutil.which(arch.qemu) or not shutil.which("ssh-keygen") or not shutil.which("cpio"):
        pytest.skip(f"make test installs {machines.QEMU_PACKAGES['x86_64']}, openssh-client and cpio")
    with running_kexec_board(tmp_path_factory.mktemp("kexec-board")) as board:
        yield board


def _uname(board: KexecBoard) -> str:
    """The board's kernel, asked over its console (the bench's own line), once it answers."""
    wait_for(lambda: ssh_banner(board.port), 120)
    return board.sh("uname -r").strip()


@BOARD
def test_a_dry_run_prints_every_step_and_changes_nothing(kexec_board, tmp_path):
    board = kexec_board
    done = rtlab("boot", "--target", "ssh://board", str(board.rt_image), "--initrd", str(board.initrd),
                 "--append", "isolcpus=1 nohz_full=1", "--dry-run", "--out", str(tmp_path / "b"),
                 env=board.env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "would load: kexec -l" in done.stderr and "'isolcpus=1" not in done.stderr, done.stderr
    assert "nohz_full=1 rtlab.boot=" in done.stderr, done.stderr
    assert not (tmp_path / "b").exists()
    assert board.sh(f"test -e {TARGET_DIR}/boot && echo left || echo none").strip() == "none"
    assert _uname(board) == board.default_release


@BOARD
def test_check_names_how_the_board_can_boot(kexec_board):
    done = rtlab("check", "--target", "ssh://board", "--format", "json", env=kexec_board.env)
    findings = {f["item"]: f for f in json.loads(done.stdout)["findings"]}
    assert findings["boot methods"]["found"] == "kexec", findings["boot methods"]
    assert findings["boot methods"]["status"] == "ok"


def test_check_says_when_a_system_has_no_way_to_boot_a_kernel():
    from rtlab.system import audit

    none = audit.audit({"platform": {"boot_methods": ""}})
    said = next(f for f in none if f.item == "boot methods")
    assert said.found == "none" and said.status == "info" and "kexec-tools" in said.advice
    both = {"platform": {"boot_methods": "grubenv extlinux:/boot/extlinux/extlinux.conf"}}
    grub = next(f for f in audit.audit(both) if f.item == "boot methods")
    assert grub.found == "grubenv, extlinux:/boot/extlinux/extlinux.conf"
    assert not [f for f in audit.audit({}) if f.item == "boot methods"]  # an older agent: nothing said


@BOARD
def test_debian_rt_kernel_by_kexec_verified_then_back(kexec_board, tmp_path):
    board = kexec_board
    out = tmp_path / "rt"
    # KERNEL as a Debian package: fetched for the board's architecture, as the QEMU targets fetch it
    done = rtlab("boot", "--target", "ssh://board", RT, "--initrd", str(board.initrd),
                 "--append", "isolcpus=1 nohz_full=1", "--boot-timeout", "180", "--out", str(out),
                 env=board.env, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("booted"), done.stdout
    rt = image.read(board.rt_image)
    found = read_json(out / "boot.json")
    assert found["method"] == "kexec" and found["verdict"] in verify.GOOD, found
    assert found["kernel"]["path"] == str(board.rt_image) and found["kernel"]["package"].startswith(
        "linux-image-"
    )
    assert found["found"]["release"] == rt.release and "PREEMPT_RT" in found["found"]["version"]
    assert found["found"]["isolated"] == "1" and found["found"]["nohz_full"] == "1", found
    assert "isolcpus=1" in found["cmdline_found"].split() and "nohz_full=1" in found["cmdline_found"].split()
    assert [s["state"] for s in found["states"]] == ["lock", "install", "load", "execute", "wait", "verify"]
    assert f"{TARGET_DIR}/boot/" in found["files_added"][0] and len(found["files_added"]) == 3, found
    assert (out / "dmesg.txt").stat().st_size > 0
    # the board, asked over its console: the RT kernel, CPU 1 isolated
    assert _uname(board) == rt.release
    assert "PREEMPT_RT" in board.sh("cat /proc/version")
    assert board.sh("cat /sys/devices/system/cpu/isolated").strip() == "1"
    # a run in the meantime would find the lock free: the boot released it
    assert board.sh(f"test -e {TARGET_DIR}/lock && echo held || echo free").strip() == "free"
    phases = [(s["state"], s.get("seconds")) for s in found["states"]]
    print(f"kexec boot cycle: {found['seconds']} s, states {phases}")

    _back_to_default(board, "back on its default kernel")
    assert "rtlab.boot=" not in board.sh("cat /proc/cmdline")


@BOARD
def test_ctrl_c_while_installing_leaves_the_board_on_its_kernel_and_says_which(kexec_board, tmp_path):
    """A Ctrl-C while the kernel is copied undoes what the boot did; a second one meanwhile waits
    for that, said so. The undo is two commands on the board, over in a fraction of a second on
    an idle host and seconds on a busy one: the second Ctrl-C comes 0.3 s after the first, and
    sooner in a try of its own when the undo was over by then (its message then unsaid)."""
    board = kexec_board
    for n, gap in enumerate((0.3, 0.1, 0.03)):
        returncode, stderr = _stopped_while_installing(board, tmp_path / f"stopped-{n}", gap)
        if returncode == 3 and "putting right what the boot changed on ssh://board: rtlab stops" in stderr:
            said = [line for line in stderr.splitlines() if line.startswith("rtlab:")]
            stopped = f"rtlab: stopped: the kernel did not change: ssh://board runs {board.default_release}"
            assert said == [stopped], stderr
            return
        # the undo was over: the second Ctrl-C came as rtlab said so (3), or as it ended (130)
        assert returncode in (3, 130), stderr
    raise AssertionError(f"a second Ctrl-C, even 0.03 s after the first, came after the undo: {stderr}")


def _stopped_while_installing(board, out: Path, gap: float) -> tuple[int, str]:
    """rtlab boot stopped by two Ctrl-C, GAP seconds apart, once it installs: the board left on
    its kernel, its lock and rtlab's folder gone; rtlab's exit status and what it said."""
    proc = start_rtlab("boot", "--target", "ssh://board", str(board.rt_image), "--initrd", str(board.initrd),
                       "--out", str(out), env=board.env)  # fmt: skip

    def installing() -> bool:
        states = json.loads((out / "boot.json").read_text())["states"] if (out / "boot.json").exists() else []
        return bool(states) and states[-1]["state"] == "install"

    wait_for(installing, 120)
    proc.send_signal(signal.SIGINT)
    time.sleep(gap)  # a second Ctrl-C while what the boot changed is undone: it waits for that
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    found = read_json(out / "boot.json")
    assert found["verdict"] == verify.STOPPED and "undone: the lock released" in found["evidence"], found
    assert _uname(board) == board.default_release
    left = board.sh(f"ls {TARGET_DIR}/boot 2>/dev/null; test -e {TARGET_DIR}/lock && echo held || echo free")
    assert left.strip() == "free", (left, found)
    return proc.returncode, stderr


@BOARD
def test_a_kernel_that_panics_comes_back_through_the_power_cycle(kexec_board, tmp_path):
    board = kexec_board
    out = tmp_path / "panic"
    # no init in the initramfs and no root: the kernel panics, and panic=0 keeps it there
    done = rtlab("boot", "--target", "ssh://board", str(board.rt_image), "--initrd", str(board.initrd),
                 "--append", "panic=0 rdinit=/nonexistent", "--boot-timeout", "40",
                 "--power-cycle", board.power_cycle(),
                 "--console", "echo 'Kernel panic - not syncing: No working init found'; sleep 600",
                 "--out", str(out), env=board.env, timeout=600)  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("rtlab:")]
    assert len(said) == 1 and said[0].startswith("rtlab: did not boot: no answer over SSH"), done.stderr
    found = read_json(out / "boot.json")
    assert found["verdict"] == verify.DID_NOT_BOOT, found
    evidence = " ".join(found["evidence"])
    assert f"back on its default kernel {board.default_release}" in evidence, evidence
    assert "Kernel panic - not syncing" in evidence and "Kernel panic" in (out / "console.log").read_text()
    assert "power-cycle" in [s["state"] for s in found["states"]]
    # usable: on its default kernel, over SSH as over its console, nothing of rtlab's left
    _back_to_default(board, "not a kernel rtlab booted")


@BOARD
def test_a_kernel_that_hangs_without_a_power_switch_then_back_with_one(kexec_board, tmp_path):
    board = kexec_board
    out = tmp_path / "hang"
    done = rtlab("boot", "--target", "ssh://board", str(board.rt_image), "--initrd", str(board.initrd),
                 "--append", "panic=0 rdinit=/nonexistent", "--boot-timeout", "30", "--out", str(out),
                 env=board.env, timeout=600)  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert "give --power-cycle CMD to reset it" in done.stderr, done.stderr
    assert read_json(out / "boot.json")["verdict"] == verify.DID_NOT_BOOT
    refused = rtlab("boot", "--target", "ssh://board", "--back", env=board.env, timeout=300)
    assert refused.returncode == 2 and "does not answer" in refused.stderr, refused.stderr
    _back_to_default(board, "not a kernel rtlab booted", "--power-cycle", board.power_cycle())


def _back_to_default(board, said: str, *extra: str) -> None:
    """`rtlab boot --back`: the board on its default kernel, rtlab's folder gone."""
    back = rtlab("boot", "--target", "ssh://board", "--back", "--boot-timeout", "180", *extra,
                 env=board.env, timeout=600)  # fmt: skip
    assert back.returncode == 0 and said in back.stdout, back.stdout + back.stderr
    assert _uname(board) == board.default_release
    assert board.sh(f"test -e {TARGET_DIR}/boot && echo left || echo gone").strip() == "gone"


# --- the parts, without a board ---------------------------------------------------------


RT_VERSION = KernelVersion("6.1.0-50-rt-amd64", "#1 SMP PREEMPT_RT Debian 6.1.176-1 (2026-07-02)")
PROC_VERSION = (
    "Linux version 6.1.0-50-rt-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14) 12.2.0, "
    "GNU ld (GNU Binutils for Debian) 2.40) #1 SMP PREEMPT_RT Debian 6.1.176-1 (2026-07-02)"
)


def _found(**changes: object) -> verify.Found:
    found = verify.Found(
        uname_r="6.1.0-50-rt-amd64\n", proc_version=PROC_VERSION,
        cmdline="console=ttyS0 isolcpus=1 nohz_full=1",
        isolated="1\n", nohz_full="1\n", dmesg="[    0.000000] Linux version ...\n",
    )  # fmt: skip
    for key, value in changes.items():
        setattr(found, key, value)
    return found


def test_verify_tells_each_outcome_apart():
    asked = ["isolcpus=1", "nohz_full=1"]
    assert verify.judge(RT_VERSION, asked, _found()).verdict == verify.BOOTED
    other = verify.judge(RT_VERSION, asked, _found(uname_r="6.1.0-50-amd64"))
    assert other.verdict == verify.ANOTHER_KERNEL and "6.1.0-50-amd64" in other.lines[0]
    # the same release built again is another kernel too: its version string differs
    rebuilt = verify.judge(RT_VERSION, asked, _found(proc_version=PROC_VERSION.replace("#1 ", "#2 ")))
    assert rebuilt.verdict == verify.ANOTHER_KERNEL
    missing = verify.judge(RT_VERSION, asked, _found(cmdline="console=ttyS0 isolcpus=1"))
    assert missing.verdict == verify.NOT_TAKEN and any("nohz_full=1 is not in" in x for x in missing.lines)
    ignored = verify.judge(RT_VERSION, asked, _found(isolated="\n"))
    assert ignored.verdict == verify.NOT_TAKEN and any("did not take effect" in x for x in ignored.lines)
    unknown = verify.judge(RT_VERSION, asked, _found(nohz_full=None))
    assert unknown.verdict == verify.NOT_TAKEN
    ranged = verify.judge(RT_VERSION, ["isolcpus=domain,managed_irq,1-3"],
                          _found(cmdline="isolcpus=domain,managed_irq,1-3", isolated="1-3"))  # fmt: skip
    assert ranged.verdict == verify.BOOTED, ranged


def test_a_panic_on_the_console_is_seen_only_after_the_kernel_was_sent(tmp_path):
    """The wait for a new boot ends on a panic the console shows after the kernel was sent; one
    the board said before (the old kernel's console, an echo) is not this boot's."""
    from rtlab.boot.board import ConsoleCapture

    log = tmp_path / "console"
    script = tmp_path / "uart"
    script.write_text(
        "echo 'Kernel panic - not syncing: from before'\n"
        "while [ ! -e go ]; do sleep 0.05; done\n"
        "printf 'Run /init\\r\\n[    1.665520] Kernel panic - not syncing: \\033[1mNo init\\r\\n'\n"
        "sleep 60\n"
    )
    console = ConsoleCapture(f"cd {tmp_path} && sh {script}", log)
    try:
        wait_for(lambda: "from before" in log.read_text(), 10)
        sent = console.size()
        assert console.panic(sent) is None and console.panic(0) == "Kernel panic - not syncing: from before"
        (tmp_path / "go").touch()
        wait_for(lambda: console.panic(sent) is not None, 10)
        shown = console.panic(sent)  # its escape made visible
        assert shown == "Kernel panic - not syncing: ?[1mNo init", shown
    finally:
        console.stop()
    assert ConsoleCapture(None, tmp_path / "none").panic(0) is None  # no --console: nothing to see


_CONSOLE_BYTES = st.lists(
    st.one_of(
        st.binary(max_size=300),
        st.sampled_from([b"Kernel panic - not syncing: ", b"\r\n", b"\n", b"\x1b[1m", "\u2028".encode(),
                         b"[    1.665520] ", b"\xff\xfe", b"A" * 400]),
    ),
    max_size=12,
).map(b"".join)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(before=_CONSOLE_BYTES, after=_CONSOLE_BYTES)
def test_any_console_bytes_give_no_panic_or_one_bounded_printable_line(tmp_path_factory, before, after):
    """The console is the board's, byte for byte: whatever it says, the panic reader answers
    None or one line of at most 200 visible characters that begins with the kernel's words, and
    it never answers from what the console said before the kernel was sent."""
    from rtlab.boot.board import ConsoleCapture

    log = tmp_path_factory.mktemp("console") / "log"
    console = ConsoleCapture("sleep 60", log)
    try:
        with log.open("ab") as f:
            f.write(before)
        sent = console.size()
        assert console.panic(sent) is None
        with log.open("ab") as f:
            f.write(after)
        found = console.panic(sent)
    finally:
        console.stop()
    if found is None:
        assert b"Kernel panic - not syncing" not in after.replace(b"\r", b"")
        return
    assert found.startswith("Kernel panic - not syncing") and len(found) <= 200, found
    # no control, format character or line separator left (a no-break space or a character
    # Unicode has not assigned yet shows as itself: str.isprintable() would refuse those too)
    assert not {unicodedata.category(c) for c in found} & {"Cc", "Cf", "Zl", "Zp"}, found


def test_verify_names_each_splat_and_only_fails_on_them_when_asked():
    dmesg = "\n".join([
        "[    1.0] ok",
        "[    2.0] WARNING: CPU: 1 PID: 1 at kernel/sched/core.c:100 f+0x1/0x2",
        "[    3.0] BUG: sleeping function called from invalid context at kernel/locking/spinlock_rt.c:46",
        "[    4.0] WARNING: possible circular locking dependency detected",
        "[    5.0] Oops: 0000 [#1] PREEMPT_RT SMP",
        "[    6.0] \x1b[31m BUG: unable to handle page fault",
    ])  # fmt: skip
    judged = verify.judge(RT_VERSION, [], _found(dmesg=dmesg))
    assert judged.verdict == verify.WITH_WARNINGS
    assert [s.split(":")[0] for s in judged.splats] == ["WARNING", "BUG", "lockdep", "Oops", "BUG"]
    assert all("\x1b" not in s for s in judged.splats)
    assert not verify.failed(judged, fail_on_warnings=False)
    assert verify.failed(judged, fail_on_warnings=True)
    assert verify.failed(verify.Verdict(verify.DID_NOT_BOOT), fail_on_warnings=False)


def test_cpu_lists_as_the_kernel_writes_them():
    assert verify.cpu_set("0-3,6") == {0, 1, 2, 3, 6}
    assert verify.cpu_set("\n") == set()
    assert verify.cpu_set("nohz,domain,2") == {2}
    for bad in ("3-1", "x", "1-99999"):
        with pytest.raises(ValueError):
            verify.cpu_set(bad)


def test_the_new_command_line_is_the_running_one_without_the_bootloaders_words():
    running = (
        "BOOT_IMAGE=/boot/vmlinuz-6.1 root=UUID=ab ro quiet panic=10 initrd=/boot/initrd.img console=ttyS0"
    )
    new = kexec.new_cmdline(running, ["isolcpus=1", "panic=0", "console=tty0"], "boot-1")
    assert new == "root=UUID=ab ro quiet console=ttyS0 isolcpus=1 panic=0 console=tty0 rtlab.boot=boot-1"
    assert kexec.new_cmdline(new, [], "boot-2").count("rtlab.boot=") == 1


def test_every_value_reaching_the_board_is_quoted():
    files = kexec.Files("/tmp/rt lab", "boot-$(reboot)")
    load = kexec.load(files.path("kernel"), "root=/dev/sda 'x' $(reboot)", files.path("initrd"))
    assert load == (
        "kexec -l '/tmp/rt lab/boot/boot-$(reboot)/kernel' --initrd '/tmp/rt lab/boot/boot-$(reboot)/initrd' "
        "--append 'root=/dev/sda '\"'\"'x'\"'\"' $(reboot)'"
    )
    assert files.make() == "mkdir -p '/tmp/rt lab/boot' && mkdir '/tmp/rt lab/boot/boot-$(reboot)'"


def test_the_boards_report_read_by_section():
    text = "@@uname\n6.1\n@@cmdline\nro quiet\n@@isolated\n@none\n@@dmesg\nline\n@@uname\nspoofed\n"
    found = kexec.parse_report(text)
    assert found == {
        "uname": "6.1",
        "cmdline": "ro quiet",
        "isolated": "@none",
        "dmesg": "line\n@@uname\nspoofed",
    }
    flood = kexec.parse_report("@@cmdline\n" + "x" * (1 << 22) + "\n@@dmesg\n" + "y" * (1 << 22))
    assert len(flood["cmdline"]) == kexec.SECTION_BYTES and len(flood["dmesg"]) == kexec.DMESG_BYTES


def test_the_lock_is_the_measurements_and_a_second_boot_is_refused(tmp_path):
    base = str(tmp_path / "rt lab")
    first = subprocess.run(["sh", "-c", kexec.lock(base, "boot-1", 60)], capture_output=True, text=True)
    assert first.stdout.startswith("locked "), first
    owner = (tmp_path / "rt lab/lock/owner").read_text().split()
    assert owner[0] == first.stdout.split()[1] and owner[2] == "boot-1"  # "PID START DIR", as the agent's
    second = subprocess.run(["sh", "-c", kexec.lock(base, "boot-2", 60)], capture_output=True, text=True)
    assert second.returncode == 4 and second.stdout.startswith(f"busy {owner[0]} boot-1"), second
    subprocess.run(["sh", "-c", kexec.unlock(base, "boot-2")], check=True)  # another's: kept
    assert (tmp_path / "rt lab/lock").is_dir()
    subprocess.run(["sh", "-c", kexec.unlock(base, "boot-1")], check=True)
    assert not (tmp_path / "rt lab/lock").exists()
    # the sleep that stood for the lock ended with it (the process it named, by its start time)
    wait_for(lambda: _ended(int(owner[0])), 10)


def _ended(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(") ")[2].startswith("Z")
    except OSError:
        return True


def _bzimage(version: bytes) -> bytes:
    data = bytearray(0x1000)
    data[0x202:0x206] = b"HdrS"
    data[0x20E:0x210] = (0x600 - 0x200).to_bytes(2, "little")
    data[0x600 : 0x600 + len(version)] = version
    return bytes(data)


def test_the_version_read_from_a_bzimage_and_from_an_image(tmp_path):
    bz = tmp_path / "bzImage"
    bz.write_bytes(_bzimage(b"6.1.0-50-rt-amd64 (debian-kernel@lists.debian.org) #1 SMP PREEMPT_RT Debian\0"))
    assert image.read(bz) == KernelVersion("6.1.0-50-rt-amd64", "#1 SMP PREEMPT_RT Debian")
    raw = tmp_path / "Image"
    raw.write_bytes(b"\0" * 100 + PROC_VERSION.encode() + b"\n\0" + b"\0" * 100)
    assert image.read(raw) == RT_VERSION
    assert RT_VERSION.matches("6.1.0-50-rt-amd64\n", PROC_VERSION + "\n")
    junk = tmp_path / "junk"
    junk.write_bytes(b"\0" * 4096)
    with pytest.raises(Exception, match="no kernel version string"):
        image.read(junk)


def test_the_record_is_written_whole_and_never_rewritten(tmp_path):
    folder = tmp_path / "boot"
    r = record.Record.create(folder, method="kexec", target="ssh://b")
    r.state("install")
    r.added("/tmp/rtlab/boot/x")
    r.state("load")
    r.note(record.DMESG, "a\x1b[2Jb\nc")
    r.finish(verify.BOOTED, ["running 6.1"])
    data = json.loads((folder / "boot.json").read_text())
    assert data["schema"] == record.SCHEMA and data["verdict"] == verify.BOOTED
    assert [s["state"] for s in data["states"]] == ["install", "load"]
    assert all("seconds" in s for s in data["states"]) and data["files_added"] == ["/tmp/rtlab/boot/x"]
    assert "\x1b" not in (folder / "dmesg.txt").read_text()
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []
    with pytest.raises(Exception, match="already holds"):
        record.Record.create(folder)
    assert record.default_folder("ssh://root@vf2:22", "6.12.0-rt").name.endswith("-root_vf2_22-6.12.0-rt")


def test_a_kernel_that_is_neither_a_file_nor_a_package_is_refused(tmp_path):
    done = rtlab("boot", "--target", "ssh://b", str(tmp_path / "nothing"))
    assert done.returncode == 2 and "linux-image-rt-amd64" in done.stderr, done.stderr


def test_a_board_other_than_ssh_is_refused_in_one_line(tmp_path):
    kernel = tmp_path / "bzImage"
    kernel.write_bytes(_bzimage(b"6.1 (x@y) #1\0"))
    done = rtlab("boot", "--target", "qemu:debian", str(kernel))
    assert done.returncode == 2 and "give --target ssh://" in done.stderr, done.stderr
    done = rtlab("boot", "--target", "ssh://b", "--back", str(kernel))
    assert done.returncode == 2 and "not both" in done.stderr, done.stderr


def test_ports_are_free():  # the helper the fixture uses, kept honest
    with socket.socket() as s:
        s.bind(("127.0.0.1", free_port()))
