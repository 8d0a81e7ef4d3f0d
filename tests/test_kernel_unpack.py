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
import sys
from pathlib import Path

import pytest
import zstandard

from rtlab import debian
from rtlab.cache import cache_dir, locked, whole
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


def bzimage(
    payload: bytes,
    setup_sects: int = 1,
    version: int = 0x20F,
    offset: int = 0,
    release: str = "6.1.0-50-rt-amd64",
) -> bytes:
    """A bzImage's layout: setup sectors with the header and the kernel's version string, then
    the payload where the header says."""
    setup = bytearray((setup_sects + 1) * 512)
    setup[0x1F1] = setup_sects
    setup[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", setup, 0x206, version)
    struct.pack_into("<H", setup, 0x20E, 0x300 - 0x200)  # where the version string is, less 0x200
    text = f"{release} (debian-kernel@lists.debian.org) #1 SMP PREEMPT_RT Debian\0".encode()
    setup[0x300 : 0x300 + len(text)] = text
    struct.pack_into("<II", setup, 0x248, offset, len(payload))
    return bytes(setup) + b"\0" * offset + payload


def sized(packed: bytes, plain: bytes) -> bytes:
    """PACKED as the kernel's build leaves it: the unpacked size appended (gzip ends with it)."""
    return packed if packed.startswith(b"\x1f\x8b") else packed + struct.pack("<I", len(plain))


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
    image = bzimage(sized(PACKINGS[packing](elf), elf), setup_sects=3, offset=0x40)
    assert pvh.unpack(image) == elf


@pytest.mark.tools
def test_a_kernel_without_a_startable_entry_is_booted_as_its_bzimage_and_not_unpacked_again(
    tmp_path, monkeypatch
):
    elf = _elf(tmp_path, 17)  # another Xen note, not the entry
    assert pvh.has_pvh_entry(_elf(tmp_path, 18)) and not pvh.has_pvh_entry(elf)
    entry = _elf(tmp_path, 18)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    for i, image in enumerate([
        bzimage(sized(gzip.compress(elf), elf)),
        # Linux 4.11 to 4.20 carry the note, but their entry assumed Xen
        bzimage(sized(gzip.compress(entry), entry), release="4.19.255-rt113"),
    ]):  # fmt: skip
        kernel = tmp_path / f"bzImage{i}"
        kernel.write_bytes(image)
        assert pvh.bootable(kernel, tmp_path / "cache", scratch) == kernel
    folder = tmp_path / "cache" / "qemu" / "pvh"
    assert sorted(p.suffix for p in folder.iterdir()) == [".none", ".none"]
    # remembered: the next boots of these kernels unpack nothing
    monkeypatch.setattr(pvh, "unpack", lambda *_: pytest.fail("unpacked again"))
    assert pvh.bootable(tmp_path / "bzImage0", tmp_path / "cache", scratch) == tmp_path / "bzImage0"
    assert not (scratch / "vmlinux").exists()


def _notes(count: int, phnum: int = 1, kind: int = 6) -> bytes:
    """An x86-64 ELF header and PHNUM program headers, all at one PT_NOTE of COUNT Xen notes of
    KIND, each with a 4-byte body (18 names the PVH entry)."""
    notes = struct.pack("<III4sI", 4, 4, kind, b"Xen\0", 0x1000000) * count
    phoff = 64
    at = phoff + phnum * 56
    header = struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01" + bytes(9), 2, 62, 1, 0, phoff, 0, 0,
                         64, 56, phnum, 0, 0, 0)  # fmt: skip
    phdr = struct.pack("<IIQQQQQQ", 4, 4, at, 0, 0, len(notes), len(notes), 4)
    return header + phdr * phnum + notes


def pvh_elf() -> bytes:
    """The smallest kernel ELF has_pvh_entry accepts: one PVH entry note (no gcc needed)."""
    return _notes(1, kind=18)


@pytest.mark.hostile
@pytest.mark.parametrize(
    "image",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"MZ" + b"\0" * 4096, id="no header"),
        pytest.param(bzimage(gzip.compress(b"x"), version=0x207), id="protocol before 2.08"),
        pytest.param(bzimage(gzip.compress(b"x"))[:-3], id="payload past the end"),
        pytest.param(bzimage(b""), id="empty payload"),
        pytest.param(bzimage(b"\x1f\x8b" + b"\xff" * 64), id="damaged gzip"),
        pytest.param(bzimage(b"LZ4!" + b"\0" * 64), id="a packing not read here"),
        pytest.param(bzimage(gzip.compress(b"\x7fELF" + b"\0" * 60)), id="a damaged ELF"),
        pytest.param(bzimage(gzip.compress(b"\x7fELF\x02\x01\x01" + b"\xff" * 200)), id="ELF of garbage"),
        pytest.param(bzimage(gzip.compress(_notes(1 << 13))), id="8192 notes"),
        pytest.param(bzimage(gzip.compress(_notes(10, phnum=60000))), id="60000 program headers"),
        # an lzma stream that asks for a 4 GiB dictionary before it unpacks a byte
        pytest.param(
            bzimage(b"\x5d\x00\x00\x00\xff" + b"\xff" * 8 + b"\0" * 64), id="lzma's 4 GiB dictionary"
        ),
        pytest.param(bzimage(gzip.compress(b"\x7fELF"), release="not a version"), id="no release"),
    ],
)
def test_a_bzimage_that_lies_is_booted_as_it_is(image):
    assert pvh.unpack(image) is None


