"""Where a name from outside becomes a path: the one place.

A board, a guest, a LAVA log or a run folder copied from elsewhere names files (a load, a
probe, a segment, a trace capture, a file the agent printed). Such a name becomes a path only
here: one component (never `..`, `/` or empty), from a known set where the set is known, and
numbered folders only as numbers. Inside a run folder no link is followed anywhere along the
path: a run whose `loads/idle` links to another run's folder is not read as this run's data.
The run folder itself may be a link (the user's `results/latest`): its owner made it.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Collection
from pathlib import Path

from rtlab.boundary import untrusted

# Letters, digits and ._+- (a load, probe or file name rtlab writes), starting with a letter or
# digit: never `.`, `..`, a hidden file or something an argv would read as an option.
_COMPONENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,99}")
_NUMBER = re.compile(r"[0-9]{1,6}")  # segments/NNN, trace/NNN: a million is far beyond any run


class BadName(untrusted.Damaged):
    """A name from outside that cannot become a path: one line saying why."""


def component(name: str, what: str = "a name", known: Collection[str] | None = None) -> str:
    """NAME if it can be one path component (and is one of KNOWN, when given); BadName else."""
    shown = untrusted.printable(str(name))[:40]
    if not isinstance(name, str) or not _COMPONENT.fullmatch(name):
        raise BadName(f"{shown!r} is not {what}: one name of letters, digits and ._+-")
    if known is not None and name not in known:
        raise BadName(f"{shown!r} is not {what} rtlab knows ({', '.join(sorted(known))})")
    return name


def is_component(name: str, longest: int = 100) -> bool:
    """Whether NAME can be one path component of at most LONGEST characters."""
    return isinstance(name, str) and len(name) <= longest and _COMPONENT.fullmatch(name) is not None


def number(name: str) -> int | None:
    """A numbered folder's number (segments/007 -> 7), None for any other name ("1x", "²")."""
    return int(name) if _NUMBER.fullmatch(name) else None


def numbered(folder: Path) -> list[tuple[int, Path]]:
    """FOLDER's numbered subfolders in order; links and other names are not among them."""
    try:
        entries = list(os.scandir(folder)) if not folder.is_symlink() else []
    except OSError:
        return []
    found = []
    for entry in entries:
        n = number(entry.name)
        if n is not None and entry.is_dir(follow_symlinks=False):
            found.append((n, Path(entry.path)))
    return sorted(found)


def link_along(root: Path, path: Path) -> str | None:
    """The first part of PATH below ROOT that is a link (as ROOT-relative text), None when
    there is none (or PATH is not below ROOT: then its relative form is the answer)."""
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        return str(path)
    here = root
    for part in parts:
        if part in ("..", ".", ""):
            return str(path.relative_to(root))
        here = here / part
        try:
            if stat.S_ISLNK(os.lstat(here).st_mode):
                return here.relative_to(root).as_posix()
        except OSError:
            return None  # not there (yet): nothing below it is a link either
    return None
