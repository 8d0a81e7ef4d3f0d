"""An x86 kernel as QEMU starts it soonest: the kernel a bzImage carries compressed, unpacked
once on the host into the ELF file it was built as, and started at its PVH entry.

Why: a bzImage unpacks itself inside the guest, and under software emulation that is most of
a boot. Debian's xz-packed 6.1 RT kernel had its agent ready 8.9 s after QEMU started from its
bzImage and 4.1 s from its ELF (bench/bench_qemu_boot.py); the host unpacks it in about a
second, once per kernel, since the ELF is cached. What is then skipped is the bzImage's own
unpacking, and with it KASLR, which that code applies: a guest's kernel sits at the address
it was linked at.

A kernel boots from its bzImage as before when it has no PVH entry that QEMU can start
(CONFIG_PVH, Linux 5.0 and later: the entry of 4.11 to 4.20 assumed Xen), or is packed in a
way read here not (lz4, lzo).

A kernel is outside data, the user's own or a package's, and so is the cache: the header's
offsets are checked against the file's size; what it unpacks to is capped, must be as long
as the kernel's build recorded, and is read as an ELF with every count and size bounded; a
cached ELF is checked again before QEMU is given it.
"""

from __future__ import annotations

import bz2
import contextlib
import errno
import hashlib
import lzma
import os
import stat
import struct
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import zstandard

from rtlab.boot.image import from_setup_header
from rtlab.boundary import untrusted
from rtlab.cache import writing

IMAGE_BYTES = 128 << 20  # a bzImage is read whole; Debian's are about 8 MB
ELF_BYTES = 256 << 20  # what one may unpack to; Debian's RT kernel is 66 MB
WINDOW_BYTES = 256 << 20  # the memory an unpacker may take for its dictionary or window
KEPT = 6  # unpacked kernels the cache keeps, the most recently booted
FORMAT = "v1"  # in each cache entry's name: entries of another unpacking are not read
PART_AGE_S = 3600.0  # a .part older than this was left by a killed rtlab

# the setup header (Documentation/arch/x86/boot.rst): its offsets in the file
_SETUP_SECTS = 0x1F1
_MAGIC = 0x202  # "HdrS"
_VERSION = 0x206
_PAYLOAD = 0x248  # payload_offset, payload_length (protocol 2.08 and later)
_FIRST_PVH_RELEASE = (5, 0)


def _inflate(data: bytes, cap: int) -> bytes:
    return zlib.decompressobj(wbits=31).decompress(data, cap + 1)  # gzip's own header


def _xz(data: bytes, cap: int) -> bytes:
    return lzma.LZMADecompressor(lzma.FORMAT_XZ, memlimit=WINDOW_BYTES).decompress(data, cap + 1)


def _lzma(data: bytes, cap: int) -> bytes:
    return lzma.LZMADecompressor(lzma.FORMAT_ALONE, memlimit=WINDOW_BYTES).decompress(data, cap + 1)


def _bzip2(data: bytes, cap: int) -> bytes:
    return bz2.BZ2Decompressor().decompress(data, cap + 1)


def _zstd(data: bytes, cap: int) -> bytes:
    # the kernel's build packs with a 128 MiB window (zstd -22 --ultra), past the library's
    # default, and, as for every packing, appends the unpacked size (4 bytes), which this
    # reader would take for a second frame
    reader = zstandard.ZstdDecompressor(max_window_size=WINDOW_BYTES).stream_reader(data[:-4])
    return untrusted.read_at_most(reader, cap + 1)


# each packing by its first bytes, as the kernel's own build writes it
_UNPACK: dict[bytes, Callable[[bytes, int], bytes]] = {
    b"\x1f\x8b": _inflate,
    b"\xfd7zXZ\x00": _xz,
    b"\x5d\x00\x00": _lzma,
    b"BZh": _bzip2,
    b"\x28\xb5\x2f\xfd": _zstd,
}


def payload(image: bytes) -> bytes | None:
    """The compressed kernel a bzImage carries, or None when IMAGE is not one that says where."""
    if len(image) < _PAYLOAD + 8 or image[_MAGIC : _MAGIC + 4] != b"HdrS":
        return None
    (version,) = struct.unpack_from("<H", image, _VERSION)
    if version < 0x208:
        return None
    setup = (image[_SETUP_SECTS] or 4) + 1  # in 512-byte sectors, the boot sector's included
    offset, length = struct.unpack_from("<II", image, _PAYLOAD)
    start = setup * 512 + offset  # payload_offset counts from the protected-mode code
    if length <= 4 or start + length > len(image):
        return None
    return image[start : start + length]


def _startable(image: bytes) -> bool:
    """Whether the release the header names is one whose PVH entry QEMU can start."""
    found = from_setup_header(image)
    numbers = found.release.split("-")[0].split(".")[:2] if found else []
    if len(numbers) < 2 or not all(n.isdigit() for n in numbers):
        return False
    return (int(numbers[0]), int(numbers[1])) >= _FIRST_PVH_RELEASE


def unpack(image: bytes, cap: int = ELF_BYTES) -> bytes | None:
    """The ELF kernel inside a bzImage when QEMU can start it at its PVH entry, else None."""
    packed = payload(image)
    if packed is None or not _startable(image):
        return None
    how = next((f for magic, f in _UNPACK.items() if packed.startswith(magic)), None)
    if how is None:
        return None
    try:
        elf = how(packed, cap)
    except (OSError, EOFError, ValueError, MemoryError, lzma.LZMAError, zlib.error, zstandard.ZstdError):
        return None
    # whole: as long as the build recorded (the payload's last 4 bytes), which a stream cut
    # short, or a header that places the payload wrong, is not
    if len(elf) > cap or len(elf) != int.from_bytes(packed[-4:], "little") or not has_pvh_entry(elf):
        return None
    return elf


