"""Debian's kernels for QEMU guests: the image of a kernel package, fetched once into the cache.

Where a kernel package keeps its files changed after trixie. Up to trixie linux-image-VER
holds /boot/vmlinuz-VER, /boot/config-VER and the modules. From forky on linux-image-VER is
empty and depends on linux-binary-VER (usr/lib/modules/VER/vmlinuz), linux-base-VER
(usr/lib/modules/VER/config) and linux-modules-VER. Both come to the same cache layout:
boot/vmlinuz-VER and boot/config-VER, the modules flat beside them. Modules ship as NAME.ko
or, from trixie on, NAME.ko.xz; the cache holds them as NAME.ko, which busybox's insmod loads.
Every file is put in the cache whole (rtlab.cache), once dpkg-deb has read its package to the
end without an error; the kernel's VERSION is written last: a kernel without it, or a file the
cache does not list as whole, is fetched again.
"""

from __future__ import annotations

import contextlib
import lzma
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from rtlab import children
from rtlab.cache import locked, record, whole, writing
from rtlab.debian import Apt
from rtlab.errors import UsageError

_SPLIT = ("linux-binary-", "linux-base-")  # the image and its config, from forky on
_MODULES = "linux-modules-"
_SPLIT_FILE = re.compile(r"usr/lib/modules/([^/]+)/(vmlinuz|config)")
AGAIN = "run rtlab again to fetch it anew (nothing of it was kept)"


def kernel_packages(apt: Apt, metapackage: str, prefixes: tuple[str, ...]) -> tuple[str, list[str]]:
    """(linux-image-VER, the packages of it to fetch): linux-image-VER itself and those of its
    own parts whose names start with one of `prefixes`."""
    apt.update()
    package = apt.depends_on(metapackage, "linux-image-")
    version = package.removeprefix("linux-image-")
    parts = {f"{prefix}{version}" for prefix in prefixes}
    return package, [package, *sorted(set(apt.depends(package)) & parts)]


def fetch_kernel(apt: Apt, cache: Path, metapackage: str) -> tuple[Path, str, str]:
    """The kernel image of `metapackage`'s current kernel: (path, package, version), cached."""
    package, packages = kernel_packages(apt, metapackage, _SPLIT)
    folder = cache / "kernels" / apt.arch / package
    if _whole_image(folder) is None:  # a kernel in the cache is read without the lock
        with locked(folder.with_name(f".{package}.lock")):  # what one fetches, the other finds whole
            _fetch_kernel(apt, folder, package, packages)
    image = _whole_image(folder)
    assert image is not None
    return image, package, (folder / "VERSION").read_text().strip()


def _whole_image(folder: Path) -> Path | None:
    image = kernel_image(folder / "root")
    return image if image is not None and whole(image) and (folder / "VERSION").is_file() else None


def _fetch_kernel(apt: Apt, folder: Path, package: str, packages: list[str]) -> None:
    if _whole_image(folder) is None:
        # what a fetch cut off, or an rtlab that wrote in place, left is not this kernel
        (folder / "VERSION").unlink(missing_ok=True)
        shutil.rmtree(folder / "root", ignore_errors=True)
        debs = apt.download(packages, folder / "debs")
        boot = folder / "root" / "boot"
        record(boot, [path for deb in debs for path in _extract(deb, boot, _boot_name)])
        version = next(deb for deb in debs if deb.name.startswith(f"{package}_")).name.split("_")[1]
        image = kernel_image(folder / "root")
        if image is None:
            raise UsageError(f"{', '.join(packages)} hold no kernel image (under /boot or /usr/lib/modules)")
        with writing(folder / "VERSION") as part:
            part.write_text(version + "\n")
        shutil.rmtree(folder / "debs")


def _boot_name(name: str, base: str) -> str | None:
    """The image, config and System.map of a package, named as /boot names them."""
    if name == f"boot/{base}":
        return base
    split = _SPLIT_FILE.fullmatch(name)
    return f"{split.group(2)}-{split.group(1)}" if split else None


