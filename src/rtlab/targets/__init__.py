"""Targets by name: `local`, `ssh://[user@]host[:port]`, `qemu:...`, `labgrid:PLACE`, one
interface (base.py)."""

from __future__ import annotations

from rtlab.errors import UsageError
from rtlab.targets.base import Target
from rtlab.targets.local import LocalTarget


def open_target(spec: str, accept_new_host_key: bool = False) -> Target:
    if spec in ("", "local"):
        return LocalTarget()
    kind, _, rest = spec.partition(":")
    if kind == "qemu":
        from rtlab.targets.qemu import QemuTarget
        from rtlab.targets.qemu.spec import GuestSpec

        return QemuTarget(GuestSpec.parse(rest))
    if kind == "ssh":
        from rtlab.targets.ssh import SshTarget

        return SshTarget(spec, accept_new_host_key=accept_new_host_key)
    if kind == "labgrid":
        from rtlab.targets.labgrid import LabgridTarget

        return LabgridTarget(rest, accept_new_host_key=accept_new_host_key)
    raise UsageError(f"unknown target {spec!r}: use local, ssh://user@host, qemu:<kernel> or labgrid:<place>")