# ELF64, little-endian (the only x86-64 kind): what has_pvh_entry reads, each bounded
_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_PHDR = struct.Struct("<IIQQQQQQ")
_ET_EXEC, _EM_X86_64, _PT_NOTE = 2, 62, 4
_MAX_PHDRS = 64  # a kernel has a handful
_MAX_NOTES_BYTES = 64 << 10  # its notes are a few hundred bytes
_XEN_ELFNOTE_PHYS32_ENTRY = 18  # the PVH entry QEMU starts an ELF kernel at


def has_pvh_entry(elf: bytes) -> bool:
    """Whether ELF is an x86-64 executable with the note that names its PVH entry: read by
    hand, every count and size checked (a parser that follows what a file claims can be made
    to walk millions of notes)."""
    if len(elf) < _EHDR.size:
        return False
    ident, e_type, machine, _, _, phoff, _, _, _, phentsize, phnum, *_ = _EHDR.unpack_from(elf)
    if ident[:6] != b"\x7fELF\x02\x01" or e_type != _ET_EXEC or machine != _EM_X86_64:
        return False
    if phentsize != _PHDR.size or phnum > _MAX_PHDRS or phoff + phnum * _PHDR.size > len(elf):
        return False
    for i in range(phnum):
        kind, _, offset, _, _, size, _, _ = _PHDR.unpack_from(elf, phoff + i * _PHDR.size)
        readable = kind == _PT_NOTE and size <= _MAX_NOTES_BYTES and offset + size <= len(elf)
        if readable and _names_entry(elf[offset : offset + size]):
            return True
    return False


def _names_entry(notes: bytes) -> bool:
    at = 0
    while at + 12 <= len(notes):
        namesz, descsz, kind = struct.unpack_from("<III", notes, at)
        name_end = at + 12 + namesz
        desc = name_end + (-namesz % 4)
        if desc + descsz > len(notes):
            return False
        if kind == _XEN_ELFNOTE_PHYS32_ENTRY and notes[at + 12 : name_end] == b"Xen\0" and descsz in (4, 8):
            return True
        at = desc + descsz + (-descsz % 4)
    return False


def bootable(kernel: Path, cache: Path, scratch: Path) -> Path:
    """What QEMU is given for KERNEL: its unpacked ELF, linked into SCRATCH, or KERNEL itself
    when it has none QEMU can start."""
    try:  # the user's path may be a link (a build tree's arch/x86_64/boot/bzImage is one)
        image = untrusted.read_bytes(kernel.resolve(), IMAGE_BYTES, "the kernel image")
    except untrusted.Damaged:  # too large to be a bzImage: QEMU is given it as it is
        return kernel
    try:
        return _cached(image, cache / "qemu" / "pvh", scratch) or kernel
    except OSError:  # the cache cannot be written (a full disk): the bzImage boots, only slower
        return kernel


def _cached(image: bytes, folder: Path, scratch: Path) -> Path | None:
    """IMAGE's ELF from the cache (unpacked into it first if need be), linked into SCRATCH;
    None when it has none QEMU can start."""
    name = f"{FORMAT}-{hashlib.sha256(image).hexdigest()[:32]}"
    cached, refused = folder / f"{name}.elf", folder / f"{name}.none"
    if refused.is_file():  # unpacked before, and not startable: not every boot again
        return None
    booted = scratch / "vmlinux"
    for _ in range(2):  # once more when another rtlab let the entry go as it was linked
        if not _checked(cached):
            elf = unpack(image)
            if elf is None:
                with writing(refused):
                    pass
                return None
            with writing(cached) as part:
                part.write_bytes(elf)
        booted.unlink(missing_ok=True)
        try:
            # linked first: the cache may let its name go now, the file stays QEMU's
            os.link(cached, booted, follow_symlinks=False)
        except FileNotFoundError:
            continue
        except OSError as e:
            if e.errno != errno.EXDEV:
                raise
            with writing(booted) as part:  # the scratch folder is on another file system
                part.write_bytes(untrusted.read_bytes(cached, ELF_BYTES, "the unpacked kernel"))
        else:
            os.utime(booted)  # the cache's entry too (one file): the last the cache lets go
        with contextlib.suppress(OSError):  # a cache that cannot be pruned still served this boot
            _forget_all_but_newest(folder)
        return booted
    return None


def _checked(cached: Path) -> bool:
    """Whether the cache's entry is a regular file (no link) that is a startable ELF kernel."""
    try:
        return has_pvh_entry(untrusted.read_bytes(cached, ELF_BYTES, "the unpacked kernel"))
    except untrusted.Damaged:
        return False


def _forget_all_but_newest(folder: Path) -> None:
    entries, now = [], time.time()
    for path in folder.iterdir():
        try:
            info = path.lstat()
        except FileNotFoundError:  # another rtlab let it go meanwhile
            continue
        if path.name.startswith(".") and path.name.endswith(".part"):
            if now - info.st_mtime > PART_AGE_S or not stat.S_ISREG(info.st_mode):
                path.unlink(missing_ok=True)  # left by an rtlab killed while writing it
        elif path.suffix in (".elf", ".none"):
            entries.append((info.st_mtime, path))
    for _, path in sorted(entries, reverse=True)[KEPT:]:
        path.unlink(missing_ok=True)
