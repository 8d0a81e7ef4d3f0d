"""rtlab boot's GRUB method, without a board: its environment block read and written as GRUB's
own grub-editenv does, damaged blocks refused, the probe's refusals, and the menu entry checked
by GRUB's own script checker whatever its title and command line hold. The board tests are in
tests/test_boot_disk.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from rtlab.boot import grub
from rtlab.errors import UsageError


def _editenv(path: Path, *args: str) -> bytes:
    subprocess.run(["grub-editenv", str(path), *args], check=True)
    return path.read_bytes()


@pytest.mark.host
@pytest.mark.skipif(not shutil.which("grub-editenv"), reason="make test installs grub-common")
def test_rtlab_writes_grubenv_as_grub_editenv_does(tmp_path):
    env = tmp_path / "grubenv"
    empty = _editenv(env, "create")  # Debian's: a comment line of its own after the header
    assert grub.parse_env(empty) == {}
    once = grub.set_variable(empty, "next_entry", "rtlab-boot-1")
    assert once == _editenv(env, "set", "next_entry=rtlab-boot-1")
    saved = _editenv(env, "set", "saved_entry=debian")
    again = grub.set_variable(saved, "next_entry", "rtlab-boot-2")
    assert again == _editenv(env, "set", "next_entry=rtlab-boot-2")
    assert grub.parse_env(again) == {"next_entry": "rtlab-boot-2", "saved_entry": "debian"}
    # GRUB's save_env after a one-shot: the variable kept, empty
    assert grub.parse_env(grub.set_variable(again, "next_entry", "")) == {
        "next_entry": "",
        "saved_entry": "debian",
    }


@pytest.mark.unit
@pytest.mark.parametrize(
    "block",
    [
        b"",
        b"x" * 1024,
        grub.ENV_HEADER + b"no equals sign\n" + b"#" * (1024 - len(grub.ENV_HEADER) - 15),
        grub.ENV_HEADER + b"a=1\n" + b"#" * 900 + b"tail" + b"#" * (1024 - len(grub.ENV_HEADER) - 908),
        grub.ENV_HEADER + b"a=" + b"1" * (1024 - len(grub.ENV_HEADER) - 2),  # no end of line
        grub.ENV_HEADER + b"#" * (1024 - len(grub.ENV_HEADER)) + b"#",  # a block and a byte
    ],
)
def test_a_damaged_grubenv_is_refused_with_its_reason(block):
    with pytest.raises(ValueError, match="GRUB environment block"):
        grub.parse_env(block)


@pytest.mark.unit
def test_a_variable_that_does_not_fit_the_block_is_refused():
    empty = grub.format_env([])
    with pytest.raises(ValueError, match="more than its 1024"):
        grub.set_variable(empty, "next_entry", "x" * 1024)


@pytest.mark.unit
def test_the_probe_says_why_a_board_cannot_boot_by_grub():
    block = grub.format_env([])
    hexed = " ".join(f"{b:02x}" for b in block)
    good = grub.Probe.parse(f"once=yes\ncustom=yes\n@@grubenv\n{hexed}\n")
    assert good.available and not good.boot_on_root and not good.editenv
    assert "no /boot/grub/grubenv" in (
        grub.Probe.parse("missing=/boot/grub/grubenv\n@@grubenv\n").refusal() or ""
    )
    assert "next_entry" in (grub.Probe.parse(f"custom=yes\n@@grubenv\n{hexed}\n").refusal() or "")
    assert "custom.cfg" in (grub.Probe.parse(f"once=yes\n@@grubenv\n{hexed}\n").refusal() or "")
    assert "grub-editenv" in (grub.Probe.parse("once=yes\ncustom=yes\n@@grubenv\n00 zz\n").refusal() or "")


@pytest.mark.host
@pytest.mark.skipif(not shutil.which("grub-script-check"), reason="make test installs grub-common")
def test_the_entry_is_grub_script_whatever_its_title_and_command_line(tmp_path):
    entry = grub.Entry(
        "boot-1", "RT 'one' \"two\" $(reboot) `x` \\ ;", "root=/dev/vda1 ro isolcpus=1 a='b' $x", True, False
    )
    text = entry.menuentry() + entry.default_line()
    script = tmp_path / "custom.cfg"
    script.write_text(text)
    checked = subprocess.run(["grub-script-check", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, (checked.stderr, text)
    assert "linux /rtlab/boot-1/kernel " in text and "initrd /rtlab/boot-1/initrd" in text
    on_root = grub.Entry("boot-1", "t", "ro", False, True)
    assert "linux /boot/rtlab/boot-1/kernel ro" in on_root.menuentry() and "initrd" not in on_root.menuentry()
    with pytest.raises(UsageError):
        grub.check_title("two\nlines")
