"""rtlab's own kernel build as a subject's preparation (QEMU targets need no script of the
user's): the kernel of a revision or a configuration built into the subject's folder,
incrementally (a sweep's in the build folder of rtlab's cache, shared; a bisection's, whose
source is its own worktree, in a build folder of its own), once: a folder that holds a
finished build is not built again. A build the kernel refuses (an option its Kconfig drops,
a compile error) skips that subject, as exit 125 does, with the reason in its log."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rtlab.bisect.measured import READY, SKIPPED
from rtlab.boundary import untrusted
from rtlab.errors import RunFailed, Stopped

MANIFEST = "build-manifest.json"


@dataclass(frozen=True)
class KernelBuild:
    board: str  # as `rtlab kernel build --board`
    preempt: str = "rt"


def spec(text: str) -> KernelBuild:
    """--kernel-build BOARD[:PREEMPT], e.g. qemu-virt:rt or visionfive2:lowlatency."""
    from rtlab.kernel import fragments

    board, _, preempt = text.partition(":")
    built = KernelBuild(board, preempt or "rt")
    fragments.select(built.board, built.preempt)  # an unknown board or model is one line here
    return built


def kernel(folder: Path) -> Path:
    """Where a subject's built kernel is (what `{kernel}` in --target becomes)."""
    return (folder / "kernel" / "Image").resolve()


def prepare(how: KernelBuild, folder: Path, source: Path | None, fragments: tuple[Path, ...] = (),
            objects: Path | None = None) -> str:  # fmt: skip
    """The kernel built into FOLDER/kernel from SOURCE (else Debian's), the FRAGMENTS merged
    last, unless it is there already: READY, or SKIPPED when the kernel refused the build.
    OBJECTS: a build folder of the caller's own (else the cache's, shared)."""
    from rtlab.cache import cache_dir
    from rtlab.kernel import recipe

    out = folder / "kernel"
    if (out / MANIFEST).is_file() and kernel(folder).is_file():
        return READY
    request = recipe.Request(how.board, how.preempt, extra=tuple(f.resolve() for f in fragments))
    try:
        recipe.build(request, out, cache_dir(), source, objects=objects)
    except KeyboardInterrupt:
        raise Stopped(f"interrupted while building {out}: run the same command again to go on") from None
    except RunFailed as e:
        with open(folder / "prepare.log", "a", encoding="utf-8") as log:
            log.write(untrusted.each_one_line(f"kernel build refused: {e}") + "\n")
        return SKIPPED
    return READY
