"""rtlab boot through a board's bootloader: an x86_64 QEMU board that boots from its disk as a
PC does (SeaBIOS, GRUB i386-pc in the MBR and the gap after it, grub.cfg and grubenv on an ext4
/boot), its default kernel Debian's standard one, reached over SSH on a forwarded port; the
power switch is QEMU's reset through its monitor (tests/test_boot.py's ResettableGuest).

The disk is made without mounting anything: /boot's tree laid out in a folder and written into
an ext4 image by mkfs.ext4 -d, the partition table by sfdisk on the image file, GRUB's boot.img
and a core.img of grub-mkimage written into the MBR and the sectors after it (what grub-install
does on a disk). The board's Linux mounts that /boot (its initramfs loads the virtio disk and
ext4 modules of the kernel that runs, as the NIC's), so rtlab edits it over SSH as it would a
real board's. The board boots once, for the tests of this file."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import read_json, rtlab, wait_for
from rtlab.boot import image, verify
from rtlab.targets.qemu import machines
from rtlab.targets.qemu.spec import GuestSpec
from test_board import free_port, ssh_banner
from test_boot import DEFAULT, KexecBoard, ResettableGuest, _board_archive

pytestmark = pytest.mark.boards
# a kernel that reboots itself and a default made and undone cost a boot or two each more
# than the checks above: make test-slow's
SLOW = pytest.mark.slow

SECTOR = 512
PART_START = 2048  # sectors: the first partition at 1 MiB, GRUB's core.img in the gap before it
BOOT_MB = 320  # two kernels with their initramfs, and what rtlab installs beside them
# the board's /boot, as the kernel that runs mounts it: virtio's PCI transport, the disk, ext4
DISK_MODULES = (
    "virtio", "virtio_ring", "virtio_pci_legacy_dev", "virtio_pci_modern_dev", "virtio_pci", "virtio_blk",
    "crc16", "mbcache", "jbd2", "crc32c_generic", "ext4",
)  # fmt: skip
GRUB_MODULES = ("biosdisk", "part_msdos", "ext2")  # in core.img: what finds the rest on /boot
DEFAULT_ID = "debian"  # the menu entry of the board's own kernel


def grub_cfg(release: str, cmdline: str) -> str:
    """The board's grub.cfg, as Debian's grub-mkconfig writes one (its 00_header's one-shot
    logic, the kernel's entry, 41_custom's custom.cfg): a serial console, no wait."""
    return f"""\
# the board's own, as grub-mkconfig writes it
if [ -s $prefix/grubenv ]; then
  load_env
fi
if [ "${{next_entry}}" ] ; then
   set default="${{next_entry}}"
   set next_entry=
   save_env next_entry
   set boot_once=true
else
   set default="${{saved_entry}}"
fi
if [ x"${{default}}" = x ]; then
   set default="{DEFAULT_ID}"
fi
serial --unit=0 --speed=115200
terminal_input serial
terminal_output serial
set timeout=0
menuentry 'Debian GNU/Linux, with Linux {release}' --id {DEFAULT_ID} {{
	insmod part_msdos
	insmod ext2
	set root='hd0,msdos1'
	echo 'Loading Linux {release} ...'
	linux /vmlinuz-{release} root=/dev/vda1 ro {cmdline}
	initrd /initrd.img-{release}
}}
if [ -f  ${{config_directory}}/custom.cfg ]; then
  source ${{config_directory}}/custom.cfg
elif [ -z "${{config_directory}}" -a -f  $prefix/custom.cfg ]; then
  source $prefix/custom.cfg
