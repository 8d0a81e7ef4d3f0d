"""Debian's kernels for QEMU guests: the image of a kernel package, fetched once into the cache."""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path

from rtlab.debian import Apt
from rtlab.errors import UsageError


def fetch_kernel(apt: Apt, cache: Path, metapackage: str) -> tuple[Path, str, str]:
    """The kernel image of `metapackage`'s current kernel: (path, package, version), cached."""
    apt.update()
    package = apt.depends_on(metapackage, "linux-image-")
    folder = cache / "kernels" / apt.arch / package
    image = kernel_image(folder / "root")
    if image is None:
        debs = apt.download([package], folder / "debs")
        _extract_boot(debs[0], folder / "root")
        (folder / "VERSION").write_text(debs[0].name.split("_")[1] + "\n")
        shutil.rmtree(folder / "debs")
        image = kernel_image(folder / "root")
        if image is None:
            raise UsageError(f"{package} holds no kernel image under /boot")
    return image, package, (folder / "VERSION").read_text().strip()


def fetch_modules(apt: Apt, cache: Path, metapackage: str, names: list[str]) -> list[Path]:
    """The named modules (e1000 for e1000.ko) of `metapackage`'s current kernel, in `names`'
    order, cached beside its image: what a guest that needs a driver loads with insmod."""
    apt.update()
    package = apt.depends_on(metapackage, "linux-image-")
    folder = cache / "kernels" / apt.arch / package / "modules"
    wanted = {f"{name}.ko": folder / f"{name}.ko" for name in names}
    if not all(path.is_file() for path in wanted.values()):
        debs = apt.download([package], folder.parent / "debs")
        _extract(debs[0], folder, lambda name, base: base in wanted and "/kernel/" in name)
        shutil.rmtree(folder.parent / "debs")
    missing = [name for name, path in wanted.items() if not path.is_file()]
    if missing:
        raise UsageError(f"{package} has no module {', '.join(missing)}: it may be built in")
    return list(wanted.values())


def kernel_image(root: Path) -> Path | None:
    for pattern in ("boot/vmlinuz-*", "boot/vmlinux-*", "boot/Image*"):
        found = sorted(root.glob(pattern))
        if found:
            return found[0]
    return None


def _extract_boot(deb: Path, into: Path) -> None:
    """Only /boot of a kernel package (image, config, System.map): its modules are most of its
    size and a guest needs none of them."""
    _extract(deb, into / "boot", lambda name, base: name == f"boot/{base}")


def _extract(deb: Path, into: Path, wanted: Callable[[str, str], bool]) -> None:
    """The package's plain files whose (path, base name) are `wanted`, flat into `into`, by base
    name only: no extraction filter, which Debian 12's Python 3.11.2 does not have."""
    into.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    with tarfile.open(fileobj=proc.stdout, mode="r|*") as tar:
        for member in tar:
            name = member.name.lstrip("./")
            base = name.rpartition("/")[2]
            if member.isreg() and wanted(name, base):
                source = tar.extractfile(member)
                assert source is not None
                with (into / base).open("wb") as out:
                    shutil.copyfileobj(source, out)
    proc.wait()
