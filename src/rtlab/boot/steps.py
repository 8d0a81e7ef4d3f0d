"""What every change of a board's kernel shares, the boot (machine.py) and the way back
(way_back.py): the request, the outcome, and the steps both take with their undo list (the
board's lock, a power cycle, GRUB's files put back), so each way is read in its own module."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rtlab import children
from rtlab.boot import grub, kexec, verify
from rtlab.boot.board import Board, Failed
from rtlab.boot.record import Record
from rtlab.boundary import untrusted
from rtlab.errors import RunFailed, UsageError
from rtlab.targets.base import target_dir

POWER_CYCLE_S = 120.0  # a power switch's command answers within this
COPY_S = 900.0  # a kernel and an initramfs over a slow link


@dataclass
class Request:
    target: str
    kernel: Path | None = None  # None with --back, or with a package
    package: str | None = None  # a Debian kernel metapackage (linux-image-rt-amd64), fetched for the board
    deb: Path | None = None  # a linux-image-*.deb file (boot/package.py), checked against the board
    initrd: Path | None = None
    dtb: Path | None = None
    append: list[str] = field(default_factory=list)
    boot_timeout: float = 300.0
    power_cycle: str | None = None
    console: str | None = None
    fail_on_warnings: bool = False
    out: Path | None = None
    dry_run: bool = False
    accept_new_host_key: bool = False
    method: str = "auto"  # kexec, grub, or auto: kexec where the board runs it, else its GRUB
    make_default: bool = False  # after a verified boot, the bootloader's entry the default
    label: str | None = None  # the bootloader's menu title


@dataclass
class Outcome:
    verdict: str
    lines: list[str]
    folder: Path | None

    @property
    def line(self) -> str:
        return f"{self.verdict}: {self.lines[0]}" if self.lines else self.verdict


class Steps:
    """A board's connection and what has been done to it, newest last, with each step's way back."""

    def __init__(self, request: Request, say: Callable[[str], None]):
        self.r = request
        self.say = say
        self.board = Board(request.target, request.accept_new_host_key)
        self.base = target_dir()
        self.state = "connect"
        self.undo: list[tuple[str, str]] = []  # (what, board command), newest last
        self.record: Record | None = None
        self.before: dict[str, str] = {}  # what the board said it ran before
        self.holder = ""  # who holds the board's lock: this boot's or this --back's name

    def enter(self, state: str) -> None:
        self.state = state
        if self.record is not None:
            self.record.state(state)

    def step(self, text: str) -> None:
        self.say(("would " if self.r.dry_run else "") + text)

    def waiting_to_undo(self) -> Callable[[int], None]:
        """What a Ctrl-C says while a stopped boot is undone (the first was the stop itself):
        the second waits, the third stops at once, the board's kernel unknown, its way back said."""
        target, told = self.r.target, [0]

        def waiting(_signum: int) -> None:
            told[0] += 1
            if told[0] == 1:
                self.say(f"putting right what the boot changed on {target}: rtlab stops once it is "
                         f"(Ctrl-C once more stops at once, with {target}'s kernel unknown)")  # fmt: skip
                return
            with contextlib.suppress(OSError):  # a closed terminal: it stops all the same
                self.say(f"stopped: {target}'s kernel is unknown: rtlab boot --target {target} --back")
            raise KeyboardInterrupt

        return waiting

    def cut_short(self) -> Outcome:
        """A stopped boot whose undo a third Ctrl-C ended: the board's kernel unknown."""
        target = self.r.target
        said = f"a third Ctrl-C cut the boot's undo short: {target}'s kernel is unknown"
        return Outcome(verify.STOPPED, [f"{said}: rtlab boot --target {target} --back"], None)

    def not_begun(self) -> Outcome:
        """Stopped as the boot began, before it changed anything."""
        return Outcome(
            verify.STOPPED, [f"before the boot began: {self.r.target}'s kernel did not change"], None
        )

    def power_cycle(self) -> str:
        """--power-cycle run once, ended with rtlab; what it did, in one line (a switch that does
        not answer is said, and the board is still waited for)."""
        command = self.r.power_cycle or "true"  # called only when one was given
        try:
            done = children.run(["sh", "-c", command], timeout=POWER_CYCLE_S, capture_output=True)
        except (subprocess.TimeoutExpired, OSError) as e:
            return f"--power-cycle failed: {untrusted.printable(str(e))}"
        return f"--power-cycle exited with {done.returncode}"

    def lock(self) -> None:
        # released only if held by this boot: safe to know before the lock is taken
        self.undo.append(("the lock released", kexec.unlock(self.base, self.holder)))
        try:
            _, out = self.board.run(kexec.lock(self.base, self.holder, int(self.r.boot_timeout * 2 + COPY_S)))
        except (RunFailed, UsageError) as e:
            raise Failed(verify.DID_NOT_INSTALL, f"taking the board's lock: {e}") from None
        said = untrusted.printable(out.strip()).split()
        if said[:1] != ["locked"]:
            holder = f"{said[2]}, pid {said[1]}" if len(said) >= 3 else " ".join(said)
            raise Failed(
                verify.DID_NOT_INSTALL,
                f"{self.r.target} is busy: another rtlab run ({holder}) holds its lock; wait for it to end",
            )

    def unwind(self) -> list[str]:
        """What was done before execute undone, newest first; what could not be, said."""
        said = []
        while self.undo:
            what, command = self.undo.pop()
            try:
                status, _ = self.board.run(command, timeout=60)
                said.append(what if status == 0 else f"{what}: FAILED (exit status {status})")
            except (RunFailed, UsageError) as e:
                said.append(f"{what}: FAILED ({e})")
        return said

    def restore_grub(self) -> str:
        """The board's grubenv and custom.cfg as rtlab found them, proved by their SHA-256, and
        rtlab's folder on /boot removed; what was done in one line ("" where nothing was)."""
        status, out = self.board.run(grub.restore(), timeout=120)
        said = untrusted.printable(out.strip())
        if status != 0:
            raise RunFailed(
                f"{grub.GRUBENV} and {grub.CUSTOM} could not be put back as they were "
                f"(exit status {status}): {said[-300:]}; rtlab's copies are kept in {grub.SAVED}"
            )
        if "restored" not in said.split():
            return ""
        return f"{grub.GRUBENV} and {grub.CUSTOM} back byte for byte (sha256sum -c), {grub.BOOT_DIR} removed"