fi
"""


def make_disk(folder: Path, kernel: Path, initrd: Path, release: str, cmdline: str) -> Path:
    """A bootable disk image: MBR with GRUB, one ext4 partition that is the board's /boot."""
    boot = folder / "boot-tree"
    (boot / "grub" / "i386-pc").mkdir(parents=True)
    shutil.copyfile(kernel, boot / f"vmlinuz-{release}")
    shutil.copyfile(initrd, boot / f"initrd.img-{release}")
    (boot / "grub" / "grub.cfg").write_text(grub_cfg(release, cmdline))
    subprocess.run(["grub-editenv", str(boot / "grub" / "grubenv"), "create"], check=True)
    for mod in Path("/usr/lib/grub/i386-pc").iterdir():
        if mod.suffix in (".mod", ".lst"):
            shutil.copyfile(mod, boot / "grub" / "i386-pc" / mod.name)
    core = folder / "core.img"
    subprocess.run(["grub-mkimage", "-O", "i386-pc", "-o", str(core), "-p", "(hd0,msdos1)/grub",
                    *GRUB_MODULES], check=True)  # fmt: skip
    assert core.stat().st_size < (PART_START - 1) * SECTOR
    part = folder / "boot.ext4"
    subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "boot", "-d", str(boot), str(part), f"{BOOT_MB}M"],
                   check=True, capture_output=True)  # fmt: skip
    disk = folder / "disk.img"
    with disk.open("wb") as f:
        f.truncate(PART_START * SECTOR + part.stat().st_size)
    subprocess.run(["sfdisk", "-q", str(disk)], input=f"start={PART_START}, type=83, bootable\n",
                   text=True, check=True)  # fmt: skip
    with disk.open("r+b") as f:
        f.write((Path("/usr/lib/grub/i386-pc/boot.img").read_bytes())[:440])  # the partition table stays
        f.seek(SECTOR)
        f.write(core.read_bytes())
        f.seek(PART_START * SECTOR)
        with part.open("rb") as p:
            shutil.copyfileobj(p, f)
    part.unlink()
    shutil.rmtree(boot)
    return disk


class DiskGuest(ResettableGuest):
    """The board: no -kernel, the firmware boots its disk; its serial console also into
    CONSOLE_LOG, which a bench's `--console` command reads as it would a UART."""

    disk: Path
    console_log: Path

    def _argv(self, boot, accel):  # type: ignore[no-untyped-def]
        argv = super()._argv(boot, accel)
        for option in ("-kernel", "-initrd", "-append"):
            at = argv.index(option)
            del argv[at : at + 2]
        at = argv.index("-serial")
        argv[at : at + 2] = ["-chardev", f"stdio,id=uart,signal=off,logfile={self.console_log}",
                             "-serial", "chardev:uart"]  # fmt: skip
        return [*argv, "-drive", f"file={self.disk},format=raw,if=virtio"]


class DiskBoard(KexecBoard):
    disk: Path
    console_log: Path

    def sh(self, command: str, timeout: float = 60) -> str:
        """As Board.sh; what GRUB and the kernel print on the same console after a reset is
        none of the command's output: the command's own lines are marked and kept."""
        marked = f"said=$({command}) || exit $?; printf '%s\\n' \"$said\" | sed 's/^/@| /'"
        said = super().sh(marked, timeout).split("\n")
        return "\n".join(line[3:] for line in said if line.startswith("@| "))

    def console(self) -> str:
        """--console: the board's serial console from now on."""
        return f"tail -n0 -F {self.console_log}"

    def boot_digests(self) -> str:
        """Every file under /boot with its SHA-256, as the board's console lists them."""
        return self.sh("cd /boot && find . -type f | sort | xargs sha256sum").strip()


def _mount_step() -> str:
    return "\n".join(
        [
            "#!/bin/sh",
            *(f'insmod "/board/$(uname -r)/{name}.ko"' for name in DISK_MODULES),
            "mkdir -p /boot",
            "mount -t ext4 /dev/vda1 /boot",
            "",
        ]
    )


