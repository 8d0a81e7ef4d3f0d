"""A bisection's or a sweep's subjects on a board (--target ssh://... with --kernel-build):
each subject's kernel, once built, booted by rtlab (boot/ensure.py) and verified before any
run of it is measured; a kernel that does not boot, or boots without what was asked, is
skipped as a build that fails is (git bisect's 125), its evidence in the subject's
prepare.log and the boot's record, and the search goes on. Before each run the board is
checked again (booted again when a reset put it on its default kernel), and at the end it is
back on its default kernel."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rtlab.bisect.measured import READY, SKIPPED, Subject
from rtlab.boot.ensure import Refused, Session, Want
from rtlab.errors import RunFailed
from rtlab.rundir.disk import append_line


class Boots:
    def __init__(self, session: Session, folder: Callable[[Subject], Path], kernel: Callable[[Subject], Path],
                 append: tuple[str, ...] = ()) -> None:  # fmt: skip
        self.session, self.folder, self.kernel, self.append = session, folder, kernel, append

    def want(self, s: Subject) -> Want:
        return Want(str(self.kernel(s)), self.append)

    def boot(self, s: Subject, again: bool = False) -> str:
        """S's kernel on the board, verified: READY, or SKIPPED with why in its prepare.log.
        AGAIN (its kernel booted before): RunFailed instead, with why in its prepare.log, and
        the caller boots it again (measured.py)."""
        try:
            on = self.session.ensure(self.want(s))
        except Refused as e:
            if again:
                log = self.folder(s) / "prepare.log"
                append_line(log, f"the kernel, which booted before, did not boot: {e}")
                raise RunFailed(f"{s.label}: its kernel did not boot: {e}") from None
            append_line(
                self.folder(s) / "prepare.log", f"the kernel did not boot as asked, skipped (125): {e}"
            )
            self.session.say(f"  {s.label}: skipped, its kernel did not boot as asked: {e}")
            return SKIPPED
        self.session.say(f"  {s.label}: verified, {on.release}")
        return READY

    def before(self, s: Subject) -> None:
        """Before a run of S: the board still (or again) on S's kernel."""
        try:
            self.session.ensure(self.want(s))
        except Refused as e:
            raise RunFailed(f"{s.label}: {e}") from None
