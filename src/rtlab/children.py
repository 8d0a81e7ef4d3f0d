"""Every process rtlab starts, started here, so that none outlives it: each leads a process
group of its own, and when rtlab is done with it (it ended, or rtlab is stopped by Ctrl-C,
SIGTERM or SIGHUP, a timeout or an exception) what is left of its group gets SIGTERM, then
SIGKILL after a short grace, and is waited for. If rtlab itself is killed (SIGKILL), the kernel
sends the child the signal its caller chose (prctl PR_SET_PDEATHSIG): the child only, not what
it started.

    running(argv)   a child for the length of a `with` block (a stream read, a long command)
    run(argv)       a command run to its end, as subprocess.run (git, tar, make, apt)
    start(argv)     a child whose owner ends it itself (the agent, a QEMU guest)

tests/test_processes.py fails on a process started anywhere else."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Any, Literal, overload

_PR_SET_PDEATHSIG = 1
STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# long enough for make to remove a half-written object and a shell to pass the signal on,
# short enough that a user who stopped rtlab does not wait for a command that ignores it
GRACE_S = 3.0
_LOOK_S = 0.25  # how often run() looks whether a command whose output is still open has ended


@contextmanager
def stops_deferred(
    noted: list[int] | None = None, on_stop: Callable[[int], None] | None = None
) -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP wait while a child is started (or ended), then take effect as
    they would have. Raised between the fork and Popen's return, they would leave a child that
    no one knows and so no one ends (seen: an interrupted preflight's cyclictest still running
    after rtlab had ended); raised while a child is ended, they would leave it half ended. The
    caller's cleanup must enclose the `with`: what was held back is raised as it ends.
    With NOTED, what came is left there for the caller instead (a board being put back on its
    kernel is not stopped half way, nor the stop that began it replaced); ON_STOP is told of
    each as it comes, to say why nothing stops yet."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread runs Python's signal handlers
        return
    held: list[int] = noted if noted is not None else []

    def hold(signum: int, _frame: object) -> None:
        held.append(signum)
        if on_stop is not None:
            with contextlib.suppress(OSError):  # a closed terminal (SIGHUP) takes no message
                on_stop(signum)

    previous = {s: signal.signal(s, hold) for s in STOPS}
    try:
        yield
    finally:
        _put_back(previous)
        for signum in dict.fromkeys(held) if noted is None else ():
            signal.raise_signal(signum)


class first_stop_holds_the_rest:  # noqa: N801 (used as a function: `with first_stop_holds_the_rest(...)`)
    """The block's first Ctrl-C, SIGTERM or SIGHUP raises KeyboardInterrupt as rtlab's handler
    does; each after it is NOTED (ON_STOP told of it) and raises nothing, so the block's answer
    to the first (a boot undone) is never cut by a second that came before that answer could
    defer it: `except KeyboardInterrupt: with stops_deferred(...)` leaves a moment between the
    two. ON_STOP may raise to end the wait (a third Ctrl-C). One handler for every stop, never
    changed while the block runs: a nested stops_deferred puts back the same one whichever stop
    comes while it does. A stop that comes as the handlers are put in place or back is raised
    after them; a first one the block swallowed is raised again as it ends. A stop ignored
    (nohup) or handled otherwise is left as it is.
    A class, not a generator: Python looks for a signal's handler as a function begins, and a
    generator's finally is reached through contextlib's __exit__, where a stop would raise
    before the handlers were put back (and leave them in place); here the handler knows its
    own __exit__ and notes a stop that comes there."""

    def __init__(self, noted: list[int], on_stop: Callable[[int], None] | None = None) -> None:
        self.noted, self.on_stop = noted, on_stop
        self.before = len(noted)
        self.fired = False
        self.closing = True  # until the handlers are in place: a stop then is noted
        self.previous: dict[signal.Signals, Any] = {}

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        if not self.fired and not self.closing and (frame is None or frame.f_code is not _EXIT):
            self.fired = True
            raise KeyboardInterrupt
        self.noted.append(signum)
        if self.on_stop is not None and self.fired and not self.closing:
            with contextlib.suppress(OSError):  # a closed terminal (SIGHUP) takes no message
                self.on_stop(signum)

    def __enter__(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # only the main thread runs Python's signal handlers
        try:
            for s in STOPS:
                if signal.getsignal(s) is signal.default_int_handler:
                    self.previous[s] = signal.signal(s, self._stop)
            self.closing = False
            if len(self.noted) > self.before:  # came as the handlers were put in place
                raise KeyboardInterrupt
        except BaseException:
            self.closing = True
            _put_back(self.previous)
            raise

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        self.closing = True  # a store first: no handler runs before it but as this began (_EXIT)
        _put_back(self.previous)
        if not self.fired and len(self.noted) > self.before:
            signal.raise_signal(self.noted[self.before])  # came as the block ended: taken now
        if kind is None and self.fired:
            raise KeyboardInterrupt  # swallowed inside: the stop still stops


_EXIT = first_stop_holds_the_rest.__exit__.__code__


def _put_back(previous: Mapping[signal.Signals, Any]) -> None:
    """Each stop's handler as it was, all put back before any is taken: one arriving between
    two would otherwise raise there and leave the others held for good. The mask keeps them off
    this thread; one another thread took is run here all the same, and waits for the rest."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
    pending: BaseException | None = None
    try:
        for s, handler in previous.items():
            if handler is None:  # set outside Python, and left as it was
                continue
            try:
                signal.signal(s, handler)
            except BaseException as e:  # a handler put back already ran: the rest first
                pending = pending or e
                signal.signal(s, handler)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    if pending is not None:
        raise pending


