"""An x86 kernel unpacked on the host and started at its PVH entry (targets/qemu/pvh.py):
Debian's own kernels unpacked as xz unpacks them, each packing the kernel's build uses, and
the bzImages that lie (offsets past their end, a payload that unpacks past the cap, no PVH
entry), each booted as it is instead."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import struct
import subprocess
from pathlib import Path

import pytest
import zstandard

from rtlab import debian
from rtlab.cache import cache_dir
from rtlab.targets.qemu import kernels, machines, pvh

# an ELF as the kernel's build makes it, small: a PT_NOTE segment with Xen's PVH entry note
# (type 18) beside another Xen note, as Debian's kernels carry several
NOTES = """
    .section .note.Xen, "a", @note
    .balign 4
    .long 4, 4, 6
    .asciz "Xen"
    .ascii "lnx\\0"
    .balign 4
    .long 4, 4, {entry}
    .asciz "Xen"
    .long 0x1000000
    .text
    .globl _start
_start:
    hlt
"""


def _elf(folder: Path, entry: int) -> bytes:
    source = folder / f"notes{entry}.s"
    source.write_text(NOTES.format(entry=entry))
    out = folder / f"kernel{entry}"
    subprocess.run(["gcc", "-nostdlib", "-static", "-o", str(out), str(source)], check=True)
    return out.read_bytes()


def _bzimage(payload: bytes, setup_sects: int = 1, version: int = 0x20F, offset: int = 0) -> bytes:
    """A bzImage's layout: setup sectors with the header, then the payload where it says."""
    setup = bytearray((setup_sects + 1) * 512)
    setup[0x1F1] = setup_sects
    setup[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", setup, 0x206, version)
    struct.pack_into("<II", setup, 0x248, offset, len(payload))
    return bytes(setup) + b"\0" * offset + payload


def _sized(packed: bytes, plain: bytes) -> bytes:
    return packed + struct.pack("<I", len(plain))  # the build appends the unpacked size


PACKINGS = {
    "gzip": lambda b: gzip.compress(b),
    "xz": lambda b: lzma.compress(b, lzma.FORMAT_XZ, check=lzma.CHECK_CRC32),
    "lzma": lambda b: lzma.compress(b, lzma.FORMAT_ALONE),
    "bzip2": lambda b: bz2.compress(b),
    "zstd": lambda b: zstandard.ZstdCompressor(level=19).compress(b),
}


@pytest.mark.tools
@pytest.mark.parametrize("packing", PACKINGS)
def test_each_packing_unpacks_to_the_elf_it_was_made_from(tmp_path, packing):
    elf = _elf(tmp_path, 18)
    image = _bzimage(_sized(PACKINGS[packing](elf), elf), setup_sects=3, offset=0x40)
    assert pvh.unpack(image) == elf


@pytest.mark.tools
def test_an_elf_without_a_pvh_entry_is_booted_as_its_bzimage(tmp_path):
    elf = _elf(tmp_path, 17)  # another Xen note, not the entry
    assert pvh.has_pvh_entry(_elf(tmp_path, 18)) and not pvh.has_pvh_entry(elf)
    kernel = tmp_path / "bzImage"
    kernel.write_bytes(_bzimage(_sized(gzip.compress(elf), elf)))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert pvh.bootable(kernel, tmp_path / "cache", scratch) == kernel
    assert not (tmp_path / "cache" / "qemu" / "pvh").exists()


@pytest.mark.hostile
@pytest.mark.parametrize(
    "image",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"MZ" + b"\0" * 4096, id="no header"),
        pytest.param(_bzimage(gzip.compress(b"x"), version=0x207), id="protocol before 2.08"),
        pytest.param(_bzimage(gzip.compress(b"x"))[:-3], id="payload past the end"),
        pytest.param(_bzimage(b""), id="empty payload"),
        pytest.param(_bzimage(b"\x1f\x8b" + b"\xff" * 64), id="damaged gzip"),
        pytest.param(_bzimage(b"LZ4!" + b"\0" * 64), id="a packing not read here"),
        pytest.param(_bzimage(gzip.compress(b"\x7fELF" + b"\0" * 60)), id="a damaged ELF"),
        pytest.param(_bzimage(gzip.compress(b"\x7fELF\x02\x01\x01" + b"\xff" * 200)), id="ELF of garbage"),
    ],
)
def test_a_bzimage_that_lies_is_booted_as_it_is(image):
    assert pvh.unpack(image) is None


@pytest.mark.hostile
@pytest.mark.parametrize("packing", PACKINGS)
def test_a_payload_that_unpacks_past_the_cap_is_not_unpacked_whole(packing):
    plain = b"\0" * (4 << 20)
    packed = PACKINGS[packing](plain)
    assert len(packed) < 64 << 10  # small on disk, large unpacked
    assert pvh.unpack(_bzimage(_sized(packed, plain)), cap=1 << 20) is None


@pytest.mark.tools
def test_the_cache_keeps_the_newest_and_a_link_to_a_kernel_is_followed(tmp_path):
    cache, scratch = tmp_path / "cache", tmp_path / "scratch"
    scratch.mkdir()
    elves = []
    for i in range(pvh.KEPT + 2):
        elf = _elf(tmp_path, 18) + bytes([i])  # bytes past the ELF's end: another kernel
        kernel = tmp_path / f"bzImage{i}"
        kernel.write_bytes(_bzimage(_sized(gzip.compress(elf), elf)))
        link = tmp_path / f"link{i}"
        link.symlink_to(kernel.name)  # as a build tree's arch/x86_64/boot/bzImage is
        booted = pvh.bootable(link, cache, scratch)
        assert booted == scratch / "vmlinux" and booted.read_bytes() == elf
        os.utime(next((cache / "qemu" / "pvh").glob("*.elf")), (i, i))  # an old one, now
        elves.append(elf)
    kept = sorted((cache / "qemu" / "pvh").glob("*.elf"))
    assert len(kept) == pvh.KEPT
    # the last one booted is kept; the one that QEMU was given stays whole when it goes
    assert elves[-1] in {p.read_bytes() for p in kept}


@pytest.mark.tools
def test_debians_kernels_unpack_as_xz_and_zstd_unpack_them(tmp_path):
    cache = cache_dir()
    arch = machines.arch("x86_64")
    apt = debian.Apt.first_verified(cache, arch.releases, arch.debian, arch.suites)
    for name in ("debian-rt", "debian-rt-backports"):
        image = kernels.fetch_kernel(apt, cache, machines.named_kernel(name)[1])[0].read_bytes()
        elf = pvh.unpack(image)
        assert elf is not None, name
        # the payload as the header places it, unpacked by the packing's own tool
        magic = next(m for m in (b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd") if m in image)
        xz = magic.startswith(b"\xfd")
        tool = ["xz", "-dc", "--single-stream"] if xz else ["zstd", "-dcq", "--memory=256MB"]
        # (zstd has no --single-stream: it unpacks the frame, then fails on the bytes after it)
        unpacked = subprocess.run(tool, input=image[image.index(magic) :], capture_output=True, check=False)
        assert unpacked.stdout == elf
        path = tmp_path / f"{name}.elf"
        path.write_bytes(elf)
        listed = subprocess.run(["readelf", "-n", str(path)], capture_output=True, text=True).stdout
        assert "Unknown note type: (0x00000012)" in listed, listed[:2000]
