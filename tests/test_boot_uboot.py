"""rtlab boot on a riscv64 board booted the VisionFive 2's way: OpenSBI (Debian's fw_jump), U-Boot
(Debian's u-boot-qemu, qemu-riscv64_smode, as the kernel OpenSBI jumps to) and an extlinux.conf
on a virtio disk, whose distro boot finds the file and boots its default entry: Debian's
riscv64 kernel (as tests/test_board.py's riscv64 board runs it) with the board's initramfs
(rtlab's busybox one, dropbear, the NIC's modules, a host key made once on the host).

The board has no kexec-tools: rtlab carries Debian's for riscv64. It boots a Debian kernel
package file (.deb) of riscv64 with --append words, verified, goes --back through U-Boot to the
default entry, and a kernel that hangs comes back through the power switch (QEMU's monitor,
system_reset) and U-Boot. The disk is made without mounting anything: sfdisk on a file, then
mkfs.ext4 -d writing the files into the partition at its offset. It boots once, for the tests of this file.
running_uboot_board makes the board for an architecture's firmware and kernels: the arm64 board
of tests/test_boot_uboot_arm64.py is this one, started by U-Boot's qemu_arm64."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import TARGET_DIR, read_json, rtlab, started_twice, wait_for
from rtlab import debian
from rtlab.boot import image, verify
from rtlab.cache import cache_dir
from rtlab.errors import UsageError
from rtlab.targets.qemu import QemuTarget, cpio, initramfs, kernels, machines
from rtlab.targets.qemu.spec import GuestSpec
from test_board import HOST_KEY, Board, free_port, ssh_banner
from test_boot import KexecBoard, _host_key, _step
from test_boot_carry import BANNER, _deb

pytestmark = pytest.mark.boards

FW_JUMP = Path("/usr/lib/riscv64-linux-gnu/opensbi/generic/fw_jump.bin")  # Debian's opensbi
UBOOT = Path("/usr/lib/u-boot/qemu-riscv64_smode/u-boot.bin")  # Debian's u-boot-qemu
DEFAULT = "riscv64:debian"
# what QEMU starts instead of the kernel: OpenSBI as -bios, which jumps to U-Boot (-kernel)
FIRMWARE = ("-bios", str(FW_JUMP), "-kernel", str(UBOOT))
PARTITION_AT = 1 << 20  # the first partition's offset, as sfdisk puts it by default (sector 2048)


def extlinux(append: str) -> str:
    """The board's extlinux.conf: one entry, the default, as u-boot-menu writes them."""
    return "\n".join(
        [
            "default debian",
            "timeout 1",
            "label debian",
            "\tkernel /vmlinuz",
            "\tinitrd /initrd.img",
            f"\tappend {append}",
            "",
        ]
    )


def make_disk(out: Path, kernel: Path, initrd: Path, append: str) -> None:
    """A disk image holding one bootable ext4 partition with extlinux/extlinux.conf, the kernel
    and the initramfs, made without mounting: sfdisk writes the partition table into the file,
    mkfs.ext4 -d fills the file system from a folder, at the partition's offset."""
    stage = out.with_suffix(".stage")
    shutil.rmtree(stage, ignore_errors=True)
    (stage / "extlinux").mkdir(parents=True)
    (stage / "extlinux/extlinux.conf").write_text(extlinux(append))
    shutil.copyfile(kernel, stage / "vmlinuz")
    shutil.copyfile(initrd, stage / "initrd.img")
    size = kernel.stat().st_size + initrd.stat().st_size + (64 << 20)
    size -= size % (1 << 20)
    out.unlink(missing_ok=True)
    with out.open("wb") as f:
        f.truncate(size)
    subprocess.run(["sfdisk", "-q", str(out)], input=f"start={PARTITION_AT // 512}, type=83, bootable\n",
                   text=True, check=True)  # fmt: skip
    subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "boot", "-d", str(stage), "-E", f"offset={PARTITION_AT}",
                    str(out), f"{(size - PARTITION_AT) >> 10}k"], check=True)  # fmt: skip
    shutil.rmtree(stage)


