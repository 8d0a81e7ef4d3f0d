"""The boot engine: states install -> load -> execute -> wait -> verify, each with its way
back, driven against a board over SSH (ktest.pl's and LAVA's boot actions taught the shape).

    connect   what the board runs now (release, cmdline, boot id): the kernel to come back to
    lock      the measurement's lock, so no run measures a board that is changing kernel
    install   the files into rtlab's folder on the board           back: the folder removed
    load      kexec -l with the command line asked                 back: kexec -u
    execute   kexec -e, detached: the connection drops             back: any reset
    wait      SSH answers from a new boot (another boot id)        else: --power-cycle, then
                                                                   the default kernel
    verify    the kernel running, /proc/cmdline, sysfs, dmesg

Before execute, a failure or Ctrl-C undoes what was done, newest first: the board runs the
kernel it ran. From execute on it runs the new kernel or, after any reset, its default one,
and rtlab says which it found."""

from __future__ import annotations

import contextlib
import hashlib
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rtlab import children
from rtlab.agent.shell import quote
from rtlab.boot import carry, grub, kexec, verify
from rtlab.boot.board import CONNECT_S, Board, ConsoleCapture, Failed
from rtlab.boot.image import KernelVersion
from rtlab.boot.image import read as read_version
from rtlab.boot.record import CONSOLE, DMESG, Record, default_folder
from rtlab.boundary import untrusted
from rtlab.cache import cache_dir
from rtlab.errors import RunFailed, Stopped, UsageError
from rtlab.targets.base import target_dir

ANSWER_S = 30.0  # a board that is up answers within this; one that hung never does
POWER_CYCLE_S = 120.0  # a power switch's command answers within this
COPY_S = 900.0  # a kernel and an initramfs over a slow link
# After --power-cycle, the default kernel has at least this long (--boot-timeout's default) to
# answer, however short --boot-timeout is: that limit is for the kernel on trial, which a user
# shortens to give up on a hung one sooner; the default boots in its own time, and waiting on
# it is what keeps the board off an unknown kernel. It answers, and the wait ends, long before.
BACK_S = 300.0


def fetch_debian_kernel(target: str, package: str, machine: str) -> tuple[Path, dict[str, str]]:
    """PACKAGE's kernel image for the board's architecture MACHINE (uname -m), fetched and
    checked as the QEMU targets fetch theirs (apt verifies Debian's index; the cache keeps files
    whole): (the image, its package, version and Debian release)."""
    from rtlab import debian
    from rtlab.cache import cache_dir
    from rtlab.targets.qemu import kernels, machines

    arch = machines.ARCHES.get(machine)
    if arch is None:
        raise UsageError(
            f"{target} is {untrusted.printable(machine)}: rtlab fetches Debian kernels for "
            f"{', '.join(machines.ARCHES)} only; give the image's path"
        )
    cache = cache_dir()
    apt = debian.Apt.first_verified(cache, arch.releases, arch.debian, arch.suites)
    image, name, version = kernels.fetch_kernel(apt, cache, package)
    return image, {"package": name, "package_version": version, "release_of_debian": apt.release}


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


def _shown(text: str | None) -> str | None:
    """A sysfs value the board sent, as the record keeps it: one printable line."""
    return None if text is None else untrusted.printable(text.strip())


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass
class Outcome:
    verdict: str
    lines: list[str]
    folder: Path | None

    @property
    def line(self) -> str:
        return f"{self.verdict}: {self.lines[0]}" if self.lines else self.verdict


