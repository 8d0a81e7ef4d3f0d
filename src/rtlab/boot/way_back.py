"""The way back, `rtlab boot --back`: the board on its default kernel (a reboot when it
runs one rtlab booted, a power cycle when it answers no more), GRUB's files as they were and
rtlab's boot folder removed. Its steps are the boot's own (steps.py), under the same lock."""

from __future__ import annotations

import contextlib
import time

from rtlab.boot import grub, kexec, verify
from rtlab.boot.steps import Outcome, Steps
from rtlab.boundary import untrusted
from rtlab.errors import RunFailed, UsageError

ANSWER_S = 30.0  # a board that is up answers within this; one that hung never does


def back(s: Steps) -> Outcome:
    """The board on its default kernel (a reboot, if it runs one rtlab booted) and
    rtlab's boot folder removed."""
    r = s.r
    try:
        s.board._open(ANSWER_S)
        before = s.board.report()
    except (RunFailed, UsageError) as e:
        # a kernel that hangs: the board answers again only once it is reset
        s.board.drop()
        if not r.power_cycle:
            raise UsageError(
                f"{r.target} does not answer ({e}): give --power-cycle CMD to reset it"
            ) from None
        if r.dry_run:
            s.step(f"run --power-cycle {r.power_cycle!r}: {r.target} does not answer")
            return Outcome("dry run", ["nothing was changed"], None)
        s.say(f"{r.target} does not answer: running --power-cycle {r.power_cycle!r}")
        s.say(s.power_cycle())
        found = s.board.new_boot("", r.boot_timeout)  # any boot that answers
        if found is None:
            raise RunFailed(
                f"{r.target} did not answer within {r.boot_timeout:.0f} s of --power-cycle "
                f"({s.board.last_error})"
            ) from None
        before = found
    s.before = before
    running = untrusted.printable(before.get("uname", "?"))
    on_ours = f"{kexec.MARK}=" in before.get("cmdline", "")
    files = kexec.Files(s.base, "-")
    s.holder = f"back-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    if r.dry_run:
        s.step(f"put back {grub.GRUBENV} and {grub.CUSTOM} from {grub.SAVED} if a boot saved them there")
        s.step(f"remove {files.root} and unload any loaded kernel ({kexec.UNLOAD})")
        s.step(f"reboot {r.target} (it runs {running}, booted by rtlab)" if on_ours
                   else f"leave {r.target} on {running}: no kernel of rtlab's runs")  # fmt: skip
        return Outcome("dry run", ["nothing was changed"], None)
    s.lock()
    lines = []
    try:
        restored = s.restore_grub()
    except RunFailed:
        s.unwind()  # the lock released: the saved copies stay for another --back
        raise
    if restored:
        lines.append(restored)
    s.board.must(
        f"{files.remove_all()}; {kexec.UNLOAD} 2>/dev/null; true",
        verify.STOPPED,
        "removing rtlab's files",
    )
    lines.append(f"{files.root} removed")
    if not on_ours:
        s.unwind()
        return Outcome("back", [f"{r.target} runs {running}, not a kernel rtlab booted", *lines], None)
    s.undo.clear()  # the reboot ends the lock's holder
    s.board.must(kexec.reboot(), verify.STOPPED, "reboot")
    s.board.drop()
    s.say(f"rebooting {r.target}; waiting up to {r.boot_timeout:.0f} s")
    after = s.board.new_boot(before["boot_id"], r.boot_timeout)
    if after is None and r.power_cycle:
        s.say(s.power_cycle())
        after = s.board.new_boot(before["boot_id"], r.boot_timeout)
    if after is None:
        raise RunFailed(
            f"{r.target} did not come back within {r.boot_timeout:.0f} s of its reboot ({s.board.last_error})"
        )
    now = untrusted.printable(after.get("uname", "?"))
    if f"{kexec.MARK}=" in after.get("cmdline", ""):
        raise RunFailed(f"{r.target} came back on a kernel rtlab booted ({now})")
    with contextlib.suppress(RunFailed, UsageError):
        s.board.run(files.remove_all())
    return Outcome("back", [f"{r.target} is back on its default kernel {now}", *lines], None)
