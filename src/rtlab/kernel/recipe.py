"""Building an RT kernel: source, merged config (checked), Image and device trees.

Debian's `linux-source-6.12` is unpacked into the cache once (or `--source DIR` is
used as it is); objects live in a build folder of the cache per board and model, so
a rebuild is incremental. The fragments are merged onto the architecture's
defconfig with the kernel's own scripts/kconfig/merge_config.sh, then every option
they ask for is checked in the resulting .config: one the kernel dropped (a
dependency not met) is an error that names it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rtlab import children
from rtlab.boundary import untrusted
from rtlab.cache import locked, sha256_of
from rtlab.errors import RunFailed, UsageError
from rtlab.kernel import fragments, patches
from rtlab.rundir.disk import write_json
from rtlab.system.kernel import parse_config

DEBIAN_SOURCE = Path("/usr/src/linux-source-6.12.tar.xz")


@dataclass(frozen=True)
class Arch:
    """How the kernel is cross-built for one architecture (named as `uname -m` and rtlab's
    QEMU targets name it)."""

    kernel: str  # the kernel's ARCH=
    cross: str  # CROSS_COMPILE=
    gcc_package: str  # Debian's cross compiler
    image: str  # what `make TARGET` leaves in the build folder: an uncompressed Image (riscv64,
    # arm64), which QEMU's -kernel, U-Boot's booti and kexec all take, or x86's bzImage, which
    # QEMU's -kernel, GRUB and kexec take; either is copied out as Image
    target: str = "Image"
    # what the small base starts from: the defconfig trimmed by the small fragment, or (x86_64,
    # whose defconfig is a desktop's) tinyconfig, to which the small fragment adds what it needs
    small: str = "defconfig"


ARCHES = {
    "riscv64": Arch("riscv", "riscv64-linux-gnu-", "gcc-riscv64-linux-gnu", "arch/riscv/boot/Image"),
    "arm64": Arch("arm64", "aarch64-linux-gnu-", "gcc-aarch64-linux-gnu", "arch/arm64/boot/Image"),
    # built on an x86_64 host by its own compiler (CROSS_COMPILE empty)
    "x86_64": Arch("x86", "", "gcc", "arch/x86/boot/bzImage", "bzImage", "tinyconfig"),
}
TOOLS = {"make": "make", "flex": "flex", "bison": "bison", "bc": "bc", "patch": "patch", "xz": "xz-utils"}


@dataclass(frozen=True)
class Request:
    board: str
    preempt: str
    tick: str = "periodic"
    debug: bool = False
    base: str = "small"
    extra: tuple[Path, ...] = ()  # the user's own fragments, merged last
    rt_patches: str | None = None  # see patches.resolve

    @property
    def arch(self) -> Arch:
        return ARCHES[fragments.BOARDS[self.board].arch]

    def names(self, lazy: bool = False) -> list[str]:
        return fragments.select(self.board, self.preempt, self.tick, self.debug, self.base, lazy)

    def fragment_paths(self, lazy: bool = False) -> list[Path]:
        return [*(fragments.path(name) for name in self.names(lazy)), *self.extra]

    @property
    def slug(self) -> str:
        # user fragments stay out of the name: changing one rebuilds incrementally
        debug = "-debug" if self.debug else ""
        base = "" if self.base == "small" else f"-{self.base}"
        return f"{self.board}-{self.preempt}-{self.tick}{debug}{base}"


def check_tools(arch: Arch) -> None:
    tools = {**TOOLS, f"{arch.cross}gcc": arch.gcc_package}
    missing = sorted({pkg for tool, pkg in tools.items() if shutil.which(tool) is None})
    if missing:
        raise UsageError(f"kernel builds need {', '.join(missing)}: apt-get install {' '.join(missing)}")


def source(
    cache: Path,
    given: Path | None,
    series: patches.Series | None = None,
    log: Path | None = None,
    phase: Callable[[str], None] = lambda p: None,
) -> Path:
    """The kernel tree: `given` as it is, or Debian's linux-source-6.12 unpacked into the cache
    once (with `series` applied: a tree of its own, renamed into place only once all applied)."""
    if given is not None:
        if series is not None:
            raise UsageError(
                "--rt-patches patches Debian's source: apply them to your --source tree yourself"
            )
        if not (given / "Makefile").is_file() or not (given / "scripts/kconfig/merge_config.sh").is_file():
            raise UsageError(f"--source {given} is not a kernel source tree (no Makefile or merge_config.sh)")
        return given.resolve()
    name = "linux-source-6.12" + (f"+rt-{series.digest}" if series else "")
    tree = cache / "kernel-src" / name
    tree.parent.mkdir(parents=True, exist_ok=True)
    with locked(tree.parent / ".lock"):  # two builds at once unpack it once
        if (tree / "Makefile").is_file():
            return tree
        if not DEBIAN_SOURCE.is_file():
            raise UsageError("no kernel source: apt-get install linux-source-6.12, or give --source DIR")
        partial = tree.parent / f".{name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        # tar itself: several times faster than Python's tarfile on this 150 MB .tar.xz
        children.run(["tar", "-xf", str(DEBIAN_SOURCE), "-C", str(partial)], check=True)
        if series is not None:
            patches.apply(series, partial / "linux-source-6.12", log or Path(os.devnull), phase)
        (partial / "linux-source-6.12").rename(tree)
        partial.rmdir()
    return tree


def _make(tree: Path, build: Path, arch: Arch, *targets: str, log: Path, jobs: int | None = None) -> None:
    argv = ["make", "-C", str(tree), f"O={build}", f"ARCH={arch.kernel}", f"CROSS_COMPILE={arch.cross}"]
    argv += [f"-j{jobs}"] if jobs else []
    with log.open("a") as f:
        f.write(untrusted.one_line(f"$ {' '.join(argv + list(targets))}") + "\n")
        f.flush()
        done = children.run([*argv, *targets], stdout=f, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise RunFailed(f"make {' '.join(targets)} failed; the last errors:\n{last_errors(log)}")


def last_errors(log: Path, lines: int = 15) -> str:
    text = untrusted.lines(log.read_text(errors="replace"))
    errors = [line for line in text if re.search(r"\berror\b|Error \d", line)]
    return "\n".join((errors or text)[-lines:])


def configure(tree: Path, build: Path, request: Request, log: Path, lazy: bool = False) -> None:
    """defconfig (or the architecture's small start) + fragments (merge_config.sh) + olddefconfig,
    every requested option checked."""
    build.mkdir(parents=True, exist_ok=True)
    arch = request.arch
    _make(tree, build, arch, arch.small if request.base == "small" else "defconfig", log=log)
    wanted = request.fragment_paths(lazy)
    paths = [str(p) for p in wanted]
    env = {**os.environ, "ARCH": arch.kernel, "CROSS_COMPILE": arch.cross}
    with log.open("a") as f:
        merge = [
            str(tree / "scripts/kconfig/merge_config.sh"),
            "-m",
            "-O",
            str(build),
            str(build / ".config"),
            *paths,
        ]
        f.write(untrusted.one_line(f"$ {' '.join(merge)}") + "\n")
        f.flush()
        done = children.run(merge, cwd=tree, env=env, stdout=f, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise RunFailed(f"merge_config.sh failed:\n{last_errors(log)}")
    _make(tree, build, arch, "olddefconfig", log=log)
    actual = parse_config((build / ".config").read_text())
    # The user's own fragments (a sweep's variant) must be kept whole; an option of rtlab's
    # that they overrule (CONFIG_PROVE_LOCKING=y selects the DEBUG_SPINLOCK a measurement
    # build turns off) is what the user asked for, said in the log, not a refused build.
    ours = fragments.requested([p for p in wanted if p not in request.extra])
    lost, overruled = fragments.kept(ours, fragments.requested(list(request.extra)), actual)
    if overruled:
        with log.open("a") as f:
            said = ", ".join(f"{option}={got} (rtlab's {want})" for option, want, got in overruled)
            f.write(
                untrusted.one_line(f"rtlab: the added fragments overrule rtlab's own options: {said}") + "\n"
            )
    if lost:
        detail = ", ".join(f"{option}={want} (got {got})" for option, want, got in lost)
        raise RunFailed(f"the kernel's Kconfig did not keep: {detail}; a dependency is not met")


def build(
    request: Request,
    out: Path,
    cache: Path,
    given_source: Path | None = None,
    jobs: int | None = None,
    config_only: bool = False,
    phase: Callable[[str], None] = lambda p: None,
    objects: Path | None = None,
) -> dict[str, Any]:
    """Configures (and builds) the kernel; OUT gets .config, Image, dtbs and build-manifest.json.
    The objects go into OBJECTS, else into the cache's build folder of the board and model."""
    if given_source is not None and request.rt_patches:
        raise UsageError("--rt-patches patches Debian's source: apply them to your --source tree yourself")
    arch = request.arch
    check_tools(arch)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "build.log"
    log.write_text("")
    phase("source")
    series = patches.resolve(request.rt_patches, cache) if request.rt_patches else None
    tree = source(cache, given_source, series, log, phase)
    lazy = fragments.source_has_lazy(tree, arch.kernel)
    # a patched tree's objects never share a folder with the plain tree's
    build_dir = objects or cache / "kernel-build" / (
        request.slug + (f"-rt-{series.digest}" if series else "")
    )
    phase("config")
    started = time.monotonic()
    configure(tree, build_dir, request, log, lazy)
    shutil.copy2(build_dir / ".config", out / ".config")
    outputs = [out / ".config"]
    if not config_only:
        phase("build")
        # the board's own device trees only: all of an architecture's take longer than its Image
        dtbs = fragments.BOARDS[request.board].dtbs
        _make(tree, build_dir, arch, arch.target, *dtbs, log=log, jobs=jobs or os.cpu_count())
        shutil.copy2(build_dir / arch.image, out / "Image")
        outputs.append(out / "Image")
        if dtbs:
            (out / "dtbs").mkdir(exist_ok=True)
        for dtb in dtbs:
            built = build_dir / "arch" / arch.kernel / "boot/dts" / dtb
            shutil.copy2(built, out / "dtbs" / built.name)
            outputs.append(out / "dtbs" / built.name)
    manifest = {
        "schema": "rtlab.kernel-build/1",
        "request": {
            "board": request.board,
            "arch": fragments.BOARDS[request.board].arch,
            "preempt": request.preempt,
            "tick": request.tick,
            "debug": request.debug,
            "base": request.base,
        },
        "source": {
            "path": str(tree),
            "version": _kernel_version(tree, build_dir),
            "rt_patches": None
            if series is None
            else {"series": series.label, "patches": len(series.patches), "digest": series.digest},
            "lazy_preemption": lazy,
        },
        "fragments": {p.name: sha256_of(p) for p in request.fragment_paths(lazy)},
        "compiler": _compiler(arch),
        "seconds": round(time.monotonic() - started, 1),
        "outputs": {p.relative_to(out).as_posix(): sha256_of(p) for p in outputs},
    }
    write_json(out / "build-manifest.json", manifest)
    return manifest


def _kernel_version(tree: Path, build: Path) -> str:
    done = children.run(
        ["make", "-s", "-C", str(tree), f"O={build}", "kernelversion"], capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


def _compiler(arch: Arch) -> str:
    done = children.run([f"{arch.cross}gcc", "--version"], capture_output=True, text=True)
    return (untrusted.lines(done.stdout) or ["unknown"])[0]
