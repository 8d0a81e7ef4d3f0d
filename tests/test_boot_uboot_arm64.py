"""rtlab boot on an arm64 board with a real bootloader: QEMU's `virt` machine (as the arm64
guests run it: a Cortex-A72, the newest GIC) started by U-Boot (Debian's u-boot-qemu,
qemu_arm64, as -bios), whose distro boot finds extlinux/extlinux.conf on a virtio disk and
boots its default entry, Debian's standard arm64 kernel (linux-image-arm64; its /boot/vmlinuz
is the uncompressed Image, which U-Boot's booti takes), with the board's initramfs and QEMU's
device tree passed on. The board has no kexec-tools: rtlab carries Debian's for arm64.

rtlab boots Debian's arm64 PREEMPT_RT kernel (linux-image-rt-arm64's .deb) with --append
words, verified, then goes --back through U-Boot to the default entry. The board, its disk and
its initrd are tests/test_boot_uboot.py's riscv64 board's, with the firmware and kernels of
arm64; the initrd holds the NIC's modules of both kernels. It boots once, for the tests of this file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rtlab.boot import image
from test_boot_uboot import UbootBoard, _back_to_default, boot_deb_by_carried_kexec, running_uboot_board

pytestmark = pytest.mark.boards

UBOOT = Path("/usr/lib/u-boot/qemu_arm64/u-boot.bin")  # Debian's u-boot-qemu
DEFAULT = "arm64:debian"
RT = "linux-image-rt-arm64"


# the board is booted once for the file that uses it and ends with it: a guest left running
# until the session ends would be counted by the files that check that no guest survives them
@pytest.fixture(scope="module")
def arm64_uboot_board(tmp_path_factory) -> Iterator[UbootBoard]:
    folder = tmp_path_factory.mktemp("uboot-arm64-board")
    with running_uboot_board(folder, DEFAULT, RT, ("-bios", str(UBOOT))) as board:
        yield board


def test_the_board_boots_debians_arm64_kernel_through_uboot_and_extlinux(arm64_uboot_board):
    board = arm64_uboot_board
    said = "\n".join(board.firmware_said)
    assert "U-Boot" in said and "Found /extlinux/extlinux.conf" in said, said
    assert "Starting kernel" in said, said
    assert board.default_release.endswith("-arm64") and "-rt-" not in board.default_release
    assert board.sh("uname -m").strip() == "aarch64"
    assert board.sh("command -v kexec || echo none").strip().endswith("none")


def test_debians_rt_kernel_by_carried_kexec_verified_then_back_through_uboot(arm64_uboot_board, tmp_path):
    board = arm64_uboot_board
    assert image.read(board.rt_image).release.endswith("-rt-arm64")
    boot_deb_by_carried_kexec(board, tmp_path / "rt", "ld-linux-aarch64")
    assert "PREEMPT_RT" in board.sh("uname -v"), board.sh("uname -v")

    _back_to_default(board, "back on its default kernel")
    assert "PREEMPT_RT" not in board.sh("uname -v")
