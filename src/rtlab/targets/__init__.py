"""Targets by name: `local` now; `ssh://` and `qemu:` share the same interface."""

from __future__ import annotations

from rtlab.errors import UsageError
from rtlab.targets.base import Target
from rtlab.targets.local import LocalTarget


def open_target(spec: str) -> Target:
    if spec in ("", "local"):
        return LocalTarget()
    kind = spec.split(":", 1)[0]
    if kind in ("ssh", "qemu"):
        raise UsageError(f"target {spec!r}: the {kind} target is not available yet; use --target local")
    raise UsageError(f"unknown target {spec!r}: use local, ssh://user@host or qemu:<kernel>")
