"""An x86 kernel as QEMU starts it soonest: the kernel a bzImage carries compressed, unpacked
once on the host into the ELF file it was built as, and started at its PVH entry.

Why: a bzImage unpacks itself inside the guest, and under software emulation that is most of
a boot. Debian's xz-packed RT kernel took about 6 s to unpack itself and 4 s for all the rest
(its agent ready 10.4 s after QEMU started, against 4.4 s when started at its PVH entry); the
host unpacks it in about 1.3 s, once per kernel, since the ELF is cached. A kernel built
without a PVH entry (CONFIG_PVH), or packed in a way read here not (lz4, lzo), boots from its
bzImage as before: nothing is lost, only the time is not saved.

A kernel is outside data, the user's own or a package's: its header's offsets are checked
against its size, and what it unpacks to is capped (a small file can claim to unpack to
anything).
"""

from __future__ import annotations

import bz2
import hashlib
import io
import lzma
import os
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import zstandard
from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from rtlab.boundary import untrusted
from rtlab.cache import writing

IMAGE_BYTES = 128 << 20  # a bzImage is read whole; Debian's are about 8 MB
ELF_BYTES = 512 << 20  # what one may unpack to; Debian's RT kernel is 66 MB
ZSTD_WINDOW_BYTES = 256 << 20  # the memory a zstd-packed kernel may ask for while unpacked
KEPT = 6  # unpacked kernels the cache keeps, the most recently booted

# the setup header (Documentation/arch/x86/boot.rst): its offsets in the file
_SETUP_SECTS = 0x1F1
_MAGIC = 0x202  # "HdrS"
_VERSION = 0x206
_PAYLOAD = 0x248  # payload_offset, payload_length (protocol 2.08 and later)
_XEN_ELFNOTE_PHYS32_ENTRY = 18  # the PVH entry QEMU starts an ELF kernel at


def _inflate(data: bytes, cap: int) -> bytes:
    return zlib.decompressobj(wbits=31).decompress(data, cap + 1)  # gzip's own header


def _xz(data: bytes, cap: int) -> bytes:
    return lzma.LZMADecompressor(lzma.FORMAT_XZ).decompress(data, cap + 1)


def _lzma(data: bytes, cap: int) -> bytes:
    return lzma.LZMADecompressor(lzma.FORMAT_ALONE).decompress(data, cap + 1)


def _bzip2(data: bytes, cap: int) -> bytes:
    return bz2.BZ2Decompressor().decompress(data, cap + 1)


def _zstd(data: bytes, cap: int) -> bytes:
    # the kernel's build packs with a 128 MiB window (zstd -22 --ultra), past the library's default
    # and, as for every packing, appends the unpacked size (4 bytes), which this reader would
    # take for a second frame
    reader = zstandard.ZstdDecompressor(max_window_size=ZSTD_WINDOW_BYTES).stream_reader(data[:-4])
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
    start = setup * 512 + offset
    if length == 0 or start + length > len(image):
        return None
    return image[start : start + length]


def unpack(image: bytes, cap: int = ELF_BYTES) -> bytes | None:
    """The ELF kernel inside a bzImage when it has a PVH entry, else None (boot the bzImage)."""
    packed = payload(image)
    if packed is None:
        return None
    how = next((f for magic, f in _UNPACK.items() if packed.startswith(magic)), None)
    if how is None:
        return None
    try:
        elf = how(packed, cap)
    except (OSError, EOFError, ValueError, lzma.LZMAError, zlib.error, zstandard.ZstdError):
        return None
    if len(elf) > cap or not has_pvh_entry(elf):
        return None
    return elf


def has_pvh_entry(elf: bytes) -> bool:
    """Whether ELF is an x86-64 kernel with the note that names its PVH entry."""
    try:
        parsed = ELFFile(io.BytesIO(elf))
        if parsed["e_machine"] != "EM_X86_64":
            return False
        return any(
            note["n_name"] == "Xen" and note["n_type"] == _XEN_ELFNOTE_PHYS32_ENTRY
            for segment in parsed.iter_segments()
            if segment["p_type"] == "PT_NOTE"
            for note in segment.iter_notes()  # type: ignore[attr-defined]
        )
    except (ELFError, ValueError, struct.error, UnicodeDecodeError):
        return False


def bootable(kernel: Path, cache: Path, scratch: Path) -> Path:
    """What QEMU is given for KERNEL: its unpacked ELF, linked into SCRATCH (so that the cache
    may drop it while QEMU starts), or KERNEL itself when it has none."""
    try:  # the user's path may be a link (a build tree's arch/x86_64/boot/bzImage is one)
        image = untrusted.read_bytes(kernel.resolve(), IMAGE_BYTES, "the kernel image")
    except untrusted.Damaged:  # too large to be a bzImage: QEMU is given it as it is
        return kernel
    folder = cache / "qemu" / "pvh"
    cached = folder / f"{hashlib.sha256(image).hexdigest()[:32]}.elf"
    if not cached.is_file() or cached.is_symlink():
        elf = unpack(image)
        if elf is None:
            return kernel
        with writing(cached) as part:
            part.write_bytes(elf)
    os.utime(cached)  # recently booted: the last the cache lets go
    _forget_all_but_newest(folder)
    booted = scratch / "vmlinux"
    booted.unlink(missing_ok=True)
    try:
        os.link(cached, booted)
    except OSError:  # another file system
        booted.write_bytes(cached.read_bytes())
    return booted


def _forget_all_but_newest(folder: Path) -> None:
    entries = []
    for path in folder.glob("*.elf"):
        try:
            entries.append((path.stat().st_mtime, path))
        except FileNotFoundError:  # another rtlab let it go meanwhile
            continue
    for _, path in sorted(entries, reverse=True)[KEPT:]:
        path.unlink(missing_ok=True)
