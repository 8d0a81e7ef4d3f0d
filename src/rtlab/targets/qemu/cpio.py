"""Writes cpio archives in the kernel's `newc` format (what an initramfs is).

Written here rather than with the cpio tool because an initramfs needs a
/dev/console device node, which only root could create in a staging folder.
"""

from __future__ import annotations

import stat
from typing import BinaryIO

_TRAILER = "TRAILER!!!"


class Writer:
    def __init__(self, out: BinaryIO):
        self.out = out
        self.inode = 1

    def _entry(self, name: str, mode: int, data: bytes = b"", rdev: tuple[int, int] = (0, 0)) -> None:
        encoded = name.lstrip("/").encode() + b"\0"
        fields = (self.inode, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(encoded), 0)
        header = b"070701" + b"".join(b"%08X" % f for f in fields)
        self.inode += 1
        self.out.write(header + encoded)
        self.out.write(b"\0" * (-(len(header) + len(encoded)) % 4))
        self.out.write(data)
        self.out.write(b"\0" * (-len(data) % 4))

    def directory(self, name: str, mode: int = 0o755) -> None:
        self._entry(name, stat.S_IFDIR | mode)

    def file(self, name: str, data: bytes, mode: int = 0o644) -> None:
        self._entry(name, stat.S_IFREG | mode, data)

    def symlink(self, name: str, target: str) -> None:
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def char_device(self, name: str, major: int, minor: int, mode: int = 0o600) -> None:
        self._entry(name, stat.S_IFCHR | mode, rdev=(major, minor))

    def close(self) -> None:
        self._entry(_TRAILER, 0)


_HEADER = 110  # "070701" and 13 fields of 8 hex digits


def joined(parts: list[bytes]) -> bytes:
    """One archive of several (each ending in its trailer): what a tool that reads only the
    first archive of a file needs (GNU cpio, as LAVA unpacks an initramfs), where the kernel
    would unpack each in turn. A later part's file of the same name wins, as in the kernel."""
    kept = [part[: _trailer_at(part)] for part in parts[:-1]]
    return b"".join([*kept, parts[-1]]) if parts else b""


def _trailer_at(archive: bytes) -> int:
    """Where the trailer's header starts in a `newc` archive of rtlab's own making."""
    at = 0
    while at + _HEADER <= len(archive):
        if archive[at : at + 6] != b"070701":
            raise ValueError(f"not a newc cpio archive at byte {at}")
        size = int(archive[at + 54 : at + 62], 16)
        name_size = int(archive[at + 94 : at + 102], 16)
        name = archive[at + _HEADER : at + _HEADER + name_size - 1]
        if name == _TRAILER.encode():
            return at
        at += _HEADER + name_size
        at += -at % 4 + size
        at += -at % 4
    raise ValueError("the cpio archive has no trailer")