def start(
    argv: Sequence[str],
    parent_death: signal.Signals = signal.SIGTERM,
    known: Callable[[subprocess.Popen[Any]], None] | None = None,
    **popen: Any,
) -> subprocess.Popen[Any]:
    """ARGV started in a session of its own that ends with rtlab (the kernel sends it
    PARENT_DEATH then); KNOWN is told of it before a signal held back while it started takes
    effect (a handler that stops it must find it). A stop held back that raises ends its group
    before it is raised. Its standard input is nothing unless given: it is not in the
    terminal's foreground group, and must not wait on what the user types for rtlab."""
    popen.setdefault("stdin", subprocess.DEVNULL)
    proc = None
    try:
        with stops_deferred():
            parent = os.getpid()
            proc = subprocess.Popen(argv, preexec_fn=lambda: die_with_parent(parent_death, parent), **popen)
            if known is not None:
                known(proc)
    except BaseException:
        if proc is not None:
            end_group(proc.pid)  # just started: nothing of its own to put right
            proc.wait()
        raise
    return proc


@contextmanager
def running(
    argv: Sequence[str],
    parent_death: signal.Signals = signal.SIGTERM,
    grace_s: float = GRACE_S,
    leader_first: bool = False,
    **popen: Any,
) -> Iterator[subprocess.Popen[Any]]:
    """ARGV for the length of the block. As the block ends, however it ends, its group is
    ended and the child waited for: a command that did not finish is stopped, and what a
    finished one left running in the background (`cmd &`) goes with it. LEADER_FIRST: the
    grace's SIGTERM goes to ARGV alone (a shell whose trap puts things back, and needs its
    own commands for that), the rest of the group is killed after it."""
    proc = start(argv, parent_death, **popen)
    try:
        yield proc
    finally:
        with stops_deferred():
            # a leader rtlab has reaped already (its pid free again) is never signalled alone
            end_group(proc.pid, grace_s, leader_first=leader_first and proc.poll() is None)
            proc.wait()


