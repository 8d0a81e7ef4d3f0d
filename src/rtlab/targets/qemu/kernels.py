"""Debian's kernels for QEMU guests: the image of a kernel package, fetched once into the cache.

Where a kernel package keeps its files changed after trixie. Up to trixie linux-image-VER
holds /boot/vmlinuz-VER, /boot/config-VER and the modules. From forky on linux-image-VER is
empty and depends on linux-binary-VER (usr/lib/modules/VER/vmlinuz), linux-base-VER
(usr/lib/modules/VER/config) and linux-modules-VER. Both come to the same cache layout:
boot/vmlinuz-VER and boot/config-VER, the modules flat beside them. Modules ship as NAME.ko
or, from trixie on, NAME.ko.xz; the cache holds them as NAME.ko, which busybox's insmod loads.
"""

from __future__ import annotations

import contextlib
import lzma
import re
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path

from rtlab import children
from rtlab.debian import Apt
from rtlab.errors import UsageError

_SPLIT = ("linux-binary-", "linux-base-")  # the image and its config, from forky on
_MODULES = "linux-modules-"
_SPLIT_FILE = re.compile(r"usr/lib/modules/([^/]+)/(vmlinuz|config)")


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
    image = kernel_image(folder / "root")
    if image is None:
        debs = apt.download(packages, folder / "debs")
        for deb in debs:
            _extract(deb, folder / "root" / "boot", _boot_name)
        version = next(deb for deb in debs if deb.name.startswith(f"{package}_")).name.split("_")[1]
        (folder / "VERSION").write_text(version + "\n")
        shutil.rmtree(folder / "debs")
        image = kernel_image(folder / "root")
        if image is None:
            raise UsageError(f"{', '.join(packages)} hold no kernel image (under /boot or /usr/lib/modules)")
    return image, package, (folder / "VERSION").read_text().strip()


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
    if not all(path.is_file() for path in wanted.values()):
        debs = apt.download(packages, folder.parent / "debs")

        def module(name: str, base: str) -> str | None:
            stem = base.removesuffix(".xz").removesuffix(".ko")
            return (
                f"{stem}.ko"
                if stem in wanted and base in (f"{stem}.ko", f"{stem}.ko.xz") and "/kernel/" in name
                else None
            )

        for deb in debs:
            _extract(deb, folder, module)
        shutil.rmtree(folder.parent / "debs")
    missing = [name for name, path in wanted.items() if not path.is_file()]
    if missing:
        raise UsageError(f"{', '.join(packages)} have no module {', '.join(missing)}: it may be built in")
    return list(wanted.values())


def kernel_image(root: Path) -> Path | None:
    for pattern in ("boot/vmlinuz-*", "boot/vmlinux-*", "boot/Image*"):
        found = sorted(root.glob(pattern))
        if found:
            return found[0]
    return None


def _extract(deb: Path, into: Path, rename: Callable[[str, str], str | None]) -> None:
    """The package's plain files that `rename(path, base name)` gives a name, flat into `into`
    under that name (a .xz decompressed): no extraction filter, which Debian 12's Python 3.11.2
    does not have, and no path from the archive is used as one."""
    into.mkdir(parents=True, exist_ok=True)
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
            with contextlib.ExitStack() as stack:
                out = stack.enter_context((into / target).open("wb"))
                if name.endswith(".xz"):
                    source = stack.enter_context(lzma.LZMAFile(source))
                shutil.copyfileobj(source, out)
        proc.wait()
