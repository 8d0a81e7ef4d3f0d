"""The version string inside a kernel image, read on the host before anything is installed:
the running kernel is judged against it after the boot (uname -r and /proc/version).

An x86 bzImage points at it from its setup header ("HdrS" at 0x202, the offset at 0x20e,
counted from 0x200); an arm64 or riscv64 Image is the kernel itself, uncompressed, and holds
the banner "Linux version ..." as /proc/version prints it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from rtlab.boundary import untrusted
from rtlab.errors import UsageError

_MAX_IMAGE = 256 << 20  # no kernel image is larger; a larger file is not one
_BANNER = re.compile(rb"Linux version (\S+) \((?:[^()]|\([^()]*\))*\)[^\n\0]*?(#\d+[^\n\0]*)")


@dataclass(frozen=True)
class KernelVersion:
    release: str  # uname -r
    build: str  # "#1 SMP PREEMPT_RT Debian 6.1.115-1 (2024-11-01)": how /proc/version ends

    def matches(self, uname_r: str, proc_version: str) -> bool:
        return uname_r.strip() == self.release and proc_version.strip().endswith(self.build)


def from_setup_header(data: bytes) -> KernelVersion | None:
    if len(data) < 0x210 or data[0x202:0x206] != b"HdrS":
        return None
    offset = int.from_bytes(data[0x20E:0x210], "little")
    if not offset:
        return None
    start = 0x200 + offset
    text = data[start : start + 512].split(b"\0", 1)[0].decode("ascii", "replace")
    # UTS_RELEASE " (" compile_by "@" compile_host ") " UTS_VERSION
    release, _, rest = text.partition(" ")
    build = rest[rest.find("#") :] if "#" in rest else ""
    if not release or not build:
        return None
    return KernelVersion(untrusted.printable(release), untrusted.printable(build).strip())


def read(path: Path) -> KernelVersion:
    """PATH's version, or a UsageError naming what to give instead (a compressed Image.gz,
    or a file that is no kernel)."""
    try:  # the user's own file (a link such as /boot/vmlinuz is fine), not a target's
        if path.stat().st_size > _MAX_IMAGE:
            raise UsageError(f"{path} is larger than any kernel image ({_MAX_IMAGE >> 20} MiB)")
        data = path.read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read the kernel image {path}: {e.strerror}") from None
    found = from_setup_header(data)
    if found is not None:
        return found
    banner = _BANNER.search(data)
    if banner is not None:
        release = banner.group(1).decode("ascii", "replace")
        build = banner.group(2).decode("ascii", "replace").strip()
        return KernelVersion(untrusted.printable(release), untrusted.printable(build))
    raise UsageError(
        f"{path} holds no kernel version string: give an uncompressed Image or an x86 bzImage "
        "(gunzip an Image.gz first)"
    )
