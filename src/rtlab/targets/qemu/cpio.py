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