class UbootGuest(QemuTarget):
    """The riscv64 guest booted by its firmware: OpenSBI as -bios, U-Boot as the payload it
    jumps to, the kernel, initramfs and command line the guest would get from QEMU put on a
    virtio disk instead. A reboot resets the machine (no -no-reboot), and the monitor listens
    on MONITOR: the tests' power switch. FIRMWARE is QEMU's words for the board's firmware
    (arm64's U-Boot is -bios alone, as riscv64's OpenSBI is)."""

    monitor: Path
    disk: Path
    firmware: tuple[str, ...]

    def _argv(self, boot, accel):  # type: ignore[no-untyped-def]
        argv = super()._argv(boot, accel)
        make_disk(self.disk, boot.kernel, boot.initrd, self._cmdline())
        out: list[str] = []
        skip = False
        for word in argv:
            if skip:
                skip = False
            elif word in ("-bios", "-kernel", "-initrd", "-append", "-monitor"):
                skip = True
            elif word != "-no-reboot":
                out.append(word)
        return [
            *out,
            *self.firmware,
            "-drive", f"file={self.disk},format=raw,if=virtio",
            "-monitor", f"unix:{self.monitor},server,nowait",
        ]  # fmt: skip


def _kernel_deb(apt: debian.Apt, meta: str, folder: Path) -> Path:
    """The .deb that holds META's (a Debian kernel metapackage) current kernel image: the
    package rtlab boot is given (linux-binary-VER from forky on, linux-image-VER before)."""
    package, packages = kernels.kernel_packages(apt, meta, ("linux-binary-",))
    debs = apt.download(packages, folder)
    return next((d for d in debs if d.name.startswith("linux-binary-")), None) or next(
        d for d in debs if d.name.startswith(f"{package}_")
    )


def _board_archive(
    folder: Path, public_key: str, default: str, booted: str, also: tuple[tuple[debian.Apt, str], ...] = ()
) -> tuple[Path, str, Path, Path]:
    """(the board's initrd, its host key's public line, the .deb of BOOTED (a Debian kernel
    metapackage) that holds the kernel rtlab boots, that kernel's image), for the board whose
    default kernel is DEFAULT (a guest kernel's name). No kexec-tools: rtlab carries it. The
    NIC's modules of both kernels, and of ALSO's ((apt, metapackage) of other releases), are in
    the initrd, each under /board/RELEASE: a kexec'd kernel is given the same initrd and loads
    its own build of them."""
    cache = cache_dir()
    arch, meta = machines.named_kernel(default)
    apt = debian.Apt.first_verified(cache, arch.releases, arch.debian, arch.suites)
    where = cache / "initramfs" / f"{apt.release}-{arch.debian}"
    tools = {"dropbear": "usr/sbin/dropbear", "dropbearkey": "usr/bin/dropbearkey"}
    server = initramfs.build_tools(apt, where / "dropbear.cpio", ["dropbear-bin"], tools)
    # the host key is made on the host by the host's architecture's dropbearkey
    x86 = machines.arch("x86_64")
    host_apt = debian.Apt.first_verified(cache, x86.releases, x86.debian, x86.suites)
    host_server = initramfs.build_tools(
        host_apt, cache / "initramfs" / f"{host_apt.release}-{x86.debian}" / "dropbear.cpio",
        ["dropbear-bin"], tools,
    )  # fmt: skip
    key, public = _host_key(folder / "dropbear", host_server)
    drivers: dict[str, list[Path]] = {}
    for source, each in dict.fromkeys(((apt, meta), (apt, booted), *also)):
        # the image's name is vmlinuz-RELEASE, or vmlinux-RELEASE in Debian's riscv64 6.12
        release = re.sub(r"^vmlinu[xz]-", "", kernels.fetch_kernel(source, cache, each)[0].name)
        drivers[release] = kernels.fetch_modules(source, cache, each, list(arch.nic_modules))
    rt_image = kernels.fetch_kernel(apt, cache, booted)[0]
    deb = _kernel_deb(apt, booted, folder / "debs")
    buffer = io.BytesIO()
    w = cpio.Writer(buffer)
    for name in ("etc", "etc/rtlab", "etc/rtlab/boot.d", "etc/dropbear", "board"):
        w.directory(name)
    for release in drivers:
        w.directory(f"board/{release}")
    w.directory("root/.ssh", 0o700)
    w.file("root/.ssh/authorized_keys", public_key.encode(), 0o600)
    w.file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n")
    w.file("etc/group", b"root:x:0:\n")
    w.file(HOST_KEY.lstrip("/"), key, 0o600)
    for release, files in drivers.items():
        for driver in files:
            w.file(f"board/{release}/{driver.name}", driver.read_bytes())
    w.file("etc/rtlab/boot.d/50-board", _step(list(arch.nic_modules)).encode(), 0o755)
    w.close()
    out = folder / "board.cpio"
    out.write_bytes(server.read_bytes() + buffer.getvalue())
    return out, public, deb, rt_image


