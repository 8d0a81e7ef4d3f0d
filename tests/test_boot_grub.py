"""rtlab boot's GRUB method, without a board: its environment block read and written as GRUB's
own grub-editenv does, damaged blocks refused, the probe's refusals, and the menu entry checked
by GRUB's own script checker whatever its title and command line hold. The board tests are in
tests/test_boot_disk.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rtlab.boot import grub, steps
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


def _on(tmp: Path, command: str) -> subprocess.CompletedProcess[str]:
    """A command of grub.py's run on TMP's /boot instead of the board's."""
    local = command.replace("/boot/", f"{tmp}/boot/")
    return subprocess.run(["sh", "-c", local], capture_output=True, text=True, timeout=60)


def _boot(tmp: Path) -> tuple[Path, Path]:
    (tmp / "boot" / "grub").mkdir(parents=True)
    env, custom = tmp / "boot/grub/grubenv", tmp / "boot/grub/custom.cfg"
    env.write_bytes(grub.set_variable(grub.format_env([]), "saved_entry", "debian"))
    custom.write_text("# the board's own\n")
    return env, custom


@pytest.mark.unit
@pytest.mark.skipif(not shutil.which("sha256sum"), reason="coreutils")
def test_grub_files_are_put_back_byte_for_byte(tmp_path):
    env, custom = _boot(tmp_path)
    before = env.read_bytes(), custom.read_bytes()
    saved = _on(tmp_path, grub.save())
    assert saved.returncode == 0, saved.stderr
    custom.write_text(before[1].decode() + "menuentry x {\n}\n")
    env.write_bytes(grub.set_variable(before[0], "next_entry", "rtlab-boot-1"))
    back = _on(tmp_path, grub.restore())
    assert back.returncode == 0 and "restored" in back.stdout, back
    assert (env.read_bytes(), custom.read_bytes()) == before
    assert not (tmp_path / "boot/rtlab").exists()


@pytest.mark.unit
def test_a_save_cut_short_writes_nothing_back_and_leaves_no_mark(tmp_path):
    # a full /boot: the saved folder made, its copy of grubenv cut short, no digests taken;
    # nothing of GRUB's was changed yet, and the way back must not write the cut copy over it
    env, custom = _boot(tmp_path)
    before = env.read_bytes(), custom.read_bytes()
    saved = tmp_path / "boot/rtlab/saved"
    saved.mkdir(parents=True)
    (saved / "grubenv").write_bytes(before[0][:100])
    (saved / "SHA256SUMS.part").write_text("")
    back = _on(tmp_path, grub.restore())
    assert back.returncode == 0 and "nothing" in back.stdout, back
    assert (env.read_bytes(), custom.read_bytes()) == before
    assert not (tmp_path / "boot/rtlab").exists()  # the next boot is not refused for it


@pytest.mark.unit
def test_a_grubenv_with_bytes_beyond_ascii_is_written_back_as_it_was():
    block = grub.format_env([("saved_entry", "Debian\xe9")])  # a title's UTF-8, byte by byte
    once = grub.set_variable(block, "next_entry", "rtlab-boot-1")
    assert b"saved_entry=Debian\xe9\n" in once
    assert grub.set_variable(once, "next_entry", "").count(b"\xe9") == 1


@pytest.mark.unit
def test_a_grubenv_too_full_for_next_entry_fails_before_anything_changes():
    from rtlab.boot import machine
    from rtlab.boot.board import Failed

    class Board:
        ran: list[str] = []

        def must(self, command, *args, **kwargs):
            self.ran.append(command)
            return ""

    class Record:
        data = {"cmdline_asked": "ro", "grub": {}}

    full = grub.format_env([("filler", "x" * 980)])
    hexed = " ".join(f"{b:02x}" for b in full)
    engine = machine.Engine.__new__(machine.Engine)
    engine.board, engine.record, engine.say = Board(), Record(), lambda line: None
    engine.grub = grub.Probe.parse(f"once=yes\ncustom=yes\n@@grubenv\n{hexed}\n")
    entry = grub.Entry("boot-20261127-000000", "t", "ro", False, True)
    with pytest.raises(Failed, match="next_entry"):
        engine._once(entry, grub.add_entry())
    assert Board.ran == []  # custom.cfg untouched: the engine's undo has nothing left behind


