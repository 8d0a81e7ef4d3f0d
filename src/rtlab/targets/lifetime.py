"""Children of rtlab that must not outlive it: the local agent and QEMU guests."""

from __future__ import annotations

import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: signal.Signals) -> None:
    """Runs in the child before exec: the kernel sends it `sig` when rtlab ends, even by
    SIGKILL, and it gets a session of its own, so Ctrl-C reaches rtlab only, which then stops
    it in order."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)
    os.setsid()