@overload
def run(
    argv: Sequence[str],
    *,
    text: Literal[True],
    input: str | None = None,
    timeout: float | None = None,
    check: bool = False,
    capture_output: bool = False,
    **options: Any,
) -> subprocess.CompletedProcess[str]: ...
@overload
def run(
    argv: Sequence[str],
    *,
    text: Literal[False] = False,
    input: bytes | None = None,
    timeout: float | None = None,
    check: bool = False,
    capture_output: bool = False,
    **options: Any,
) -> subprocess.CompletedProcess[bytes]: ...
def run(
    argv: Sequence[str],
    *,
    text: bool = False,
    input: str | bytes | None = None,
    timeout: float | None = None,
    check: bool = False,
    capture_output: bool = False,
    **options: Any,
) -> subprocess.CompletedProcess[Any]:
    """ARGV run to its end as subprocess.run runs it, through `running`: a timeout or a stop
    ends its whole group (subprocess.run kills the command alone, and what it started lives on).
    Its output is read until the command itself ends, not until all it started has closed it:
    a command that leaves `sleep 100 &` behind returns at once, and the sleep is ended."""
    if capture_output:
        options.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if input is not None:
        options["stdin"] = subprocess.PIPE
    grace_s = options.pop("grace_s", GRACE_S)
    deadline = None if timeout is None else time.monotonic() + timeout
    with running(argv, text=text, grace_s=grace_s, **options) as proc:  # leader_first passes on
        while True:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if input is not None:  # communicate cannot go on sending it after a timeout
                out, err = proc.communicate(input, left)
                break
            try:
                out, err = proc.communicate(None, _LOOK_S if left is None else min(left, _LOOK_S))
                break
            except subprocess.TimeoutExpired:
                if proc.poll() is not None:  # ended; what it left behind holds its output open
                    end_group(proc.pid, grace_s)
                    out, err = proc.communicate()
                    break
                if left is not None and left <= _LOOK_S:
                    raise subprocess.TimeoutExpired(list(argv), timeout or 0.0) from None
    done = subprocess.CompletedProcess(list(argv), proc.returncode, out, err)
    if check:
        done.check_returncode()
    return done


# resolved once here: a dlopen in a child forked from a process with threads (the SSH event
# loop, QEMU's console reader) can deadlock
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl


def die_with_parent(sig: signal.Signals, parent: int) -> None:
    """Runs in the child before exec: the kernel sends it `sig` when rtlab ends, even by
    SIGKILL, and it gets a session of its own, so Ctrl-C reaches rtlab only, which then stops
    it in order. A rtlab gone between the fork and this call is not waited for: the child ends."""
    _PRCTL(_PR_SET_PDEATHSIG, sig)
    os.setsid()
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)


def _stat(pid: int | str) -> list[str] | None:
    """/proc/PID/stat's fields after the command's name (state, parent, group, ...); None
    once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()
    except OSError:
        return None


def _live_members(group: int) -> bool:
    """Whether a process of this group is still alive (zombies are only waiting to be reaped)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(entry)
            if fields is not None and int(fields[2]) == group and fields[0] != "Z":
                return True
    return False


def _ended(pid: int, seconds: float) -> None:
    """Until process PID has exited (a zombie, or gone) or SECONDS have passed."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        fields = _stat(pid)
        if fields is None or fields[0] == "Z":
            return
        time.sleep(0.02)


def _gone(group: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _live_members(group):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def end_group(group: int, grace_s: float = 0.0, timeout_s: float = 10.0, leader_first: bool = False) -> None:
    """A process group rtlab leads ended: SIGTERM (to its leader alone with LEADER_FIRST), and
    SIGKILL to what is left after GRACE_S (at once without a grace), then until its last
    process is gone: a killed process takes a moment to exit (freeing locked memory), and a
    user who sees rtlab return must not see its tools still there."""
    deadline = time.monotonic() + grace_s
    try:
        if grace_s > 0 and leader_first:
            with contextlib.suppress(ProcessLookupError):
                os.kill(group, signal.SIGTERM)  # the leader's pid is its group's id
            _ended(group, grace_s)
            # the leader has put things right (or the grace is over): the rest of its group
        os.killpg(group, signal.SIGTERM if grace_s > 0 else signal.SIGKILL)
    except ProcessLookupError:
        return  # nothing of it is left
    if grace_s > 0:
        if _gone(group, max(deadline - time.monotonic(), 0.0)):
            return
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            return
    _gone(group, timeout_s)
