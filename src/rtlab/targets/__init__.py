"""Targets by name: `local`, `qemu:...`; `ssh://` will share the same interface."""

from __future__ import annotations

from rtlab.errors import UsageError
from rtlab.targets.base import Target
from rtlab.targets.local import LocalTarget


def open_target(spec: str) -> Target:
    if spec in ("", "local"):
        return LocalTarget()
    kind, _, rest = spec.partition(":")
    if kind == "qemu":
        from rtlab.targets.qemu import GuestSpec, QemuTarget

        return QemuTarget(GuestSpec.parse(rest))
    if kind == "ssh":
        raise UsageError(
            f"target {spec!r}: the {kind} target is not available yet; use --target local or qemu:..."
        )
    raise UsageError(f"unknown target {spec!r}: use local, ssh://user@host or qemu:<kernel>")