class UbootBoard(KexecBoard):
    deb: Path
    firmware_said: list[str]

    def sh(self, command: str, timeout: float = 60) -> str:
        """As KexecBoard.sh; what a reset printed before /init's ready line (OpenSBI's and
        U-Boot's banners) is no output of the command either."""
        said = Board.sh(self, command, timeout).split("\n")
        ready = [n for n, line in enumerate(said) if line.startswith("@rtlab-ready")]
        said = said[ready[-1] + 1 :] if ready else said
        return "\n".join(line for line in said if not re.match(r"\[ *\d+\.\d+\] ", line))


@contextlib.contextmanager
def running_uboot_board(
    folder: Path,
    default: str,
    booted: str,
    firmware: tuple[str, ...],
    also: tuple[tuple[debian.Apt, str], ...] = (),
) -> Iterator[UbootBoard]:
    """A board booted through FIRMWARE (QEMU's words for it) and U-Boot's extlinux.conf into
    DEFAULT (a guest kernel's name), with BOOTED's .deb at hand (and the NIC drivers of ALSO's
    kernels in its initrd), for as long as the block lasts; skipped when a tool or a firmware
    file is missing."""
    arch = machines.named_kernel(default)[0]
    tools = (arch.qemu, "sfdisk", "mkfs.ext4", "cpio", "ssh-keygen")
    files = [Path(w) for w in firmware if w.startswith("/")]
    if not all(shutil.which(t) for t in tools) or not all(f.is_file() for f in files):
        pytest.skip(f"make test installs {machines.QEMU_PACKAGES[arch.name]} u-boot-qemu fdisk e2fsprogs")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / "key")], check=True)
    archive, public, deb, rt_image = _board_archive(
        folder, (folder / "key.pub").read_text(), default, booted, also
    )

    # 600 s each: a boot takes under 80 s, and the guest silent after U-Boot is started again
    def make() -> UbootGuest:
        guest = UbootGuest(
            GuestSpec.parse(f"{default},cpus=2,memory=2G,initrd={archive},ssh={free_port()},boot-timeout=600")
        )
        guest.monitor, guest.disk, guest.firmware = folder / "monitor.sock", folder / "disk.img", firmware
        return guest

    guest, console = started_twice(make, tidy=lambda: (folder / "monitor.sock").unlink(missing_ok=True))
    port = guest.spec.ssh_port
    assert port is not None
    try:
        board = UbootBoard(guest, port, folder / "home", "LAZY")
        board.firmware_said = list(console.tail)
        wait_for(lambda: ssh_banner(port), 300)
        board.trust(public, folder / "key")
        assert guest.boot is not None
        board.monitor, board.initrd, board.deb = guest.monitor, guest.boot.initrd, deb
        board.rt_image = rt_image
        board.default_release = board.sh("uname -r").strip()
        yield board
    finally:
        guest.close()


# the board is booted once for the file that uses it and ends with it: a guest left running
# until the session ends would be counted by the files that check that no guest survives them
@pytest.fixture(scope="module")
def uboot_board(tmp_path_factory) -> Iterator[UbootBoard]:
    # the kernel rtlab boots is the default's own package: Debian builds no riscv64 PREEMPT_RT
    booted = machines.named_kernel(DEFAULT)[1]
    with running_uboot_board(tmp_path_factory.mktemp("uboot-board"), DEFAULT, booted, FIRMWARE) as board:
        yield board


def _uname(board: UbootBoard) -> str:
    wait_for(lambda: ssh_banner(board.port), 600)
    return board.sh("uname -r").strip()


def _back_to_default(board: UbootBoard, said: str, *extra: str) -> None:
    """`rtlab boot --back`: through U-Boot to the default entry, rtlab's folder gone."""
    back = rtlab("boot", "--target", "ssh://board", "--back", "--boot-timeout", "900", *extra,
                 env=board.env, timeout=1800)  # fmt: skip
    assert back.returncode == 0 and said in back.stdout, back.stdout + back.stderr
    assert _uname(board) == board.default_release
    assert "rtlab.boot=" not in board.sh("cat /proc/cmdline")
    assert board.sh(f"test -e {TARGET_DIR}/boot && echo left || echo gone").strip() == "gone"


