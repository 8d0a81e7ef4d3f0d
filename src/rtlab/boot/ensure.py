"""A board on the kernel and command line a measurement names, booted only when it does not
run them already, verified before anything is measured, and back on its default kernel at
the end (rtlab study, rtlab compare --kernel, rtlab bisect and sweep on a board).

    session = Session(Setup(target="ssh://root@vf2", initrd=...), say)
    try:
        on = session.ensure(Want("linux-image-rt-amd64", ("isolcpus=1", "nohz_full=1")))
        ... measure; session.still(on) ...
    finally:
        session.close()          # the board back on its default kernel (also after Ctrl-C)

Every boot goes through the engine (machine.py; its lock and undo list in steps.py, --back in
way_back.py): its lock, its record, its way back. What a board runs is judged from what it
says, never from what rtlab remembers: a campaign killed in the middle of a boot and started
again finds the board on whatever kernel came up, and boots again unless that kernel and
command line are exactly the ones asked for."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rtlab import children
from rtlab.boot import kexec, machine, package, steps, verify
from rtlab.boot.board import Board, Failed
from rtlab.boot.image import KernelVersion
from rtlab.boot.image import read as read_version
from rtlab.boundary import untrusted
from rtlab.cache import cache_dir
from rtlab.errors import RunFailed, Stopped, UsageError
from rtlab.rundir.disk import read_index, write_json

LAST = "last.json"  # in the campaign's boots folder: the boot last verified, for a restart
DEFAULT = "default"  # the board's own kernel, as its bootloader boots it
# a Debian kernel metapackage as apt takes it (rtlab boot's KERNEL spells it so too)
PACKAGE = re.compile(r"linux-image-[a-z0-9][a-z0-9.+-]*(?:/[a-z0-9-]+)?")


@dataclass(frozen=True)
class Want:
    """A kernel (DEFAULT, an image's path, a linux-image .deb, or a Debian metapackage) and the
    arguments added to the board's command line."""

    kernel: str = DEFAULT
    append: tuple[str, ...] = ()

    @property
    def said(self) -> str:
        return f"{self.kernel}" + (f" with {' '.join(self.append)}" if self.append else "")


@dataclass
class Setup:
    """How the engine boots this board (rtlab boot's options of the same names)."""

    target: str
    initrd: Path | None = None
    dtb: Path | None = None
    boot_timeout: float = 300.0
    power_cycle: str | None = None
    console: str | None = None
    accept_new_host_key: bool = False
    boots: Path | None = None  # where each boot's record goes (default: the engine's boots/)


@dataclass
class On:
    """What the board was verified to run: the measurement's kernel and command line."""

    want: Want
    release: str
    version: str  # /proc/version
    cmdline: str
    boot_id: str
    evidence: list[str]
    record: Path | None = None  # the boot's record, when this boot was rtlab's

    def fields(self) -> dict[str, object]:
        """What a run's index keeps of it."""
        return {
            "kernel": self.want.kernel, "append": " ".join(self.want.append),
            "release": self.release, "version": self.version, "cmdline": self.cmdline,
            "boot_id": self.boot_id, "verified": self.evidence,
            **({"boot_record": str(self.record)} if self.record else {}),
        }  # fmt: skip


class Refused(RunFailed):
    """The board does not run what was asked, or a parameter did not take effect: the evidence."""

    def __init__(self, want: Want, lines: list[str], record: Path | None = None):
        self.want, self.lines, self.record = want, lines, record
        where = f" (record: {record})" if record else ""
        super().__init__(f"{want.said}: " + "; ".join(lines) + where)


def split_append(text: str) -> tuple[str, ...]:
    return tuple(verify.cmdline_words(text))


# where a kernel's image is in a folder: rtlab kernel build's out/, or a built tree
IMAGES = ("Image", "bzImage", "arch/x86/boot/bzImage", "arch/riscv/boot/Image", "arch/arm64/boot/Image")


def in_folder(folder: Path) -> Path:
    """The kernel image in FOLDER (rtlab kernel build's output folder, or a built tree)."""
    for name in IMAGES:
        if (folder / name).is_file():
            return folder / name
    raise UsageError(f"{folder} holds no kernel image ({', '.join(IMAGES)}): give the image's path")


def label_of(kernel: str) -> str:
    """A kernel's name in a table: a folder's or a file's name, a package's own."""
    path = Path(kernel)
    if PACKAGE.fullmatch(kernel) and not path.exists():
        return kernel
    if path.name in IMAGES:  # out/rt/bzImage is rt
        return path.resolve().parent.name
    return path.name or kernel


class Session:
    """One campaign's hold on a board: ensure() before each measurement, close() at the end."""

    def __init__(self, setup: Setup, say: Callable[[str], None]):
        self.setup = setup
        self.say = say
        self.board = Board(setup.target, setup.accept_new_host_key)
        self._images: dict[str, tuple[Path, KernelVersion]] = {}
        self.booted = False  # whether this session changed the board's kernel
        self.stopped = False  # whether a Ctrl-C came while close() put the board back
        self.closed: str | None = None  # what close() said it did
        self.silent = False  # whether close() found the board not answering (its kernel unknown)
        self.boots = 0
        self._last_asked = self._remembered()

    # --- what the board runs -------------------------------------------------

    def report(self) -> dict[str, str]:
        _, out = self.board.run(kexec.report(dmesg=False), timeout=60)
        found = kexec.parse_report(out)
        _, mask = self.board.run(f"cat {verify.IRQ_AFFINITY} 2>/dev/null || echo @none", timeout=60)
        found["irqaffinity"] = mask.strip()[:200] or "@none"
        return found

    def _answering(self) -> dict[str, str]:
        """The board's report once it answers: a campaign started again while it boots waits."""
        try:
            return self.report()
        except (RunFailed, UsageError):
            self.say(f"{self.setup.target} does not answer: waiting up to {self.setup.boot_timeout:.0f} s")
            found = self.board.new_boot("", self.setup.boot_timeout)
            if found is None:
                raise RunFailed(
                    f"{self.setup.target} did not answer within {self.setup.boot_timeout:.0f} s "
                    f"({self.board.last_error})"
                ) from None
            return self.report()

    def image(self, kernel: str, arch: str) -> tuple[Path, KernelVersion]:
        """KERNEL as an image on the host and its version: a path, a .deb's image, a package's."""
        if kernel in self._images:
            return self._images[kernel]
        path = Path(kernel)
        if path.is_dir():
            path = in_folder(path)
        if path.suffix == ".deb" and path.is_file():
            path, _ = package.kernel_of(path, arch, self.setup.target, cache_dir())
        elif not path.is_file():
            if not PACKAGE.fullmatch(kernel):
                raise UsageError(
                    f"kernel {kernel} does not exist: give the path of a bzImage or Image, a linux-image "
                    f".deb, a Debian kernel metapackage such as linux-image-rt-amd64, or {DEFAULT}"
                )
            path, fetched = package.fetch_debian_kernel(self.setup.target, kernel, arch)
            self.say(f"{kernel} for {arch}: {fetched['package']} {fetched['package_version']}")
        found = (path, read_version(path))
        self._images[kernel] = found
        return found

    def _runs(self, want: Want, found: dict[str, str]) -> bool:
        """Whether the board, as FOUND, runs WANT already: the kernel, and the command line
        rtlab would give it (its default one when rtlab booted nothing, else exactly the
        one asked: no argument of another cell's left over)."""
        words = verify.cmdline_words(found.get("cmdline", ""))
        ours = any(w.startswith(f"{kexec.MARK}=") for w in words)
        if want.kernel == DEFAULT:
            return not ours and all(a in words for a in want.append)
        _, version = self.image(want.kernel, found.get("arch", ""))
        if not version.matches(found.get("uname", ""), found.get("version", "")):
            return False
        if not ours:
            return all(a in words for a in want.append)
        # a kernel rtlab booted stands only for the boot this session made for WANT: one
        # booted for another cell, or before a restart, may carry arguments WANT has not
        return self._last_asked == (want, found.get("boot_id"))

    def _remembered(self) -> tuple[Want, str | None] | None:
        """The last boot this campaign verified, as BOOTS/last.json keeps it: a campaign started
        again finds the board still in that boot (the same boot id) and boots nothing."""
        if self.setup.boots is None or not (self.setup.boots / LAST).is_file():
            return None
        try:
            doc = read_index(self.setup.boots / LAST)
            kernel, append, boot_id = doc["kernel"], doc["append"], doc["boot_id"]
        except (UsageError, KeyError):
            return None  # not trusted: the board is booted again
        if not (isinstance(kernel, str) and isinstance(boot_id, str) and isinstance(append, list)):
            return None
        if not all(isinstance(a, str) for a in append):
            return None
        return Want(kernel, tuple(append)), boot_id

    def _remember(self, want: Want, boot_id: str | None) -> None:
        self._last_asked = (want, boot_id)
        if self.setup.boots is not None:
            self.setup.boots.mkdir(parents=True, exist_ok=True)
            doc = {"kernel": want.kernel, "append": list(want.append), "boot_id": boot_id}
            write_json(self.setup.boots / LAST, doc)

    # --- the changes -----------------------------------------------------------

    def _engine(self, **extra: object) -> machine.Engine:
        s = self.setup
        request = steps.Request(
            target=s.target, initrd=s.initrd, dtb=s.dtb, boot_timeout=s.boot_timeout,
            power_cycle=s.power_cycle, console=s.console, accept_new_host_key=s.accept_new_host_key,
            method="kexec" if s.initrd or s.dtb else "auto", **extra,  # type: ignore[arg-type]
        )  # fmt: skip
        return machine.Engine(request, self.say)

    def back(self) -> str:
        engine = self._engine()
        try:
            outcome = engine.back()
        finally:
            engine.board.drop()
        self.board.drop()
        return outcome.line

    def ensure(self, want: Want) -> On:
        """The board on WANT, verified: booted when it runs anything else (first back to its
        default when it runs a kernel rtlab booted). Refused (the evidence) when the kernel
        does not boot, another one runs, or an argument did not take effect."""
        found = self._answering()
        record: Path | None = None
        if not self._runs(want, found):
            if f"{kexec.MARK}=" in found.get("cmdline", ""):
                self.say(f"{self.setup.target}: back to its default kernel first")
                self.say(self.back())
                found = self.report()
            elif self.booted:
                # a reset put the board back on its default kernel: what a boot of this session
                # left (GRUB's files, which a new boot would refuse to change again) put back
                self.back()
            if not self._runs(want, found):
                if want.kernel == DEFAULT:
                    raise Refused(want, [
                        f"the board's default kernel runs without {' '.join(want.append)}: rtlab boots it "
                        "with arguments only from its image: give its path (or package) instead of default"
                    ])  # fmt: skip
                path, version = self.image(want.kernel, found.get("arch", ""))
                record = self._boot(want, path)
                found = self.report()
        return self._verified(want, found, record)

    def _boot(self, want: Want, path: Path) -> Path | None:
        s = self.setup
        out = None
        if s.boots is not None:
            s.boots.mkdir(parents=True, exist_ok=True)
            n = sum(1 for p in s.boots.iterdir() if p.is_dir()) + 1
            while (s.boots / f"{n:03d}").exists():  # a record removed by hand: never another's folder
                n += 1
            out = s.boots / f"{n:03d}"
        engine = self._engine(kernel=path, append=list(want.append), out=out)
        self.say(f"booting {want.said} on {s.target}")
        self.booted = True
        try:
            outcome = engine.boot()
        except Failed as e:
            raise Refused(want, [f"{e.verdict}: {e}"]) from None
        finally:
            engine.board.drop()
            self.board.drop()
        self.boots += 1
        if outcome.verdict not in verify.GOOD:
            raise Refused(want, [outcome.verdict, *outcome.lines], outcome.folder)
        return outcome.folder

    def _verified(self, want: Want, found: dict[str, str], record: Path | None) -> On:
        release = untrusted.printable(found.get("uname", ""))
        version = untrusted.printable(found.get("version", ""))
        cmdline = untrusted.printable(found.get("cmdline", ""))
        if want.kernel == DEFAULT:
            # the board's own kernel: nothing to hold it against but the command line's words
            expected = KernelVersion(found.get("uname", "").strip(), found.get("version", "").strip())
        else:
            expected = self.image(want.kernel, found.get("arch", ""))[1]
        judged = verify.judge(
            expected, list(want.append),
            verify.Found(
                uname_r=found.get("uname", ""), proc_version=found.get("version", ""),
                cmdline=found.get("cmdline", ""),
                isolated=None if found.get("isolated") == "@none" else found.get("isolated", ""),
                nohz_full=None if found.get("nohz_full") == "@none" else found.get("nohz_full", ""),
            ),
        )  # fmt: skip
        problems = verify.took_effect(want.append, found)
        if judged.verdict not in verify.GOOD or problems:
            raise Refused(want, [judged.verdict, *judged.lines, *problems], record)
        lines = list(judged.lines)
        lines += [
            f"{a} took effect ({verify.IRQ_AFFINITY})" for a in want.append if a.startswith("irqaffinity=")
        ]
        if f"{kexec.MARK}=" in found.get("cmdline", ""):
            self._remember(want, found.get("boot_id"))  # verified: this boot stands for WANT
        boot_id = untrusted.printable(found.get("boot_id", ""))
        return On(want, release, version, cmdline, boot_id, lines, record)

    def still(self, on: On) -> str | None:
        """After a measurement: None when the board still runs the boot ON was verified on,
        else what happened (a watchdog's reset puts it on its default kernel mid-run)."""
        try:
            found = self._answering()
        except RunFailed as e:
            return str(e)
        now = untrusted.printable(found.get("boot_id", ""))
        if now != on.boot_id:
            return (
                f"the board rebooted during the measurement: it runs "
                f"{untrusted.printable(found.get('uname', '?'))} (boot {now}), not boot {on.boot_id}"
            )
        return None

    def close(self) -> str | None:
        """The board back on its default kernel when it runs one rtlab booted; what was done.
        A Ctrl-C meanwhile waits until that is done (stopped half way, the board would run a
        kernel no one knows) and leaves `stopped` set: the caller stops after it (`after_close`),
        and a stop already on its way keeps its own words. The third ends the wait (a board
        that does not answer is waited for up to --boot-timeout, each of its boots too)."""
        target = self.setup.target
        held: list[int] = []

        def waiting(_signum: int) -> None:
            if len(held) == 1:
                self.say(f"rtlab stops once {target} is found on its default kernel, or put back on it")
            elif len(held) == 2:
                self.say(f"Ctrl-C once more stops at once, with {target}'s kernel unknown")
            else:
                with contextlib.suppress(OSError):  # a closed terminal: it stops all the same
                    self.say(f"stopped: {target}'s kernel is unknown: rtlab boot --target {target} --back")
                raise KeyboardInterrupt

        with children.stops_deferred(noted=held, on_stop=waiting):
            said = self._close()
        self.closed = said
        self.stopped = self.stopped or bool(held)
        return said

    def after_close(self, again: str = "") -> None:
        """Stopped, when a Ctrl-C came while close() put the board back; AGAIN: how to go on."""
        if not self.stopped:
            return
        target, said = self.setup.target, self.closed
        if said is None:
            found = f"{target} runs its default kernel"
        elif self.silent:
            found = said
        else:
            found = f"{target} was put back on its default kernel first ({said})"
        raise Stopped(f"interrupted as rtlab let go of {target}: {found}" + (f"; {again}" if again else ""))

    def _close(self) -> str | None:
        try:
            found = self._answering()
        except RunFailed as e:
            self.silent = True
            return f"{self.setup.target} did not answer: {e}; rtlab boot --target {self.setup.target} --back"
        finally:
            self.board.drop()
        if f"{kexec.MARK}=" not in found.get("cmdline", ""):
            if self.booted:  # a reset put it on its default: what a boot of this session left put back
                return self.back()
            return None
        self.say(f"{self.setup.target}: back to its default kernel")
        line = self.back()
        self.say(line)
        return line


def close_all(sessions: Iterable[Session], say: Callable[[str], None], shown: Callable[[str], bool]) -> None:
    """Each board let go of (close), what SHOWN picks of what each said said; a Ctrl-C between
    two is held as one during a close is (each is `stopped` then). A wait ended by the third
    Ctrl-C lets go of the boards after it unchecked, each named with its way back, then stops."""
    forced = False
    sessions = list(sessions)
    held: list[int] = []
    with children.stops_deferred(noted=held):
        for session in sessions:
            target = session.setup.target
            if forced:
                back = f"rtlab boot --target {target} --back"
                say(f"{target}: not checked: {back} puts it on its default kernel")
                continue
            try:
                said = session.close()
            except KeyboardInterrupt:
                forced = True
                continue
            if said is not None and shown(said):
                say(said)
    if forced:
        raise KeyboardInterrupt
    for session in sessions:
        session.stopped = session.stopped or bool(held)


@dataclass
class Cells:
    """Keys of measurements grouped by the boot they need, in first-seen order: the cells that
    share a kernel and command line are measured on one boot."""

    order: list[tuple[Want, list[str]]] = field(default_factory=list)

    def add(self, want: Want, key: str) -> None:
        for have, keys in self.order:
            if have == want:
                keys.append(key)
                return
        self.order.append((want, [key]))

    def keys(self) -> list[str]:
        return [k for _, keys in self.order for k in keys]
