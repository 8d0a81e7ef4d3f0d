"""A Debian kernel package as KERNEL: a file (`rtlab boot --target ... linux-image-VER_*.deb`), its
image taken out of the package as the QEMU targets take theirs (kernels._extract: regular
members only, never a path of the archive used as one, a package cut short leaves no file),
for the architecture of the board it boots on; or a metapackage (linux-image-rt-amd64), fetched
for that architecture from Debian as the QEMU targets fetch theirs (fetch_debian_kernel).

The package is the user's file, yet not read on trust: at most MAX_DEB bytes, its fields read
by dpkg-deb and checked for shape, the kernel's release in a member's name validated before it
names anything. Only the image is used: the modules stay in the package (a board's own
initramfs or --initrd brings what its boot needs; the kernel rtlab boots for a measurement
runs from the board's root without its modules unless they are installed there)."""

from __future__ import annotations

import gzip
import re
import shutil
import zlib
from pathlib import Path

from rtlab import children
from rtlab.boundary import untrusted
from rtlab.cache import record, sha256_of, whole, writing
from rtlab.errors import UsageError

MAX_DEB = 512 << 20  # Debian's largest kernel packages are under 150 MB
MIN_DEB = 1 << 10  # an ar archive with a control and a data member is never smaller
_RELEASE = re.compile(r"[0-9][A-Za-z0-9.+~_-]{0,99}")
_NAME = re.compile(r"[a-z0-9][a-z0-9.+-]{1,99}")
_ARCH = re.compile(r"[a-z0-9][a-z0-9-]{0,30}")
_IMAGE_MEMBER = re.compile(r"boot/(vmlinuz|vmlinux)-([^/]+)|usr/lib/modules/([^/]+)/vmlinuz")
_MAX_GUNZIPPED = 256 << 20  # image.py's bound on a kernel image


def fields(deb: Path) -> dict[str, str]:
    """The package's Package, Version and Architecture, checked for shape."""
    done = children.run(
        ["dpkg-deb", "--field", str(deb), "Package", "Version", "Architecture"],
        capture_output=True,
        timeout=120,
    )
    if done.returncode != 0:
        said = untrusted.printable(done.stderr.decode("utf-8", "replace").strip())[-200:]
        raise UsageError(f"{deb} is not a Debian package dpkg-deb reads ({said}): give a linux-image-*.deb")
    found: dict[str, str] = {}
    for line in untrusted.lines(done.stdout.decode("utf-8", "replace")):
        key, colon, value = line.partition(":")
        if colon and key in ("Package", "Version", "Architecture"):
            found[key] = value.strip()
    if not _NAME.fullmatch(found.get("Package", "")) or not _ARCH.fullmatch(found.get("Architecture", "")):
        raise UsageError(f"{deb} names no package or architecture: give a linux-image-*.deb")
    found["Version"] = untrusted.printable(found.get("Version", "?"))[:100]
    return found


def _image_name(name: str, base: str) -> str | None:
    """The kernel image among a package's members, named vmlinuz-RELEASE (or vmlinux-RELEASE),
    RELEASE checked to be one; anything else is left in the package."""
    found = _IMAGE_MEMBER.fullmatch(name)
    if found is None:
        return None
    kind, release = (found.group(1), found.group(2)) if found.group(1) else ("vmlinuz", found.group(3))
    if not _RELEASE.fullmatch(release) or ".." in release or release.endswith(".xz"):
        return None  # a .xz member would be unpacked by kernels._extract without a bound
    return f"{kind}-{release}"


def kernel_of(deb: Path, machine: str, target: str, cache: Path) -> tuple[Path, dict[str, str]]:
    """(the image of DEB, what the record keeps of the package), DEB for the board's MACHINE
    (uname -m) or a UsageError naming the package to give."""
    from rtlab.targets.qemu import kernels, machines

    try:
        size = deb.stat().st_size
    except OSError as e:
        raise UsageError(f"cannot read {deb}: {e.strerror}") from None
    if not deb.is_file() or not MIN_DEB <= size <= MAX_DEB:
        raise UsageError(f"{deb} is no kernel package (a file of 1 KiB to {MAX_DEB >> 20} MiB): give a .deb")
    arch = machines.ARCHES.get(machine)
    if arch is None:
        raise UsageError(
            f"{target} is {untrusted.printable(machine)}: rtlab knows the Debian architecture of "
            f"{', '.join(machines.ARCHES)} boards only; give the kernel image's path"
        )
    said = fields(deb)
    if said["Architecture"] != arch.debian:
        raise UsageError(
            f"{deb.name} is a {said['Architecture']} package and {target} is {machine} "
            f"(Debian's {arch.debian}): give a linux-image package of {arch.debian}"
        )
    digest = sha256_of(deb)
    folder = cache / "boot-debs" / digest[:32]
    images = sorted(p for p in folder.glob("vmlinu[zx]-*") if whole(p)) if folder.is_dir() else []
    if not images:
        shutil.rmtree(folder, ignore_errors=True)
        images = sorted(kernels._extract(deb, folder, _image_name))
        if not images:
            raise UsageError(
                f"{deb.name} holds no kernel image (boot/vmlinuz-*, usr/lib/modules/*/vmlinuz): from forky "
                "on linux-image-VER is empty and its image is in linux-binary-VER's .deb: give that one"
            )
        images = [_gunzipped(p) for p in images]
        record(folder, images)
    return images[0], {
        "package": said["Package"],
        "package_version": said["Version"],
        "deb": str(deb),
        "deb_sha256": digest,
    }


def fetch_debian_kernel(target: str, package: str, machine: str) -> tuple[Path, dict[str, str]]:
    """PACKAGE's kernel image for the board's architecture MACHINE (uname -m), fetched and
    checked as the QEMU targets fetch theirs (apt verifies Debian's index; the cache keeps files
    whole): (the image, its package, version and Debian release)."""
    from rtlab import debian
    from rtlab.cache import cache_dir
    from rtlab.targets.qemu import kernels, machines  # the guests' kernels are fetched so too

    arch = machines.ARCHES.get(machine)
    if arch is None:
        raise UsageError(
            f"{target} is {untrusted.printable(machine)}: rtlab fetches Debian kernels for "
            f"{', '.join(machines.ARCHES)} only; give the image's path"
        )
    cache = cache_dir()
    apt = debian.Apt.first_verified(cache, arch.releases, arch.debian, arch.suites)
    image, name, version = kernels.fetch_kernel(apt, cache, package)
    return image, {"package": name, "package_version": version, "release_of_debian": apt.release}


def _gunzipped(path: Path) -> Path:
    """An arm64 package's vmlinuz is a gzip'd Image, which kexec and image.py take uncompressed."""
    with path.open("rb") as f:
        if f.read(2) != b"\x1f\x8b":
            return path
    try:
        with gzip.open(path, "rb") as src, writing(path) as part, part.open("wb") as out:
            copied = 0
            while chunk := src.read(1 << 20):
                copied += len(chunk)
                if copied > _MAX_GUNZIPPED:
                    raise UsageError(f"{path.name} unpacks to more than any kernel image: not a kernel")
                out.write(chunk)
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:  # the package's, cut short or damaged
        path.unlink(missing_ok=True)
        raise UsageError(
            f"{path.name} in the package is a damaged gzip ({untrusted.printable(str(e))}): give a whole .deb"
        ) from None
    return path
