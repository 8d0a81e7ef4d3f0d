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
and rtlab says which it found. What the boot shares with the way back (--back, way_back.py),
its request, outcome, lock and undo list, is in steps.py."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

from rtlab import children
from rtlab.agent.shell import quote
from rtlab.boot import carry, grub, kexec, package, verify, way_back
from rtlab.boot.board import CONNECT_S, ConsoleCapture, Failed
from rtlab.boot.image import KernelVersion
from rtlab.boot.image import read as read_version
from rtlab.boot.record import CONSOLE, DMESG, Record, default_folder
from rtlab.boot.steps import COPY_S, Outcome, Request, Steps
from rtlab.boundary import untrusted
from rtlab.cache import cache_dir, sha256_of
from rtlab.errors import RunFailed, Stopped, UsageError

# After --power-cycle, the default kernel has at least this long (--boot-timeout's default) to
# answer, however short --boot-timeout is: that limit is for the kernel on trial, which a user
# shortens to give up on a hung one sooner; the default boots in its own time, and waiting on
# it is what keeps the board off an unknown kernel. It answers, and the wait ends, long before.
BACK_S = 300.0


def _shown(text: str | None) -> str | None:
    """A sysfs value the board sent, as the record keeps it: one printable line."""
    return None if text is None else untrusted.printable(text.strip())


