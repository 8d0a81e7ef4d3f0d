"""rtlab's download and build cache: $RTLAB_CACHE, else $XDG_CACHE_HOME/rtlab, else ~/.cache/rtlab.

What it holds is written whole or not at all: under a temporary name in its own folder, checked,
then put in place with os.replace (`writing`). A folder of files that make one entry (a kernel's
image and config, a kernel's modules) also lists each file with its size once it is in place
(`record`): a file cut short (by a kill, a full disk, or an rtlab that wrote in place) is not
on that list as it is, so it is fetched again instead of being served (`whole`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rtlab.boundary import untrusted

LISTED = ".whole"  # in a cache folder: "SIZE NAME" for each file known to be whole


def cache_dir() -> Path:
    explicit = os.environ.get("RTLAB_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rtlab"


def sha256_of(path: Path) -> str:
    """A file's SHA-256, read in blocks (a kernel image, a .deb): what names and checks an entry."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """PATH (a lock file, made if missing) held by this process alone while the block runs: two
    rtlab fetching or unpacking one cache entry at once do it once, one after the other (the
    second finds it whole), instead of removing each other's files half written. The kernel
    lets go of it however the process ends. A cache that cannot be written (or a file system
    without locks) runs the block unlocked: what it then fails to write says why itself."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        fd = None
    try:
        if fd is not None:
            with contextlib.suppress(OSError):  # ENOLCK: NFS without its lock service
                fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        if fd is not None:
            os.close(fd)


@contextmanager
def writing(path: Path) -> Iterator[Path]:
    """A temporary name in PATH's folder to write PATH under: it becomes PATH (os.replace, so
    a reader sees the old file or the new one) when the block ends without an error, and is
    removed when it does not, leaving no part of it under PATH."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    os.close(fd)
    part = Path(name)
    try:
        yield part
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)


# the list of whole files of a cache folder: a line a file, far under this
LISTED_BYTES = 4 << 20


def _listed(folder: Path) -> dict[str, int]:
    try:  # a cache is read back as any outside file: no link, a cap
        text = untrusted.read_text(folder / LISTED, LISTED_BYTES)
    except (OSError, untrusted.Damaged):
        return {}
    found = {}
    for line in text.split("\n"):
        size, _, name = line.partition(" ")
        if size.isdigit() and name:
            found[name] = int(size)
    return found


def record(folder: Path, paths: Iterable[Path]) -> None:
    """PATHS (files of FOLDER, each put in place whole) added to FOLDER's list of whole files
    with the sizes they have now; the list itself replaced whole."""
    listed = _listed(folder)
    listed.update({path.name: path.stat().st_size for path in paths})
    with writing(folder / LISTED) as part:
        part.write_text(
            "".join(f"{size} {name}\n" for name, size in sorted(listed.items())), encoding="utf-8"
        )


def whole(path: Path) -> bool:
    """Whether PATH is a file its folder's list names, with the size it has: written whole by
    rtlab and not cut since."""
    try:
        size = path.stat().st_size if path.is_file() else None
    except OSError:
        return False
    return size is not None and _listed(path.parent).get(path.name) == size