@pytest.mark.unit
def test_a_grub_boot_that_did_not_come_back_says_when_grubs_files_could_not_be_put_back(tmp_path):
    from rtlab.boot import machine

    class Board:
        last_error = "timed out"

        def new_boot(self, old, timeout):
            return {"uname": "6.1.0-default", "cmdline": "ro", "boot_id": "b2"}

        def run(self, command, data=None, timeout=120):
            if "SHA256SUMS" in command:  # grub.restore(): a digest differs
                return 5, "sha256sum: WARNING: 1 computed checksum did NOT match"
            return 0, ""

    class Record:
        folder = tmp_path

        def state(self, name):
            pass

    engine = machine.Engine.__new__(machine.Engine)
    engine.r = steps.Request(target="ssh://b", power_cycle="relay", boot_timeout=1)
    engine.board, engine.record, engine.say = Board(), Record(), lambda line: None
    engine.before, engine.base, engine.holder = {"boot_id": "b1"}, "/tmp/rtlab", "boot-1"
    engine.power_cycle = lambda: "--power-cycle exited with 0"
    console = type("C", (), {"tail": lambda self: []})()
    outcome = engine._did_not_boot(grub.Entry("boot-1", "t", "ro", False, True), console)
    said = " | ".join(outcome.lines)
    assert "could not be put back" in said and "--back" in said, said


@pytest.mark.unit
@pytest.mark.parametrize("state", ["execute", "wait", "verify"])
def test_ctrl_c_after_grubs_one_shot_was_set_names_the_way_back(state):
    from rtlab.boot import machine
    from rtlab.boot.image import KernelVersion

    class Board:
        def new_boot(self, old, timeout):
            return None  # not yet answering

    engine = machine.Engine.__new__(machine.Engine)
    engine.r = steps.Request(target="ssh://b")
    engine.board, engine.before, engine.state = Board(), {"uname": "6.1.0-default", "boot_id": "b1"}, state
    engine.grub = grub.Probe.parse("once=yes\ncustom=yes\n@@grubenv\n")
    line = engine._stopped(KernelVersion("6.12.0-rt", "#1")).line
    assert "--back puts them back" in line and "\n" not in line, line


@pytest.mark.unit
def test_the_second_ctrl_c_while_a_boot_is_undone_waits_and_the_third_names_the_way_back():
    from rtlab.boot import machine

    said: list[str] = []
    engine = machine.Engine.__new__(machine.Engine)
    engine.r, engine.say = steps.Request(target="ssh://b"), said.append
    waiting = engine.waiting_to_undo()
    waiting(2)  # the second: told, nothing raised
    assert len(said) == 1 and "rtlab stops once it is" in said[0] and "once more stops at once" in said[0]
    with pytest.raises(KeyboardInterrupt):
        waiting(2)
    assert said[1] == "stopped: ssh://b's kernel is unknown: rtlab boot --target ssh://b --back", said


@pytest.mark.hostile
@settings(max_examples=300, deadline=None)
@given(block=st.binary(max_size=2 * grub.ENV_SIZE), tail=st.binary(max_size=grub.ENV_SIZE))
def test_any_bytes_a_board_gives_as_grubenv_are_read_or_refused_with_a_reason(block, tail):
    """What a board's grubenv holds is its own: any bytes, with GRUB's header or not, are read
    as variables or refused with ValueError (which the board's probe turns into one line)."""
    for data in (block, grub.ENV_HEADER + tail):
        try:
            found = grub.parse_env(data)
        except ValueError as e:
            assert "\n" not in str(e)
        else:
            assert all(name and "=" not in name for name in found)


@pytest.mark.unit
@settings(max_examples=200, deadline=None)
@given(
    name=st.text(st.characters(codec="latin-1", exclude_characters="=\n#\\"), min_size=1, max_size=20),
    value=st.text(st.characters(codec="latin-1"), max_size=200),
)
def test_a_variable_set_in_grubenv_reads_back_as_set(name, value):
    data = grub.set_variable(grub.format_env([]), name, value)
    assert len(data) == grub.ENV_SIZE and data.startswith(grub.ENV_HEADER)
    assert grub.parse_env(data)[name] == value
