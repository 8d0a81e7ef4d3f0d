"""RT patch series for the kernel source: Debian's, a quilt folder, or one patch file.

`debian` is debian/patches-rt of the Debian source package that linux-source-6.12
was built from, fetched with apt's source support (the file's checksum comes from
apt's signed index). A folder is a quilt series (a `series` file naming the patches
in order, as debian/patches-rt and kernel.org's unpacked patches-*.tar.xz have); a file
is one patch, plain or .xz/.gz (kernel.org's patch-*-rt*.patch.xz). The 6.12 RT series
is what brings lazy preemption to riscv (mainline has it from 6.13).
"""

from __future__ import annotations

import gzip
import hashlib
import lzma
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rtlab import children
from rtlab.boundary import untrusted
from rtlab.debian import Apt
from rtlab.errors import RunFailed, UsageError

DEBIAN_PACKAGE = "linux-source-6.12"


@dataclass(frozen=True)
class Series:
    label: str
    patches: tuple[Path, ...]

    @property
    def digest(self) -> str:
        """Names the patched tree: the same patches give the same tree."""
        h = hashlib.sha256()
        for patch in self.patches:
            h.update(patch.name.encode() + b"\0" + patch.read_bytes())
        return h.hexdigest()[:12]


def resolve(spec: str, cache: Path) -> Series:
    """The series `--rt-patches` names: debian, a quilt folder, or one patch file."""
    if spec == "debian":
        folder, version = debian_series(cache)
        return Series(f"debian {version}", read_series(folder))
    given = Path(spec)
    if given.is_dir():
        return Series(str(given.resolve()), read_series(given))
    if given.is_file():
        return Series(str(given.resolve()), (given.resolve(),))
    raise UsageError(
        f"--rt-patches {spec}: give debian, a folder with a quilt `series` file, or a patch file"
    )


def read_series(folder: Path) -> tuple[Path, ...]:
    """The patches a quilt `series` file lists, in order (comments and blank lines skipped)."""
    series = folder / "series"
    if not series.is_file():
        raise UsageError(f"{folder} has no `series` file: give a quilt patch folder or one patch file")
    names = [
        line.split("#", 1)[0].split()[0]
        for line in untrusted.lines(series.read_text())
        if line.split("#", 1)[0].strip()
    ]
    missing = [name for name in names if not (folder / name).is_file()]
    if missing:
        raise UsageError(f"{series} lists patches that are not there: {', '.join(missing[:5])}")
    if not names:
        raise UsageError(f"{series} lists no patches")
    return tuple((folder / name).resolve() for name in names)


def apply(series: Series, tree: Path, log: Path, progress: Callable[[str], None] = lambda p: None) -> None:
    """Applies every patch with patch(1), in order; the first that fails is named with its errors."""
    for number, patch in enumerate(series.patches, 1):
        progress(f"patch {number}/{len(series.patches)}")
        with log.open("a") as f:
            f.write(untrusted.one_line(f"$ patch -p1 -N --batch < {patch}") + "\n")
            f.flush()
            done = children.run(
                ["patch", "-p1", "-N", "--batch", "-d", str(tree)],
                input=_patch_bytes(patch),
                stdout=f,
                stderr=subprocess.STDOUT,
            )
        if done.returncode != 0:
            tail = untrusted.lines(log.read_text(errors="replace"))[-6:]
            raise RunFailed(
                f"{patch.name} ({number} of {len(series.patches)}) does not apply:\n" + "\n".join(tail)
            )


def _patch_bytes(patch: Path) -> bytes:
    data = patch.read_bytes()
    if patch.suffix == ".xz":
        return lzma.decompress(data)
    if patch.suffix == ".gz":
        return gzip.decompress(data)
    return data


def debian_series(cache: Path) -> tuple[Path, str]:
    """(debian/patches-rt of the installed linux-source-6.12's source package, its version), cached."""
    done = children.run(
        ["dpkg-query", "-W", "-f=${Version} ${source:Package}", DEBIAN_PACKAGE],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise UsageError(f"--rt-patches debian needs {DEBIAN_PACKAGE}: apt-get install {DEBIAN_PACKAGE}")
    version, package = done.stdout.split()
    folder = cache / "rt-patches" / f"debian-{version}"
    if (folder / "series").is_file():
        return folder, version
    apt = Apt.for_host_sources(cache)
    apt.update()
    uri, name, digest = apt.source_file(package, version, ".debian.tar.xz")
    partial = folder.parent / f".{folder.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        apt.fetch(uri, partial / name, digest)
    except UsageError as e:
        raise UsageError(
            f"Debian's {name} could not be downloaded ({e}); take debian/patches-rt from the "
            f"{package} {version} source package yourself and give --rt-patches FOLDER"
        ) from None
    children.run(["tar", "-xf", str(partial / name), "-C", str(partial), "debian/patches-rt"], check=True)
    (partial / "debian/patches-rt").rename(folder)
    shutil.rmtree(partial)
    return folder, version