# the board is booted once for the file that uses it and ends with it: a guest left running
# until the session ends would be counted by the files that check that no guest survives them
@pytest.fixture(scope="module")
def disk_board(tmp_path_factory) -> Iterator[DiskBoard]:
    arch = machines.arch("x86_64")
    tools = (arch.qemu, "ssh-keygen", "cpio", "grub-mkimage", "grub-editenv", "mkfs.ext4", "sfdisk")
    if not all(shutil.which(t) for t in tools) or not Path("/usr/lib/grub/i386-pc/boot.img").is_file():
        pytest.skip("make test installs grub-pc-bin, grub-common, e2fsprogs, fdisk and qemu-system-x86")
    folder = tmp_path_factory.mktemp("disk-board")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / "key")], check=True)
    archive, public, rt_image = _board_archive(
        folder, (folder / "key.pub").read_text(), extra_modules=DISK_MODULES, extra_step=_mount_step()
    )
    port = free_port()
    guest = DiskGuest(GuestSpec.parse(f"{DEFAULT},cpus=2,memory=2G,initrd={archive},ssh={port}"))
    guest.monitor = folder / "monitor.sock"
    guest.console_log = folder / "console.log"
    kernel, _ = guest._kernel()
    initrd = folder / "initrd.img"
    shutil.move(guest._initrd(kernel), initrd)
    release = kernel.name.removeprefix("vmlinuz-")
    guest.disk = make_disk(folder, kernel, initrd, release, guest._cmdline())
    try:
        board = DiskBoard(guest, port, folder / "home", "PREEMPT_DYNAMIC")
        guest.started()
        wait_for(lambda: ssh_banner(port), 120)
        board.trust(public, folder / "key")
        board.monitor, board.initrd, board.rt_image, board.disk = guest.monitor, initrd, rt_image, guest.disk
        board.console_log = guest.console_log
        board.default_release = board.sh("uname -r").strip()
        yield board
    finally:
        guest.close()


def _uname(board: DiskBoard) -> str:
    """The board's kernel, asked over its console once it answers over SSH."""
    wait_for(lambda: ssh_banner(board.port), 180)
    return board.sh("uname -r").strip()


@pytest.fixture
def disk(disk_board) -> Iterator[DiskBoard]:
    """The board, with its /boot's files and their digests as they were before the test: the
    test's rtlab --back leaves them so, byte for byte (checked after it)."""
    before = disk_board.boot_digests()
    yield disk_board
    after = disk_board.boot_digests()
    if after != before:  # a test that failed midway: the next ones get the board as it was
        rtlab("boot", "--target", "ssh://board", "--back", "--boot-timeout", "240",
              "--power-cycle", disk_board.power_cycle(), env=disk_board.env, timeout=900)  # fmt: skip
    assert after == before


