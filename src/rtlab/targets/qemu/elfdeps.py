"""The shared libraries a program needs, found in an unpacked Debian tree (pyelftools)."""

from __future__ import annotations

import os
from collections import deque
from pathlib import Path

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

from rtlab.errors import RunFailed


def _read(path: Path) -> tuple[list[str], str | None]:
    with path.open("rb") as f:
        elf = ELFFile(f)
        interp: str | None = next(
            (seg.get_interp_name() for seg in elf.iter_segments() if seg["p_type"] == "PT_INTERP"),  # type: ignore[attr-defined]
            None,
        )
        needed: list[str] = [
            tag.needed  # type: ignore[attr-defined]
            for section in elf.iter_sections()
            if isinstance(section, DynamicSection)
            for tag in section.iter_tags()
            if tag.entry.d_tag == "DT_NEEDED"
        ]
    return needed, interp


def resolve(root: Path, path: Path) -> Path:
    """Follows symlinks inside `root`: absolute link targets are relative to it, not to the
    host. What a package's links lead to must stay below `root` (a link to `../../..`, or one
    on the way that the system follows to the host's own files, is refused: RunFailed); the
    path returned is the file itself, every link on its way resolved."""
    start = path
    for _ in range(40):
        if not path.is_symlink():
            break
        target = Path(path.readlink())
        path = root / target.relative_to("/") if target.is_absolute() else path.parent / target
    else:
        raise RunFailed(f"{_shown(root, start)} in the guest's packages is a symlink loop: refused")
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(os.path.realpath(root)):
        raise RunFailed(
            f"{_shown(root, start)} in the guest's packages leads outside them (to {real}): refused"
        )
    return real


def _shown(root: Path, path: Path) -> str:
    return os.path.relpath(path, root)


def library_name(name: str, needed_by: Path) -> str:
    """NAME (a DT_NEEDED entry) as one file name of a library folder: a name with '/' or '..'
    would lead out of the packages' folders (RunFailed)."""
    if not name or "/" in name or ".." in name or "\0" in name:
        raise RunFailed(f"{needed_by.name} needs a library named {name!r}, which is no file name: refused")
    return name


def closure(root: Path, programs: list[Path], search: list[str]) -> tuple[dict[str, Path], str | None]:
    """soname -> file for every library `programs` load, and the ELF interpreter they name."""
    found: dict[str, Path] = {}
    interpreter: str | None = None
    todo = deque(programs)
    while todo:
        program = todo.popleft()
        needed, interp = _read(program)
        if interp is not None and (not interp.startswith("/") or ".." in Path(interp).parts):
            raise RunFailed(f"{program.name} names the interpreter {interp!r}, no path of a system: refused")
        interpreter = interpreter or interp
        for soname in needed:
            if soname in found:
                continue
            library_name(soname, program)
            for folder in search:
                candidate = root / folder / soname
                if candidate.exists() or candidate.is_symlink():
                    found[soname] = resolve(root, candidate)
                    todo.append(found[soname])
                    break
            else:
                raise FileNotFoundError(f"{soname} (needed by the guest's tools) is in no package fetched")
    return found, interpreter