def fetch_modules(apt: Apt, cache: Path, metapackage: str, names: list[str]) -> list[Path]:
    """The named modules (e1000 for e1000.ko) of `metapackage`'s current kernel, in `names`'
    order, cached beside its image: what a guest that needs a driver loads with insmod."""
    package, packages = kernel_packages(apt, metapackage, (_MODULES,))
    folder = cache / "kernels" / apt.arch / package / "modules"
    wanted = {name: folder / f"{name}.ko" for name in names}
    if not all(whole(path) for path in wanted.values()):
        with locked(folder.parent.with_name(f".{package}.lock")):
            _fetch_modules(apt, folder, packages, wanted)
    missing = [name for name, path in wanted.items() if not whole(path)]
    if missing:
        raise UsageError(f"{', '.join(packages)} have no module {', '.join(missing)}: it may be built in")
    return list(wanted.values())


def _fetch_modules(apt: Apt, folder: Path, packages: list[str], wanted: dict[str, Path]) -> None:
    if not all(whole(path) for path in wanted.values()):
        debs = apt.download(packages, folder.parent / "debs")

        def module(name: str, base: str) -> str | None:
            stem = base.removesuffix(".xz").removesuffix(".ko")
            return (
                f"{stem}.ko"
                if stem in wanted and base in (f"{stem}.ko", f"{stem}.ko.xz") and "/kernel/" in name
                else None
            )

        record(folder, [path for deb in debs for path in _extract(deb, folder, module)])
        shutil.rmtree(folder.parent / "debs")


def kernel_image(root: Path) -> Path | None:
    for pattern in ("boot/vmlinuz-*", "boot/vmlinux-*", "boot/Image*"):
        found = sorted(root.glob(pattern))
        if found:
            return found[0]
    return None


def _extract(deb: Path, into: Path, rename: Callable[[str, str], str | None]) -> list[Path]:
    """The package's plain files that `rename(path, base name)` gives a name, flat into `into`
    under that name (a .xz decompressed): no extraction filter, which Debian 12's Python 3.11.2
    does not have, and no path from the archive is used as one. Each is written under a
    temporary name and put in place only once dpkg-deb has read the whole package without an
    error: a package cut short is one line naming it, and leaves no file. The files put in
    place are returned."""
    into.mkdir(parents=True, exist_ok=True)
    parts: dict[Path, Path] = {}  # final name -> the temporary one it is written under
    try:
        with (
            children.running(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE) as proc,
            tarfile.open(fileobj=proc.stdout, mode="r|*") as tar,
        ):
            for member in tar:
                name = member.name.lstrip("./")
                target = rename(name, name.rpartition("/")[2]) if member.isreg() else None
                if target is None:
                    continue
                source = tar.extractfile(member)
                assert source is not None
                if into / target in parts:  # a later member of the same name wins
                    parts.pop(into / target).unlink()
                fd, temporary = tempfile.mkstemp(dir=into, prefix=f".{target}.", suffix=".part")
                parts[into / target] = Path(temporary)
                os.fchmod(fd, 0o644)
                with contextlib.ExitStack() as stack:
                    out = stack.enter_context(os.fdopen(fd, "wb"))
                    if name.endswith(".xz"):
                        source = stack.enter_context(lzma.LZMAFile(source))
                    shutil.copyfileobj(source, out)
            status = proc.wait()
        if status != 0:
            raise UsageError(f"{deb.name} is damaged (dpkg-deb exited with {status}): {AGAIN}")
    except BaseException as e:
        for left in parts.values():
            left.unlink(missing_ok=True)
        if isinstance(e, tarfile.TarError | EOFError | lzma.LZMAError):
            raise UsageError(f"{deb.name} is damaged ({e}): {AGAIN}") from None
        raise
    for final, part in parts.items():
        os.replace(part, final)
    return list(parts)