def _boot(
    board: DiskBoard, out: Path, *args: str, kernel: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return rtlab("boot", "--target", "ssh://board", str(kernel or board.rt_image),
                 "--initrd", str(board.initrd), "--boot-timeout", "240", "--out", str(out), *args,
                 env=board.env, timeout=900)  # fmt: skip


def _back(board: DiskBoard, said: str, *extra: str) -> None:
    back = rtlab("boot", "--target", "ssh://board", "--back", "--boot-timeout", "240", *extra,
                 env=board.env, timeout=900)  # fmt: skip
    assert back.returncode == 0 and said in back.stdout, back.stdout + back.stderr
    assert _uname(board) == board.default_release
    assert board.sh("test -e /boot/rtlab && echo left || echo gone").strip() == "gone"


def test_check_names_the_boards_grub(disk):
    done = rtlab("check", "--target", "ssh://board", "--format", "json", env=disk.env)
    findings = {f["item"]: f for f in json.loads(done.stdout)["findings"]}
    assert "grubenv" in findings["boot methods"]["found"].split(", "), findings["boot methods"]


def test_debian_rt_kernel_by_grubs_one_shot_then_back_byte_for_byte(disk, tmp_path):
    board = disk
    # the user's kernel under a path, and with a menu title, of spaces and quotes
    odd = tmp_path / 'my kernel\'s "rt" build'
    odd.mkdir()
    kernel = odd / "vmlinuz rt"
    shutil.copyfile(board.rt_image, kernel)
    title = "RT kernel 'one shot' \"test\" $(reboot)"
    out = tmp_path / "grub"
    done = _boot(board, out, "--method", "grub", "--append", "isolcpus=1 nohz_full=1", "--label", title,
                 "--console", board.console(), kernel=kernel)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("booted"), done.stdout
    rt = image.read(board.rt_image)
    found = read_json(out / "boot.json")
    assert found["method"] == "grub" and found["verdict"] in verify.GOOD, found
    assert found["kernel"]["path"] == str(kernel)
    assert found["found"]["release"] == rt.release and "PREEMPT_RT" in found["found"]["version"]
    assert found["found"]["isolated"] == "1" and found["found"]["nohz_full"] == "1", found
    assert [s["state"] for s in found["states"]] == ["lock", "install", "load", "execute", "wait", "verify"]
    # every file it added on the board is named, and the digests of the two it changes
    assert set(found["files_added"]) >= {"/boot/rtlab/saved", "/boot/grub/custom.cfg"}, found["files_added"]
    assert any(p.startswith("/boot/rtlab/boot-") and p.endswith("/kernel") for p in found["files_added"])
    grubenv_before = board.sh("sha256sum /boot/rtlab/saved/grubenv").split()[0]
    assert found["grub"]["sha256_before"] == {"/boot/grub/grubenv": grubenv_before}, found["grub"]
    # the board, asked over its console: the RT kernel, CPU 1 isolated, booted by GRUB's entry
    assert _uname(board) == rt.release
    assert board.sh("cat /sys/devices/system/cpu/isolated").strip() == "1"
    cmdline = board.sh("cat /proc/cmdline")
    assert "BOOT_IMAGE=/rtlab/boot-" in cmdline and "isolcpus=1" in cmdline.split(), cmdline
    # GRUB consumed the one-shot: the next reset boots the default
    assert "next_entry=\n" in board.sh("cat /boot/grub/grubenv") + "\n"
    # GRUB read the title as given: it names the entry it boots on the board's console
    console = (out / "console.log").read_text()
    assert f"Booting `{title}'" in console, console[-2000:]
    phases = [(s["state"], s.get("seconds")) for s in found["states"]]
    print(f"GRUB one-shot boot: {found['seconds']} s, states {phases}")
    _back(board, "back on its default kernel")


def test_a_dry_run_by_grub_prints_the_entry_and_changes_nothing(disk, tmp_path):
    done = _boot(disk, tmp_path / "dry", "--method", "grub", "--label", 'it\'s "RT"', "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "would add to /boot/grub/custom.cfg:" in done.stderr, done.stderr
    assert "menuentry 'it'\"'\"'s \"RT\"' --id rtlab-boot-" in done.stderr, done.stderr
    assert "would set next_entry=rtlab-boot-" in done.stderr and not (tmp_path / "dry").exists()


def test_debian_rt_kernel_by_kexec_leaves_the_disk_untouched(disk, tmp_path):
    board = disk
    out = tmp_path / "kexec"
    done = _boot(board, out, "--append", "isolcpus=1 nohz_full=1")  # auto: kexec, which the board has
    assert done.returncode == 0, done.stdout + done.stderr
    found = read_json(out / "boot.json")
    assert found["method"] == "kexec" and found["found"]["isolated"] == "1", found
    assert not [p for p in found["files_added"] if p.startswith("/boot/")], found["files_added"]
    _back(board, "back on its default kernel")


def test_a_kernel_that_panics_is_reset_as_soon_as_its_console_says_so(disk, tmp_path):
    # no init and panic=0: the kernel stops in its panic, and only a reset ends it; the console
    # shows the panic, so the reset comes then, long before --boot-timeout
    found, console = _reset_back_to_default(
        disk, tmp_path / "panic", "panic=0 rdinit=/nonexistent root=/dev/nothing", 600,
        "it panicked, said its console: Kernel panic - not syncing",
    )  # fmt: skip
    assert _seconds_in(found, "wait") < 300, found["states"]  # the panic ended the wait, not the 600 s
    assert "Kernel panic - not syncing" in console


def test_a_kernel_that_hangs_comes_back_on_the_default_through_the_power_cycle(disk, tmp_path):
    # a kernel that runs and never answers: its init is a sleep (busybox's, from the initrd; the
    # kernel hands the words without "=" to init), and it says so (loglevel=7 overrules quiet)
    found, console = _reset_back_to_default(
        disk, tmp_path / "hang", "loglevel=7 rdinit=/bin/busybox sleep 1000000", 45, "no answer over SSH"
    )
    # 45 s for the kernel on trial; its default, after the reset, had 300 (a GRUB boot of it
    # takes about 30 s here, more on a busy host)
    assert _seconds_in(found, "wait") < 100, found["states"]
    # the console's last lines are the evidence of how far it got: the kernel ran its init
    assert "console's last lines:" in " ".join(found["evidence"]) and "/bin/busybox" in console
    assert "Kernel panic" not in console


def _reset_back_to_default(
    board: DiskBoard, out: Path, append: str, timeout: int, said: str
) -> tuple[dict, str]:
    """A boot by GRUB's one-shot with APPEND that does not answer within TIMEOUT: it is said in
    one line starting with SAID, the power switch resets the board, GRUB (its one-shot spent)
    boots the default kernel, and grubenv and custom.cfg are put back at once. (The boot's
    record, the console's text.)"""
    done = _boot(board, out, "--method", "grub", "--append", append, "--boot-timeout", str(timeout),
                 "--power-cycle", board.power_cycle(), "--console", board.console())  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("rtlab:")]
    assert len(lines) == 1 and lines[0].startswith(f"rtlab: did not boot: {said}"), done.stderr
    found = read_json(out / "boot.json")
    evidence = " ".join(found["evidence"])
    assert found["verdict"] == verify.DID_NOT_BOOT and "power-cycle" in [s["state"] for s in found["states"]]
    assert f"back on its default kernel {board.default_release}" in evidence, evidence
    assert "back byte for byte" in evidence, evidence
    assert _uname(board) == board.default_release
    assert board.sh("test -e /boot/rtlab && echo left || echo gone").strip() == "gone"
    return found, (out / "console.log").read_text()


def _seconds_in(found: dict, state: str) -> float:
    """How long the boot's record says it stayed in STATE."""
    states = found["states"]
    at = [s["state"] for s in states].index(state)
    begun, ended = (dt.datetime.fromisoformat(states[i]["at"]) for i in (at, at + 1))
    return (ended - begun).total_seconds()


@SLOW
def test_a_kernel_that_panics_and_reboots_itself_comes_back_on_the_default(disk, tmp_path):
    board = disk
    out = tmp_path / "panic"
    done = _boot(board, out, "--method", "grub", "--append", "panic=1 rdinit=/nonexistent root=/dev/nothing",
                 "--console", board.console())  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    found = read_json(out / "boot.json")
    assert found["verdict"] == verify.ANOTHER_KERNEL, found
    evidence = " ".join(found["evidence"])
    assert "came back on its default kernel" in evidence and "back byte for byte" in evidence, evidence
    assert "Kernel panic - not syncing" in (out / "console.log").read_text()
    _back(board, "not a kernel rtlab booted")


@SLOW
def test_make_default_keeps_the_kernel_across_a_reset_then_back(disk, tmp_path):
    board = disk
    out = tmp_path / "default"
    done = _boot(board, out, "--method", "grub", "--make-default")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "made the default" in done.stderr, done.stderr
    rt = image.read(board.rt_image)
    assert read_json(out / "boot.json")["made_default"].startswith("rtlab-boot-")
    # a power cycle: the board comes back on the kernel now its default
    subprocess.run(["sh", "-c", board.power_cycle()], check=True)
    wait_for(lambda: not ssh_banner(board.port), 60)
    assert _uname(board) == rt.release
    _back(board, "back on its default kernel")


def test_grub_refused_where_the_board_has_none_in_one_line(disk, tmp_path):
    board = disk
    board.sh("mv /boot/grub/grubenv /boot/grubenv.aside")
    try:
        done = _boot(board, tmp_path / "none", "--method", "grub")
    finally:
        board.sh("mv /boot/grubenv.aside /boot/grub/grubenv")
    assert done.returncode == 2, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("rtlab:")]
    assert len(said) == 1 and "/boot/grub/grubenv" in said[0] and "--method kexec" in said[0], done.stderr