def test_the_board_boots_its_default_entry_through_opensbi_uboot_and_extlinux(uboot_board):
    said = "\n".join(uboot_board.firmware_said)
    assert "OpenSBI" in said and "U-Boot" in said, said
    assert "Found /extlinux/extlinux.conf" in said and "Starting kernel" in said, said
    assert uboot_board.sh("command -v kexec || echo none").strip().endswith("none")
    done = rtlab("check", "--target", "ssh://board", "--format", "json", env=uboot_board.env, timeout=600)
    findings = {f["item"]: f for f in json.loads(done.stdout)["findings"]}
    assert findings["boot methods"]["found"] == "kexec (carried)", findings["boot methods"]
    assert findings["boot methods"]["status"] == "ok"


def boot_deb_by_carried_kexec(board: UbootBoard, out: Path, loader: str) -> dict[str, Any]:
    """rtlab boot of the board's .deb with isolcpus=1 nohz_full=1, by the kexec rtlab carries
    (its LOADER among the files added), verified in the record and on the board's console;
    the boot's record."""
    done = rtlab("boot", "--target", "ssh://board", str(board.deb), "--initrd", str(board.initrd),
                 "--append", "isolcpus=1 nohz_full=1", "--boot-timeout", "900", "--out", str(out),
                 env=board.env, timeout=3600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("booted"), done.stdout
    found: dict[str, Any] = read_json(out / "boot.json")
    release = image.read(board.rt_image).release
    assert found["verdict"] in verify.GOOD and found["found"]["release"] == release, found
    assert found["kernel"]["deb"] == str(board.deb) and found["kernel"]["package"].startswith("linux-"), found
    assert found["kexec"].startswith("carried: kexec-tools"), found["kexec"]
    added = [Path(p).name for p in found["files_added"]]
    assert "kexec" in added and any(n.startswith(loader) for n in added), added
    assert found["found"]["isolated"] == "1" and found["found"]["nohz_full"] == "1", found
    phases = [(s["state"], s.get("seconds")) for s in found["states"]]
    print(f"carried-kexec boot: {found['seconds']} s, states {phases}")
    # the board, asked over its console: the kernel rtlab booted, with the words asked
    assert _uname(board) == release
    cmdline = board.sh("cat /proc/cmdline").split()
    assert "nohz_full=1" in cmdline and any(w.startswith("rtlab.boot=") for w in cmdline), cmdline
    assert board.sh("cat /sys/devices/system/cpu/isolated").strip() == "1"
    assert board.sh("command -v kexec || echo none").strip().endswith("none")  # nothing installed
    return found


def test_a_deb_by_carried_kexec_verified_then_back_through_uboot(uboot_board, tmp_path):
    board = uboot_board
    boot_deb_by_carried_kexec(board, tmp_path / "deb", "ld-linux-riscv64")
    _back_to_default(board, "back on its default kernel")


def test_a_deb_of_another_architecture_is_one_line_naming_the_boards(uboot_board, tmp_path):
    amd64 = _deb(tmp_path, "amd64", {"boot/vmlinuz-6.12.9-rt-test": BANNER})
    done = rtlab("boot", "--target", "ssh://board", str(amd64), "--out", str(tmp_path / "b"),
                 env=uboot_board.env, timeout=600)  # fmt: skip
    said = [line for line in done.stderr.splitlines() if line.startswith("rtlab:")]
    assert done.returncode == 2 and len(said) == 1, done.stderr
    assert "is a amd64 package and ssh://board is riscv64" in said[0], said
    assert not (tmp_path / "b").exists()
    assert uboot_board.sh(f"test -e {TARGET_DIR}/boot && echo left || echo none").strip() == "none"


@pytest.mark.slow  # a wait for the hung kernel, the reset and U-Boot's boot: ~5 minutes more
def test_a_kernel_that_hangs_comes_back_through_the_power_switch_and_uboot(uboot_board, tmp_path):
    board = uboot_board
    out = tmp_path / "hang"
    # no initramfs and no root: the kernel panics, and panic=0 keeps it there
    done = rtlab("boot", "--target", "ssh://board", str(board.rt_image), "--append", "panic=0",
                 "--boot-timeout", "240", "--power-cycle", board.power_cycle(), "--out", str(out),
                 env=board.env, timeout=3600)  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    found = read_json(out / "boot.json")
    assert found["verdict"] == verify.DID_NOT_BOOT, found
    evidence = " ".join(found["evidence"])
    assert f"back on its default kernel {board.default_release}" in evidence, evidence
    assert "power-cycle" in [s["state"] for s in found["states"]]
    assert "rtlab.boot=" not in board.sh("cat /proc/cmdline")  # U-Boot's default entry
    _back_to_default(board, "not a kernel rtlab booted")


# --- the seed's comparison on this board: two kernels, alternated -------------------------


@pytest.fixture(scope="module")
def two_kernel_board(tmp_path_factory) -> Iterator[tuple[UbootBoard, Path, str]]:
    """A board of its own (the compare below reboots it through U-Boot): its default kernel is
    Debian's riscv64 one of the first release apt verifies (forky's), and another release's
    riscv64 kernel (trixie's) is the second kernel, a .deb whose NIC drivers the board's initrd
    carries too. Debian builds no riscv64 PREEMPT_RT kernel: two releases' kernels are the two
    kernels a board here can be given (an rtlab-built RT kernel and its twin are the VisionFive
    2's, `rtlab kernel build --board visionfive2`). (The board, the .deb, its release's name.)"""
    folder = tmp_path_factory.mktemp("uboot-two-kernels")
    arch, meta = machines.named_kernel(DEFAULT)
    if not all(shutil.which(t) for t in (arch.qemu, "sfdisk", "mkfs.ext4", "cpio", "ssh-keygen")):
        pytest.skip(f"make test installs {machines.QEMU_PACKAGES[arch.name]} u-boot-qemu fdisk e2fsprogs")
    cache = cache_dir()
    board_release = debian.Apt.first_verified(cache, arch.releases, arch.debian, arch.suites).release
    for release in (r for r in arch.releases if r != board_release):
        other = debian.Apt.for_guest(cache, release, arch.debian)
        try:
            other.update(tries=1)
            break
        except UsageError:
            continue
    else:
        pytest.skip(f"no Debian release but {board_release} has a riscv64 index apt verifies today")
    deb = _kernel_deb(other, meta, folder / "other")
    with running_uboot_board(folder, DEFAULT, meta, FIRMWARE, also=((other, meta),)) as board:
        yield board, deb, other.release


@pytest.mark.slow  # a kexec boot, a reboot through U-Boot and four short runs on riscv64: ~8 minutes
def test_compare_two_kernels_on_the_uboot_board_alternates_them(two_kernel_board, tmp_path):
    board, other, other_release = two_kernel_board
    out = tmp_path / "cmp"
    # the labels are the seed's roles: the board's own kernel, and the one rtlab boots
    done = rtlab("compare", "--target", "ssh://board", "--kernel", "default", "--kernel", str(other),
                 "--repeat", "2", "--labels", "Own,Other", "--loads", "idle", "--duration", "3s",
                 "--settle", "0s", "--initrd", str(board.initrd), "--boot-timeout", "900",
                 "--power-cycle", board.power_cycle(), "--out", str(out),
                 env=board.env, timeout=5400)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    runs = read_json(out / "kernels.json")["runs"]
    # A B B A, each run on the kernel it names (verified before, and read back from the run)
    assert list(runs) == ["Own/repeat-1", "Other/repeat-1", "Other/repeat-2", "Own/repeat-2"], runs
    releases = {key: read_json(out / key / "sysinfo.json")["kernel"]["release"] for key in runs}
    for key, entry in runs.items():
        assert entry["status"] == "complete", (key, entry)
        assert entry["board"]["release"] == releases[key], (key, entry)
    assert releases["Own/repeat-1"] == releases["Own/repeat-2"] == board.default_release, releases
    assert releases["Other/repeat-1"] == releases["Other/repeat-2"] != board.default_release, releases
    suffix = {"trixie": "+deb13-riscv64", "forky": "+deb14-riscv64"}.get(other_release, "-riscv64")
    assert releases["Other/repeat-1"].endswith(suffix), (other_release, releases)
    # the other kernel's two runs on one kexec boot; the board's own on its own boots (the
    # second after the reboot through U-Boot that took the board back)
    assert runs["Other/repeat-1"]["board"]["boot_id"] == runs["Other/repeat-2"]["board"]["boot_id"]
    assert runs["Own/repeat-1"]["board"]["boot_id"] != runs["Own/repeat-2"]["board"]["boot_id"]
    assert len([p for p in (out / "boots").iterdir() if p.is_dir()]) == 1  # one boot rtlab made
    assert "Own" in done.stdout and "Other" in done.stdout  # compare's table and verdicts
    assert _uname(board) == board.default_release
    assert "rtlab.boot=" not in board.sh("cat /proc/cmdline")  # U-Boot's default entry
