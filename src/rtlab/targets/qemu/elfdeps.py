"""The shared libraries a program needs, found in an unpacked Debian tree (pyelftools)."""

from __future__ import annotations

from collections import deque
from pathlib import Path

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile


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
    """Follows symlinks inside `root`: absolute link targets are relative to it, not to the host."""
    for _ in range(40):
        if not path.is_symlink():
            return path
        target = Path(path.readlink())
        path = root / target.relative_to("/") if target.is_absolute() else path.parent / target
    raise ValueError(f"symlink loop at {path}")


def closure(root: Path, programs: list[Path], search: list[str]) -> tuple[dict[str, Path], str | None]:
    """soname -> file for every library `programs` load, and the ELF interpreter they name."""
    found: dict[str, Path] = {}
    interpreter: str | None = None
    todo = deque(programs)
    while todo:
        needed, interp = _read(todo.popleft())
        interpreter = interpreter or interp
        for soname in needed:
            if soname in found:
                continue
            for folder in search:
                candidate = root / folder / soname
                if candidate.exists() or candidate.is_symlink():
                    found[soname] = resolve(root, candidate)
                    todo.append(found[soname])
                    break
            else:
                raise FileNotFoundError(f"{soname} (needed by the guest's tools) is in no package fetched")
    return found, interpreter
