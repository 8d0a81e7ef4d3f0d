"""A QEMU target's words (what follows `qemu:`), checked and bounded: the kernel by name or
path, its architecture, and the guest's options (targets/qemu/__init__.py's docstring lists
them for the user)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from rtlab import bounds, units
from rtlab.errors import UsageError
from rtlab.targets.qemu import machines

OPTIONS = ("kernel", "initrd", "arch", "cpus", "memory", "accel", "append", "boot-timeout", "margin", "ssh")


@dataclass
class GuestSpec:
    arch: machines.Arch
    kernel_name: str | None = None
    kernel_path: Path | None = None
    initrd: Path | None = None
    cpus: int = 2
    memory: str = "1G"
    accel: str = "auto"
    append: str = ""
    boot_timeout: float = 300.0
    margin: float = 120.0
    ssh_port: int | None = None
    text: str = ""

    @classmethod
    def parse(cls, text: str) -> GuestSpec:
        """`debian-rt,cpus=4` or `kernel=PATH,arch=riscv64,...` (what follows `qemu:`)."""
        name: str | None = None
        options: dict[str, str] = {}
        for item in filter(None, text.split(",")):
            key, eq, value = item.partition("=")
            if eq:
                options[key.strip()] = value
            elif name is None:
                name = item.strip()
            else:
                raise UsageError(f"qemu target {text!r}: one kernel name only, options as key=value")
        known = set(OPTIONS)
        unknown = set(options) - known
        if unknown:
            raise UsageError(
                f"qemu target option {', '.join(sorted(unknown))} unknown: use {', '.join(sorted(known))}"
            )
        if name and "kernel" in options:
            raise UsageError(f"qemu target {text!r}: give a kernel name or kernel=PATH, not both")
        if name:
            arch, _ = machines.named_kernel(name)
            if "arch" in options and machines.arch(options["arch"]) is not arch:
                raise UsageError(f"qemu:{name} is an {arch.spelling} kernel, not {options['arch']}")
            spec = cls(arch, kernel_name=name)
        elif "kernel" in options:
            path = Path(options["kernel"]).expanduser()
            if not path.is_file():
                raise UsageError(f"kernel image {path} does not exist: give the path of an Image/bzImage")
            spec = cls(machines.arch(options.get("arch", machines.host_arch())), kernel_path=path.resolve())
        else:
            raise UsageError("qemu target needs a kernel: qemu:debian-rt, qemu:debian or qemu:kernel=PATH")
        spec.text = text
        if "initrd" in options:
            spec.initrd = Path(options["initrd"]).expanduser().resolve()
            if not spec.initrd.is_file():
                raise UsageError(f"initrd {spec.initrd} does not exist")
        # the user's values, through the gate every option goes through (units): ASCII digits,
        # bounded, never NaN or inf
        if "cpus" in options:
            spec.cpus = units.parse_count(options["cpus"], "qemu target cpus")
        if "ssh" in options:
            spec.ssh_port = units.parse_count(options["ssh"], "qemu target ssh port")
        wait = bounds.MAX_GUEST_WAIT_S
        if "boot-timeout" in options:
            spec.boot_timeout = units.parse_seconds(
                options["boot-timeout"], "qemu target boot-timeout", 1, wait
            )
        if "margin" in options:
            spec.margin = units.parse_seconds(options["margin"], "qemu target margin", 0, wait)
        if spec.ssh_port is not None and not 0 < spec.ssh_port < 65536:
            raise UsageError(f"qemu target ssh={spec.ssh_port}: give a TCP port, 1 to 65535")
        if not 1 <= spec.cpus <= bounds.MAX_GUEST_CPUS:
            raise UsageError(f"qemu target: cpus must be 1 to {bounds.MAX_GUEST_CPUS}")
        spec.memory = options.get("memory", spec.memory)
        if not re.fullmatch(r"\d+[MG]?", spec.memory):
            raise UsageError(f"qemu target memory {spec.memory!r}: write e.g. 1G or 512M")
        spec.accel = options.get("accel", spec.accel)
        if spec.accel not in ("auto", "kvm", "tcg"):
            raise UsageError(f"qemu target accel {spec.accel!r}: use auto, kvm or tcg")
        spec.append = options.get("append", "")
        return spec

    def network_args(self) -> list[str]:
        """User-mode networking, reachable from this host's loopback only, when `ssh=` asks for it."""
        if self.ssh_port is None:
            return []
        forward = f"hostfwd=tcp:127.0.0.1:{self.ssh_port}-:22"
        return ["-netdev", f"user,id=net0,{forward}", "-device", f"{self.arch.nic},netdev=net0"]

    @property
    def boot_silence_s(self) -> float | None:
        """How long the guest may say nothing before its /init begins (Arch.boot_silence_s),
        unless `append=` quietens its kernel (quiet, or a loglevel below 7, which hides the
        boot's KERN_INFO lines: then a boot's silence says nothing)."""
        quiet = any(w == "quiet" or _quieter(w) for w in self.append.split())
        return None if quiet else self.arch.boot_silence_s


def _quieter(word: str) -> bool:
    """A loglevel= word below 7; one that is no level (`²`, 5,000 digits) is taken as quiet."""
    key, eq, level = word.partition("=")
    return key == "loglevel" and bool(eq) and not (re.fullmatch(r"[0-9]{1,2}", level) and int(level) >= 7)