class Engine(Steps):
    """A kernel booted on a board: the states above, each step's way back on the undo list."""

    def __init__(self, request: Request, say: Callable[[str], None]):
        super().__init__(request, say)
        self.tool = carry.Tool()  # how kexec runs on the board (boot() decides)
        self.method = "kexec"  # how this boot goes (boot() decides: _choose)
        self.grub: grub.Probe | None = None
        self.console_from = 0  # the console's size when the new kernel was sent

    def back(self) -> Outcome:
        """`rtlab boot --back`, with this boot's connection (way_back.py)."""
        return way_back.back(self)

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
                planned = grub.dry_run(files, sent)
                return self._dry_run("its GRUB takes a one-shot entry", planned, version, default)
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
            planned = kexec.dry_run(files.folder, {**sent, **self.tool.files}, load, self.tool.words)
            return self._dry_run(f"kexec: {self.tool.said}", planned, version, default)
        folder = r.out or default_folder(r.target, version.release)
        self.record = Record.create(
            folder, method=self.method, target=r.target,
            kernel={"path": str(r.kernel), "release": version.release, "version": version.build,
                    "sha256": sha256_of(r.kernel), **{n: str(p) for n, p in sent.items() if n != "kernel"},
                    **fetched},
            append=r.append, cmdline_asked=untrusted.printable(cmdline),
            before={"release": default, "cmdline": untrusted.printable(before.get("cmdline", "")),
                    "boot_id": untrusted.printable(before.get("boot_id", ""))},
        )  # fmt: skip
        if self.grub is None:
            self.record.set(kexec=self.tool.said)
        sent.update(self.tool.files)  # copied with the kernel, removed with its folder
        console = ConsoleCapture(r.console, folder / f".{CONSOLE}.capture")
        return self._boot_or_undo(version, files, sent, load, console)

    def _boot_or_undo(
        self, version: KernelVersion, files: kexec.Files | grub.Entry, sent: dict[str, Path], load: str,
        console: ConsoleCapture,
    ) -> Outcome:  # fmt: skip
        """The boot, its record finished however it ends. A stop: the boot undone, or its new
        kernel found, before rtlab stops; the next stops wait for that from the moment the first
        came, the third ends the wait (steps.waiting_to_undo)."""
        outcome: Outcome | None = None
        undoing = stopped = False
        try:
            with children.first_stop_holds_the_rest(noted=[], on_stop=self.waiting_to_undo()):
                try:
                    outcome = self._boot(version, files, sent, load, console)
                except KeyboardInterrupt:
                    undoing = stopped = True
                    outcome, undoing = self._stopped(version), False
        except KeyboardInterrupt:  # the undo's end, a third Ctrl-C, or one before or as it ended
            stopped = True
            outcome = self.cut_short() if undoing else outcome or self.not_begun()
        except BaseException:
            console.stop()
            raise
        with children.stops_deferred(noted=[] if stopped else None):  # the record kept whole
            self._finish(outcome, console)
        if stopped:
            raise Stopped(outcome.line)
        return outcome

    def _fetch(self, before: dict[str, str]) -> dict[str, str]:
        """A Debian kernel package's (or .deb's) image for the board's architecture, made the
        request's kernel; what was fetched, for the record (nothing for an image given)."""
        r, arch = self.r, before.get("arch", "")
        fetched: dict[str, str] = {}
        if r.package is not None:
            r.kernel, fetched = package.fetch_debian_kernel(r.target, r.package, arch)
            self.say(f"{r.package} for {arch}: {fetched['package']} {fetched['package_version']}")
        if r.deb is not None:
            r.kernel, fetched = package.kernel_of(r.deb, arch, r.target, cache_dir())
        return fetched

    def _dry_run(self, how: str, planned: list[str], version: KernelVersion, default: str) -> Outcome:
        """--dry-run: each step said, the method's own (grub.dry_run, kexec.dry_run) between the
        lock and the wait every boot shares; nothing changed."""
        r = self.r
        self.say(f"{r.target} runs {default}; {how}")
        self.step(f"take the lock: {self.base}/lock")
        for step in planned:
            self.step(step)
        self.step(f"wait up to {r.boot_timeout:.0f} s for SSH from a new boot")
        self.step(f"verify {version.release} ({version.build}), /proc/cmdline, sysfs, dmesg")
        if r.power_cycle:
            self.step(f"if it does not come back: run {r.power_cycle!r}, wait for {default}")
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
            self.enter("lock")
            self.lock()
            self.enter("install")
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
            self.enter("load")
            if isinstance(files, grub.Entry):
                self._once(files, load)
            else:
                self.say(
                    f"loading {version.release} with: {untrusted.printable(record.data['cmdline_asked'])}"
                )
                self.undo.append(("the loaded kernel unloaded (kexec -u)", kexec.unload(self.tool.words)))
                self.board.must(load, verify.DID_NOT_INSTALL, "kexec -l")
                self.enter("execute")
                self.board.must(kexec.execute(self.tool.words), verify.DID_NOT_BOOT, "kexec -e")
                self.undo.clear()  # from here the way back is a reset: the default boot is untouched
                self.board.drop()
        except Failed as e:
            undone = self.unwind()
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
        self.enter("execute")
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
        self.enter("wait")
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
        self.enter("verify")
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
                    judged.lines.append(self.restore_grub() or "nothing of rtlab's left in GRUB")
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
            self.enter("power-cycle")
            self.say(f"{r.target} did not come back: running --power-cycle {r.power_cycle!r}")
            lines.append(self.power_cycle())
            self.enter("wait-default")
            back = self.board.new_boot(self.before["boot_id"], max(r.boot_timeout, BACK_S))
        if back is not None:
            running = untrusted.printable(back.get("uname", "?"))
            on_default = f"{kexec.MARK}=" not in back.get("cmdline", "")
            lines.append(f"the board is back on {'its default kernel ' if on_default else ''}{running}")
            with contextlib.suppress(RunFailed, UsageError):
                self.board.run(kexec.unlock(self.base, self.holder))
            try:
                if isinstance(files, grub.Entry):
                    lines.append(self.restore_grub() or "nothing of rtlab's left in GRUB")
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
            undone = self.unwind()
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
        back = f"rtlab boot --target {self.r.target} --back returns it to {default}"
        said = f"while it booted: {self.r.target} runs {version.release} once it answers, or its default"
        return Outcome(verify.STOPPED, [f"{said} kernel {default} after any reset; {back}"], None)