@pytest.mark.tools
@pytest.mark.parametrize("packing", PACKINGS)
def test_a_payload_cut_short_or_past_the_cap_is_not_unpacked(tmp_path, packing):
    plain = b"\0" * (4 << 20)
    packed = PACKINGS[packing](plain)
    assert len(packed) < 64 << 10  # small on disk, large unpacked
    assert pvh.unpack(bzimage(sized(packed, plain)), cap=1 << 20) is None
    # a stream that ends early: shorter than the build recorded, whatever the unpacker says
    elf = _elf(tmp_path, 18) + bytes(4096)
    whole = PACKINGS[packing](elf)
    cut = whole[: len(whole) * 3 // 4] + struct.pack("<I", len(elf))
    assert pvh.unpack(bzimage(sized(whole, elf))) == elf and pvh.unpack(bzimage(cut)) is None


@pytest.mark.tools
def test_the_cache_keeps_the_newest_and_checks_what_it_serves(tmp_path):
    cache, scratch = tmp_path / "cache", tmp_path / "scratch"
    scratch.mkdir()
    folder = cache / "qemu" / "pvh"
    elves, given = [], []
    for i in range(pvh.KEPT + 2):
        elf = _elf(tmp_path, 18) + bytes([i])  # bytes past the ELF's end: another kernel
        kernel = tmp_path / f"bzImage{i}"
        kernel.write_bytes(bzimage(sized(gzip.compress(elf), elf)))
        link = tmp_path / f"link{i}"
        link.symlink_to(kernel.name)  # as a build tree's arch/x86_64/boot/bzImage is
        (scratch / str(i)).mkdir()  # a guest's own scratch folder
        booted = pvh.bootable(link, cache, scratch / str(i))
        assert booted.name == "vmlinux" and booted.read_bytes() == elf
        os.utime(booted, (1000 + i, 1000 + i))  # the cache's entry is the same file
        elves.append(elf)
        given.append(booted)
    kept = sorted(folder.glob("*.elf"))
    assert len(kept) == pvh.KEPT
    assert {p.read_bytes() for p in kept} == set(elves[2:])  # the two booted first went
    # what QEMU was given stays whole when the cache lets it go
    assert [g.read_bytes() for g in given] == elves
    # an entry cut short, or replaced by a link, is unpacked again, never served
    newest = max(kept, key=lambda p: p.stat().st_mtime)
    newest.write_bytes(newest.read_bytes()[:100])
    (tmp_path / "elsewhere").write_bytes(b"not a kernel")
    second = sorted(kept, key=lambda p: p.stat().st_mtime)[-2]
    second.unlink()
    second.symlink_to(tmp_path / "elsewhere")
    for i in (len(elves) - 1, len(elves) - 2):
        booted = pvh.bootable(tmp_path / f"bzImage{i}", cache, scratch)
        assert booted.read_bytes() == elves[i] and not booted.is_symlink()
    assert (tmp_path / "elsewhere").read_bytes() == b"not a kernel"
    # what an rtlab killed while writing left behind goes once it is old
    stale = folder / ".v1-x.elf.abc.part"
    stale.write_bytes(b"cut")
    os.utime(stale, (0, 0))
    pvh.bootable(tmp_path / "bzImage0", cache, scratch)
    assert not stale.exists()


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


# a kernel fetched into the cache folder given, from the index in rtlab's own cache
FETCH = """import sys
from pathlib import Path
from rtlab import debian
from rtlab.cache import cache_dir
from rtlab.targets.qemu import kernels, machines
arch = machines.arch("x86_64")
apt = debian.Apt.first_verified(cache_dir(), arch.releases, arch.debian, arch.suites)
print(kernels.fetch_kernel(apt, Path(sys.argv[1]), machines.named_kernel("debian-rt")[1])[0])
"""


@pytest.mark.tools
def test_two_rtlab_fetching_one_kernel_at_once_fetch_it_once(tmp_path):
    """Two rtlab starting guests of one kernel on a fresh cache at once (two terminals, two
    workers of make test) both fetched it, and the second's fresh start removed the first's
    files half written (a FileNotFoundError in make test): the second waits for the first
    and finds the kernel whole."""
    cache = tmp_path / "cache"
    fetching = [
        subprocess.Popen([sys.executable, "-c", FETCH, str(cache)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]  # fmt: skip
    said = [p.communicate(timeout=600) for p in fetching]
    assert [p.returncode for p in fetching] == [0, 0], [err[-2000:] for _, err in said]
    image = Path(said[0][0].strip())
    assert said[0][0] == said[1][0] and whole(image) and image.stat().st_size > 1 << 20
    assert not [p for p in cache.rglob("*") if p.name.endswith(".part") or p.name.startswith(".fetching-")]


@pytest.mark.unit
def test_a_lock_that_cannot_be_made_leaves_the_block_to_run():
    ran = []
    with locked(Path("/proc/self/rtlab.lock")):  # procfs: no file can be made there, even by root
        ran.append("ran")
    assert ran == ["ran"]


@pytest.mark.unit
def test_a_cache_that_cannot_be_written_boots_the_bzimage(tmp_path):
    elf = pvh_elf()
    kernel = tmp_path / "bzImage"
    kernel.write_bytes(bzimage(sized(gzip.compress(elf), elf)))
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "qemu").write_text("a file where the folder goes\n")  # as a full disk would fail
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert pvh.bootable(kernel, tmp_path / "cache", scratch) == kernel
    assert list(scratch.iterdir()) == []
    # and with a cache it can write, the same kernel is started at its entry
    assert pvh.bootable(kernel, tmp_path / "cache2", scratch).read_bytes() == elf
