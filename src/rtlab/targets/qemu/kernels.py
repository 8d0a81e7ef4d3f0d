"""Debian's kernels for QEMU guests: the image of a kernel package, fetched once into the cache."""

from __future__ import annotations

import shutil
import subprocess
import tarfile
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


def kernel_image(root: Path) -> Path | None:
    for pattern in ("boot/vmlinuz-*", "boot/vmlinux-*", "boot/Image*"):
        found = sorted(root.glob(pattern))
        if found:
            return found[0]
    return None


def _extract_boot(deb: Path, into: Path) -> None:
    """Only /boot of a kernel package: its modules are not needed and are most of its size."""
    into.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    with tarfile.open(fileobj=proc.stdout, mode="r|*") as tar:
        for member in tar:
            name = member.name.lstrip("./")
            # the package's plain files in /boot (image, config, System.map), by name only:
            # no extraction filter, which Debian 12's Python 3.11.2 does not have
            if name.startswith("boot/") and name.count("/") == 1 and member.isreg():
                source = tar.extractfile(member)
                assert source is not None
                (into / "boot").mkdir(exist_ok=True)
                with (into / name).open("wb") as out:
                    shutil.copyfileobj(source, out)
    proc.wait()