class Engine:
    def __init__(self, request: Request, say: Callable[[str], None]):
        self.r = request
        self.say = say
        self.board = Board(request.target, request.accept_new_host_key)
        self.base = target_dir()
        self.state = "connect"
        self.undo: list[tuple[str, str]] = []  # (what, board command), newest last
        self.record: Record | None = None
        self.before: dict[str, str] = {}
        self.holder = ""
        self.tool = carry.Tool()  # how kexec runs on the board (boot() decides)
        self.method = "kexec"  # how this boot goes (boot() decides: _choose)
        self.grub: grub.Probe | None = None
        self.console_from = 0  # the console's size when the new kernel was sent

    # --- the steps ---------------------------------------------------------

    def _enter(self, state: str) -> None:
        self.state = state
        if self.record is not None:
            self.record.state(state)

    def _step(self, text: str) -> None:
        self.say(("would " if self.r.dry_run else "") + text)

    def _power_cycle(self) -> str:
        """--power-cycle run once, ended with rtlab; what it did, in one line (a switch that does
        not answer is said, and the board is still waited for)."""
        command = self.r.power_cycle or "true"  # called only when one was given
        try:
            done = children.run(["sh", "-c", command], timeout=POWER_CYCLE_S, capture_output=True)
        except (subprocess.TimeoutExpired, OSError) as e:
            return f"--power-cycle failed: {untrusted.printable(str(e))}"
        return f"--power-cycle exited with {done.returncode}"

    def _lock(self) -> None:
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

    def _unwind(self) -> list[str]:
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

    def _choose(self, before: dict[str, str]) -> str:
        """--method: kexec (never the default boot touched) where the board runs kexec or rtlab
        carries it, else the board's GRUB; one line naming the fix where neither can."""
        r = self.r
        kexec_ok = carry.on_board(before.get("kexec", "")) or carry.can_carry(before.get("arch", ""))
        if r.method == "kexec" or (r.method == "auto" and kexec_ok and not r.make_default):
            if r.make_default:
                raise UsageError(
                    "--make-default keeps a kernel through the board's bootloader: give --method grub"
                )
            return "kexec"
        _, said = self.board.run(grub.PROBE, timeout=60)
        probe = grub.Probe.parse(said)
        why = probe.refusal()
        if why is not None:
            raise UsageError(
                f"{r.target} {'has no kexec rtlab can run, and ' if r.method == 'auto' else ''}"
                f"cannot boot a one-shot entry of its GRUB: {why}"
                + ("; or give --method kexec" if kexec_ok else "")
            )
        if probe.ours:
            raise UsageError(
                f"{r.target} keeps a boot of rtlab's in its GRUB ({grub.SAVED}): "
                f"rtlab boot --target {r.target} --back first"
            )
        if r.dtb is not None:
            raise UsageError("--dtb: GRUB's entries here carry no device tree; give --method kexec")
        self.grub = probe
        return "grub"

    def boot(self) -> Outcome:
        r = self.r
        for extra in (r.initrd, r.dtb):
            if extra is not None and not extra.is_file():
                raise UsageError(f"{extra} does not exist")
        before = self.board.report()
        self.before = before
        fetched = self._fetch(before)
        assert r.kernel is not None
        version = read_version(r.kernel)
        if before.get("boot_id", "") == "":
            raise UsageError(f"{r.target} did not say what it runs (no /proc/sys/kernel/random/boot_id)")
        if f"{kexec.MARK}=" in before.get("cmdline", ""):
            raise UsageError(
                f"{r.target} runs a kernel rtlab booted ({untrusted.printable(before.get('uname', ''))}): "
                f"return it first with rtlab boot --target {r.target} --back"
            )
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        self.holder = f"boot-{stamp}"
        self.method = self._choose(before)
        files: kexec.Files | grub.Entry = kexec.Files(self.base, self.holder)
        sent = {
            "kernel": r.kernel,
            **({"initrd": r.initrd} if r.initrd else {}),
            **({"dtb": r.dtb} if r.dtb else {}),
        }
        cmdline = kexec.new_cmdline(before.get("cmdline", ""), r.append, self.holder)
        default = untrusted.printable(before.get("uname", "?"))
        if self.grub is not None:
            title = grub.check_title(r.label) if r.label is not None else f"rtlab: Linux {version.release}"
            files = grub.Entry(self.holder, title, cmdline, r.initrd is not None, self.grub.boot_on_root)
            load = grub.add_entry()
            if r.dry_run:
                return self._dry_run_grub(files, sent, version, default)
        else:
            self.tool = carry.tool(
                before, files.folder, cache_dir()
            )  # kexec-tools carried if the board has none
            load = kexec.load(
                files.path("kernel"), cmdline,
                files.path("initrd") if r.initrd else None, files.path("dtb") if r.dtb else None,
                self.tool.words,
            )  # fmt: skip
        if r.dry_run:
            return self._dry_run_kexec(files, sent, load, version, default)
        folder = r.out or default_folder(r.target, version.release)
        self.record = Record.create(
            folder, method=self.method, target=r.target,
            kernel={"path": str(r.kernel), "release": version.release, "version": version.build,
                    "sha256": _sha256(r.kernel), **{n: str(p) for n, p in sent.items() if n != "kernel"},
                    **fetched},
            append=r.append, cmdline_asked=untrusted.printable(cmdline),
            before={"release": default, "cmdline": untrusted.printable(before.get("cmdline", "")),
                    "boot_id": untrusted.printable(before.get("boot_id", ""))},
        )  # fmt: skip
        if self.grub is None:
            self.record.set(kexec=self.tool.said)
        sent.update(self.tool.files)  # copied with the kernel, removed with its folder
        console = ConsoleCapture(r.console, folder / f".{CONSOLE}.capture")
        try:
            outcome = self._boot(version, files, sent, load, console)
        except KeyboardInterrupt:
            # what the boot changed is undone, or the board's new kernel found, before rtlab
            # stops: a second Ctrl-C meanwhile waits (it would leave that half way, unsaid)
            def waiting(_signum: int) -> None:
                self.say(f"putting right what the boot changed on {r.target}: rtlab stops once it is")

            with children.stops_deferred(noted=[], on_stop=waiting):
                outcome = self._stopped(version)
                self._finish(outcome, console)
            raise Stopped(outcome.line) from None
        except BaseException:
            console.stop()
            raise
        self._finish(outcome, console)
        return outcome

    def _fetch(self, before: dict[str, str]) -> dict[str, str]:
        """A Debian kernel package's (or .deb's) image for the board's architecture, made the
        request's kernel; what was fetched, for the record (nothing for an image given)."""
        r = self.r
        fetched: dict[str, str] = {}
        if r.package is not None:
            r.kernel, fetched = fetch_debian_kernel(r.target, r.package, before.get("arch", ""))
            self.say(
                f"{r.package} for {before.get('arch', '')}: {fetched['package']} {fetched['package_version']}"
            )
        if r.deb is not None:
            from rtlab.boot import package

            r.kernel, fetched = package.kernel_of(r.deb, before.get("arch", ""), r.target, cache_dir())
        return fetched

    def _dry_run_grub(
        self, files: grub.Entry, sent: dict[str, Path], version: KernelVersion, default: str
    ) -> Outcome:
        """--dry-run by the board's GRUB: each step said, nothing changed."""
        r = self.r
        self.say(f"{r.target} runs {default}; its GRUB takes a one-shot entry")
        self._step(f"take the lock: {self.base}/lock")
        self._step(f"save {grub.GRUBENV} and {grub.CUSTOM} (bytes and SHA-256) into {grub.SAVED}")
        self._step(f"install into {files.folder}: " + ", ".join(f"{n} ({p})" for n, p in sent.items()))
        self._step(f"add to {grub.CUSTOM}:\n{files.menuentry()}")
        self._step(f"set next_entry={files.id} in {grub.GRUBENV}, reboot")
        return self._dry_run_end(version, default)

    def _dry_run_kexec(
        self, files: kexec.Files | grub.Entry, sent: dict[str, Path], load: str, version: KernelVersion,
        default: str,
    ) -> Outcome:  # fmt: skip
        """--dry-run by kexec: each step said, nothing changed."""
        r = self.r
        self.say(f"{r.target} runs {default}; kexec: {self.tool.said}")
        self._step(f"take the lock: {self.base}/lock")
        every = {**sent, **self.tool.files}
        self._step(f"install into {files.folder}: " + ", ".join(f"{n} ({p})" for n, p in every.items()))
        self._step(f"load: {load}")
        self._step(f"execute: {kexec.execute(self.tool.words)}")
        return self._dry_run_end(version, default)

    def _dry_run_end(self, version: KernelVersion, default: str) -> Outcome:
        """The steps every dry run ends with, whichever way the kernel is started."""
        r = self.r
        self._step(f"wait up to {r.boot_timeout:.0f} s for SSH from a new boot")
        self._step(f"verify {version.release} ({version.build}), /proc/cmdline, sysfs, dmesg")
        if r.power_cycle:
            self._step(f"if it does not come back: run {r.power_cycle!r}, wait for {default}")
        return Outcome("dry run", ["nothing was changed"], None)

    def _finish(self, outcome: Outcome, console: ConsoleCapture) -> None:
        text = console.stop()
        assert self.record is not None
        if text:
            self.record.note(CONSOLE, text)
        console.path.unlink(missing_ok=True)
        self.record.finish(outcome.verdict, outcome.lines)
        self.board.drop()

    def _boot(
        self,
        version: KernelVersion,
        files: kexec.Files | grub.Entry,
        sent: dict[str, Path],
        load: str,
        console: ConsoleCapture,
    ) -> Outcome:
        record = self.record
        assert record is not None
        folder = record.folder
        try:
            self._enter("lock")
            self._lock()
            self._enter("install")
            if self.grub is not None:
                self._save_grub()
            # each way back is known before its step runs: a stop in the middle undoes it too
            self.undo.append((f"{files.folder} removed", f"rm -rf {quote(files.folder)}"))
            self.board.must(files.make(), verify.DID_NOT_INSTALL, f"making {files.folder}")
            record.added(files.folder)
            for name, path in sent.items():
                self.say(f"copying {path} to {files.path(name)}")
                out = self.board.must(
                    files.put(name), verify.DID_NOT_INSTALL, f"copying {path}", path.read_bytes(), COPY_S
                )
                if out.strip().split()[-1:] != [str(path.stat().st_size)]:
                    raise Failed(
                        verify.DID_NOT_INSTALL,
                        f"{files.path(name)} holds {untrusted.printable(out.strip())[-40:]} bytes, "
                        f"not {path.stat().st_size}",
                    )
                record.added(files.path(name))
            if self.tool.prepare is not None:
                self.board.must(self.tool.prepare, verify.DID_NOT_INSTALL, f"kexec ({self.tool.said})")
            self.console_from = console.size()  # the new kernel's console begins after this
            self._enter("load")
            if isinstance(files, grub.Entry):
                self._once(files, load)
            else:
                self.say(
                    f"loading {version.release} with: {untrusted.printable(record.data['cmdline_asked'])}"
                )
                self.undo.append(("the loaded kernel unloaded (kexec -u)", kexec.unload(self.tool.words)))
                self.board.must(load, verify.DID_NOT_INSTALL, "kexec -l")
                self._enter("execute")
                self.board.must(kexec.execute(self.tool.words), verify.DID_NOT_BOOT, "kexec -e")
                self.undo.clear()  # from here the way back is a reset: the default boot is untouched
                self.board.drop()
        except Failed as e:
            undone = self._unwind()
            return Outcome(e.verdict, [str(e), *(f"undone: {u}" for u in undone)], folder)
        return self._wait(version, files, console)

    def _save_grub(self) -> None:
        """grubenv and custom.cfg kept on the board (bytes and SHA-256) before either changes;
        their way back (restore) known first."""
        record, probe = self.record, self.grub
        assert record is not None and probe is not None
        self.undo.append((f"{grub.GRUBENV} and {grub.CUSTOM} as they were, {grub.BOOT_DIR} removed",
                          grub.restore()))  # fmt: skip
        said = self.board.must(
            grub.save(), verify.DID_NOT_INSTALL, f"saving {grub.GRUBENV} into {grub.SAVED}"
        )
        digests = {}
        for line in untrusted.lines(said):
            digest, _, path = line.strip().partition("  ")
            if len(digest) == 64 and path in (grub.GRUBENV, grub.CUSTOM):
                digests[path] = untrusted.printable(digest)
        record.set(grub={"saved": grub.SAVED, "sha256_before": digests,
                         "custom_cfg_added": not probe.custom_exists})  # fmt: skip
        record.added(grub.SAVED)
        if not probe.custom_exists:
            record.added(grub.CUSTOM)

    def _once(self, entry: grub.Entry, add: str) -> None:
        """The entry into custom.cfg, next_entry into grubenv, the reboot into it."""
        record, probe = self.record, self.grub
        assert record is not None and probe is not None
        try:  # before anything changes: a grubenv too full for next_entry is a Failed, undone
            command, block = grub.set_once(entry, probe)
        except ValueError as e:
            raise Failed(verify.DID_NOT_INSTALL, f"next_entry in {grub.GRUBENV}: {e}") from None
        self.say(f"adding {entry.id} to {grub.CUSTOM}: {untrusted.printable(record.data['cmdline_asked'])}")
        self.board.must(add, verify.DID_NOT_INSTALL, f"adding the entry to {grub.CUSTOM}",
                        entry.menuentry().encode())  # fmt: skip
        self.board.must(command, verify.DID_NOT_INSTALL, f"next_entry in {grub.GRUBENV}", block)
        record.data["grub"].update(entry=entry.id, title=untrusted.printable(entry.title),
                                   grubenv_by="grub-editenv" if probe.editenv else "rtlab")  # fmt: skip
        record.save()
        self._enter("execute")
        self.board.must(kexec.reboot(), verify.DID_NOT_BOOT, "reboot")
        # from here any reset boots the default: GRUB clears next_entry before the kernel starts
        self.undo.clear()
        self.board.drop()

    def _wait(
        self, version: KernelVersion, files: kexec.Files | grub.Entry, console: ConsoleCapture
    ) -> Outcome:
        r, record = self.r, self.record
        assert record is not None
        folder = record.folder
        self._enter("wait")
        how = "rebooted into GRUB's one-shot entry" if self.grub else "kexec executed"
        self.say(
            f"{how}; waiting up to {r.boot_timeout:.0f} s for {r.target} to answer from {version.release}"
        )
        # with a power switch, a panic on the console ends the wait (ktest.pl's way): the reset
        # comes at once, not after --boot-timeout; without one, a panic=N kernel may still
        # reboot itself into the default, and only the wait sees that
        seen: list[str] = []

        def panicked() -> bool:
            line = console.panic(self.console_from) if r.power_cycle else None
            seen.extend([line] if line else [])
            return bool(line)

        after = self.board.new_boot(self.before["boot_id"], r.boot_timeout, stop=panicked)
        if after is None:
            return self._did_not_boot(files, console, seen[0] if seen else None)
        self._enter("verify")
        with contextlib.suppress(RunFailed, UsageError):  # the lock of the boot before, if it outlived it
            self.board.run(kexec.unlock(self.base, self.holder))
        found_report = self.board.report(dmesg=True)
        record.note(DMESG, found_report.get("dmesg", ""))
        found = verify.Found(
            uname_r=found_report.get("uname", ""), proc_version=found_report.get("version", ""),
            cmdline=found_report.get("cmdline", ""),
            isolated=None if found_report.get("isolated") == "@none" else found_report.get("isolated", ""),
            nohz_full=None if found_report.get("nohz_full") == "@none" else found_report.get("nohz_full", ""),
            dmesg=found_report.get("dmesg", ""),
        )  # fmt: skip
        judged = verify.judge(version, r.append, found)
        if judged.verdict == verify.ANOTHER_KERNEL and f"{kexec.MARK}=" not in found.cmdline:
            judged.lines.append("it came back on its default kernel (a reset during the boot?)")
            if isinstance(files, grub.Entry):  # GRUB spent the one-shot: its files put back now
                try:
                    judged.lines.append(self._restore_grub() or "nothing of rtlab's left in GRUB")
                except RunFailed as e:
                    judged.lines.append(str(e))
        record.set(
            cmdline_found=untrusted.printable(found.cmdline),
            found={"release": untrusted.printable(found.uname_r),
                   "version": untrusted.printable(found.proc_version),
                   "isolated": _shown(found.isolated), "nohz_full": _shown(found.nohz_full)},
            splats=judged.splats,
        )  # fmt: skip
        verdict = judged.verdict
        if verdict == verify.WITH_WARNINGS and not r.fail_on_warnings:
            judged.lines.append("not a failure without --fail-on-warnings")
        if r.make_default and isinstance(files, grub.Entry):
            if verify.failed(judged, r.fail_on_warnings):
                judged.lines.append("not made the default: the boot was not verified")
            else:
                self.board.must(grub.make_default(files), verdict, f"the default in {grub.CUSTOM}")
                record.set(made_default=files.id)
                judged.lines.append(
                    f"made the default: {files.id} ({grub.CUSTOM}); --back restores the board's"
                )
        return Outcome(verdict, judged.lines, folder)

    def _did_not_boot(
        self, files: kexec.Files | grub.Entry, console: ConsoleCapture, panic: str | None = None
    ) -> Outcome:
        r, record = self.r, self.record
        assert record is not None
        if panic:
            lines = [f"it panicked, said its console: {panic}"]
        else:
            lines = [
                f"no answer over SSH from a new boot within {r.boot_timeout:.0f} s ({self.board.last_error})"
            ]
        tail = console.tail()  # how far the kernel got, before a reset and the default's boot say more
        back = None
        if r.power_cycle:
            self._enter("power-cycle")
            self.say(f"{r.target} did not come back: running --power-cycle {r.power_cycle!r}")
            lines.append(self._power_cycle())
            self._enter("wait-default")
            back = self.board.new_boot(self.before["boot_id"], max(r.boot_timeout, BACK_S))
        if back is not None:
            running = untrusted.printable(back.get("uname", "?"))
            on_default = f"{kexec.MARK}=" not in back.get("cmdline", "")
            lines.append(f"the board is back on {'its default kernel ' if on_default else ''}{running}")
            with contextlib.suppress(RunFailed, UsageError):
                self.board.run(kexec.unlock(self.base, self.holder))
            try:
                if isinstance(files, grub.Entry):
                    lines.append(self._restore_grub() or "nothing of rtlab's left in GRUB")
                elif self.board.run(files.remove_all())[0] == 0:
                    lines.append(f"{files.root} removed")
            except (RunFailed, UsageError) as e:  # said, with the way to finish it
                lines.append(f"{untrusted.printable(str(e))}: rtlab boot --target {r.target} --back")
        else:
            lines.append(
                "the board did not come back: it runs neither kernel rtlab can reach"
                + ("" if r.power_cycle else "; give --power-cycle CMD to reset it")
            )
        if tail:
            lines.append("console's last lines: " + " | ".join(tail))
        return Outcome(verify.DID_NOT_BOOT, lines, record.folder)

    def _stopped(self, version: KernelVersion) -> Outcome:
        """Ctrl-C: the board left on a known kernel, and which said (and, by GRUB, that its
        files keep rtlab's entry until --back)."""
        if self.state in ("connect", "lock", "install", "load"):
            default = untrusted.printable(self.before.get("uname", "?"))
            undone = self._unwind()
            said = [f"the kernel did not change: {self.r.target} runs {default}"]
            return Outcome(verify.STOPPED, [*said, *(f"undone: {u}" for u in undone)], None)
        outcome = self._stopped_booting(version)
        if self.grub is not None:  # in the first line: the one Stopped shows
            outcome.lines[0] += (
                f"; {grub.CUSTOM} and {grub.GRUBENV} keep rtlab's entry: "
                f"rtlab boot --target {self.r.target} --back puts them back"
            )
        return outcome

    def _stopped_booting(self, version: KernelVersion) -> Outcome:
        default = untrusted.printable(self.before.get("uname", "?"))
        if self.state == "verify":
            return Outcome(
                verify.STOPPED, [f"{self.r.target} runs {version.release} (it was being verified)"], None
            )
        now = self.board.new_boot(self.before["boot_id"], CONNECT_S + 5)
        if now is not None:
            which = untrusted.printable(now.get("uname", "?"))
            return Outcome(verify.STOPPED, [f"while it booted: {self.r.target} now runs {which}"], None)
        return Outcome(
            verify.STOPPED,
            [f"while it booted: {self.r.target} runs {version.release} once it answers, "
             f"or its default kernel {default} after any reset; "
             f"rtlab boot --target {self.r.target} --back returns it to {default}"],
            None,
        )  # fmt: skip

    # --- the way back ----------------------------------------------------------

    def back(self) -> Outcome:
        """The board on its default kernel (a reboot, if it runs one rtlab booted) and
        rtlab's boot folder removed."""
        r = self.r
        try:
            self.board._open(ANSWER_S)
            before = self.board.report()
        except (RunFailed, UsageError) as e:
            # a kernel that hangs: the board answers again only once it is reset
            self.board.drop()
            if not r.power_cycle:
                raise UsageError(
                    f"{r.target} does not answer ({e}): give --power-cycle CMD to reset it"
                ) from None
            if r.dry_run:
                self._step(f"run --power-cycle {r.power_cycle!r}: {r.target} does not answer")
                return Outcome("dry run", ["nothing was changed"], None)
            self.say(f"{r.target} does not answer: running --power-cycle {r.power_cycle!r}")
            self.say(self._power_cycle())
            found = self.board.new_boot("", r.boot_timeout)  # any boot that answers
            if found is None:
                raise RunFailed(
                    f"{r.target} did not answer within {r.boot_timeout:.0f} s of --power-cycle "
                    f"({self.board.last_error})"
                ) from None
            before = found
        self.before = before
        running = untrusted.printable(before.get("uname", "?"))
        on_ours = f"{kexec.MARK}=" in before.get("cmdline", "")
        files = kexec.Files(self.base, "-")
        self.holder = f"back-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
        if r.dry_run:
            self._step(
                f"put back {grub.GRUBENV} and {grub.CUSTOM} from {grub.SAVED} if a boot saved them there"
            )
            self._step(f"remove {files.root} and unload any loaded kernel ({kexec.UNLOAD})")
            self._step(f"reboot {r.target} (it runs {running}, booted by rtlab)" if on_ours
                       else f"leave {r.target} on {running}: no kernel of rtlab's runs")  # fmt: skip
            return Outcome("dry run", ["nothing was changed"], None)
        self._lock()
        lines = []
        try:
            restored = self._restore_grub()
        except RunFailed:
            self._unwind()  # the lock released: the saved copies stay for another --back
            raise
        if restored:
            lines.append(restored)
        self.board.must(
            f"{files.remove_all()}; {kexec.UNLOAD} 2>/dev/null; true",
            verify.STOPPED,
            "removing rtlab's files",
        )
        lines.append(f"{files.root} removed")
        if not on_ours:
            self._unwind()
            return Outcome("back", [f"{r.target} runs {running}, not a kernel rtlab booted", *lines], None)
        self.undo.clear()  # the reboot ends the lock's holder
        self.board.must(kexec.reboot(), verify.STOPPED, "reboot")
        self.board.drop()
        self.say(f"rebooting {r.target}; waiting up to {r.boot_timeout:.0f} s")
        after = self.board.new_boot(before["boot_id"], r.boot_timeout)
        if after is None and r.power_cycle:
            self.say(self._power_cycle())
            after = self.board.new_boot(before["boot_id"], r.boot_timeout)
        if after is None:
            raise RunFailed(
                f"{r.target} did not come back within {r.boot_timeout:.0f} s of its reboot "
                f"({self.board.last_error})"
            )
        now = untrusted.printable(after.get("uname", "?"))
        if f"{kexec.MARK}=" in after.get("cmdline", ""):
            raise RunFailed(f"{r.target} came back on a kernel rtlab booted ({now})")
        with contextlib.suppress(RunFailed, UsageError):
            self.board.run(files.remove_all())
        return Outcome("back", [f"{r.target} is back on its default kernel {now}", *lines], None)

    def _restore_grub(self) -> str:
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
