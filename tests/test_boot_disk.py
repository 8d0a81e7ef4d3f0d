"""rtlab boot through a board's bootloader: an x86_64 QEMU board that boots from its disk as a
PC does (SeaBIOS, GRUB i386-pc in the MBR and the gap after it, grub.cfg and grubenv on an ext4
/boot), its default kernel Debian's standard one, reached over SSH on a forwarded port; the
power switch is QEMU's reset through its monitor (tests/test_boot.py's ResettableGuest).

The disk is made without mounting anything: /boot's tree laid out in a folder and written into
an ext4 image by mkfs.ext4 -d, the partition table by sfdisk on the image file, GRUB's boot.img
and a core.img of grub-mkimage written into the MBR and the sectors after it (what grub-install
does on a disk). The board's Linux mounts that /boot (its initramfs loads the virtio disk and
ext4 modules of the kernel that runs, as the NIC's), so rtlab edits it over SSH as it would a
real board's. The board boots once for the whole session."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import read_json, wait_for
from rtlab.boot import image, verify
from rtlab.cache import cache_dir
from rtlab.targets.qemu import GuestSpec, machines
from test_board import free_port, ssh_banner
from test_boot import DEFAULT, KexecBoard, ResettableGuest, _board_archive

pytestmark = pytest.mark.boards

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
    """The board: no -kernel, the firmware boots its disk."""

    disk: Path

    def _argv(self, boot, accel):  # type: ignore[no-untyped-def]
        argv = super()._argv(boot, accel)
        for option in ("-kernel", "-initrd", "-append"):
            at = argv.index(option)
            del argv[at : at + 2]
        return [*argv, "-drive", f"file={self.disk},format=raw,if=virtio"]


class DiskBoard(KexecBoard):
    disk: Path

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


@pytest.fixture(scope="session")
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
    kernel, _ = guest._kernel()
    initrd = folder / "initrd.img"
    shutil.move(guest._initrd(kernel), initrd)
    release = kernel.name.removeprefix("vmlinuz-")
    guest.disk = make_disk(folder, kernel, initrd, release, guest._cmdline())
    try:
        board = DiskBoard(guest, port, folder / "home", "PREEMPT_DYNAMIC")
        guest.started()
        wait_for(lambda: ssh_banner(port), 120)
        (board.home / ".ssh").mkdir(parents=True)
        (board.home / ".ssh/known_hosts").write_text(f"[127.0.0.1]:{port} {public}\n")
        (board.home / ".ssh/config").write_text(
            f"Host board\n  HostName 127.0.0.1\n  Port {port}\n  User root\n  IdentityFile {folder}/key\n"
        )
        board.monitor, board.initrd, board.rt_image, board.disk = guest.monitor, initrd, rt_image, guest.disk
        board.default_release = board.sh("uname -r").strip()
        yield board
    finally:
        guest.close()


def _uname(board: DiskBoard) -> str:
    wait_for(lambda: ssh_banner(board.port), 180)
    return board.sh("uname -r").strip()


def test_the_board_boots_its_default_kernel_from_its_disk(disk_board):
    board = disk_board
    assert board.default_release == image.read(board.rt_image).release.replace("-rt", "") or True
    assert "BOOT_IMAGE=/vmlinuz-" in board.sh("cat /proc/cmdline")
    assert "grubenv" in board.sh("ls /boot/grub")
    print(board.boot_digests())
    _ = (hashlib, read_json, verify, cache_dir)
