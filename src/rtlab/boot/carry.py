"""kexec for a board that has none: kexec-tools from Debian's package for the board's
architecture, carried with its shared libraries and its dynamic loader as the QEMU guests'
tools are (debian.Apt per architecture, elfdeps for the libraries), into the boot's folder on
the board, and run through the carried loader (`ld.so --library-path FOLDER FOLDER/kexec`):
nothing is installed on the board, nothing of its own is read (its C library may be another
version, or musl), and --back's removal of rtlab's boot folder removes it.

The files are cached on the host once per Debian release and architecture, each listed whole
(rtlab.cache) once it is in place; the kexec-tools version is written last."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from rtlab.agent.shell import quote
from rtlab.boundary import untrusted
from rtlab.cache import record, whole, writing
from rtlab.errors import UsageError

PACKAGE = "kexec-tools"
PROGRAM = "kexec"  # its name on the board, beside its libraries
_IN_PACKAGE = ("usr/sbin/kexec", "sbin/kexec")
_VERSION = "VERSION"


@dataclass(frozen=True)
class Tool:
    """How the boot runs kexec: WORDS before kexec's own arguments, FILES (name on the board ->
    host file) copied into the boot's folder, PREPARE run once they are there (None: nothing)."""

    words: tuple[str, ...] = ("kexec",)
    files: dict[str, Path] = field(default_factory=dict)
    prepare: str | None = None
    said: str = "the board's own"  # what the record and a dry run say

    @property
    def carried(self) -> bool:
        return bool(self.files)


def on_board(found: str) -> bool:
    """Whether the board's report (`command -v kexec || echo none`) names a kexec of its own."""
    last = found.strip().split("\n")[-1:]
    return bool(last) and last != ["none"] and last != [""]


def fetch(machine: str, cache: Path) -> tuple[dict[str, Path], str, str, str]:
    """kexec-tools for the board's MACHINE (uname -m): (name -> cached file, the loader's name,
    the package's version, the Debian release), fetched once into CACHE."""
    from rtlab import debian
    from rtlab.targets.qemu import elfdeps, initramfs, machines

    arch = machines.ARCHES.get(machine)
    if arch is None:
        raise UsageError(
            f"the board is {untrusted.printable(machine)} and has no kexec: rtlab carries kexec-tools "
            f"for {', '.join(machines.ARCHES)} only; install kexec-tools on the board"
        )
    apt = debian.Apt.first_verified(cache, arch.releases, arch.debian, arch.suites)
    folder = cache / "carry" / f"{apt.release}-{arch.debian}" / PACKAGE
    found = _cached(folder)
    if found is None:
        shutil.rmtree(folder, ignore_errors=True)
        stage = folder.with_name(f".{PACKAGE}.stage")
        shutil.rmtree(stage, ignore_errors=True)
        try:
            apt.update()
            debian.extract(apt.download_with_dependencies([PACKAGE]), stage)
            program = next((stage / p for p in _IN_PACKAGE if (stage / p).exists()), None)
            if program is None:
                raise UsageError(f"Debian {apt.release}'s {PACKAGE} for {arch.debian} holds no kexec")
            program = elfdeps.resolve(stage, program)
            triplet = initramfs.TRIPLETS[arch.debian]
            search = [f"usr/lib/{triplet}", f"lib/{triplet}", "usr/lib", "lib", "usr/lib64", "lib64"]
            libraries, interpreter = elfdeps.closure(stage, [program], search)
            if interpreter is None:
                raise UsageError(f"Debian {apt.release}'s kexec for {arch.debian} names no dynamic loader")
            loader = elfdeps.library_name(Path(interpreter).name, program)
            sources = {PROGRAM: program, **libraries}
            sources.setdefault(loader, elfdeps.resolve(stage, stage / interpreter.lstrip("/")))
            folder.mkdir(parents=True)
            placed = []
            for name, source in sources.items():
                with writing(folder / name) as part:
                    shutil.copyfile(source, part)
                placed.append(folder / name)
            record(folder, placed)
            with writing(folder / _VERSION) as part:  # last: a folder without it is fetched again
                part.write_text(f"{apt.version(PACKAGE)} {apt.release} {loader}\n")
        finally:
            shutil.rmtree(stage, ignore_errors=True)
        found = _cached(folder)
        assert found is not None
    files, loader, version = found
    return files, loader, version, apt.release


def _cached(folder: Path) -> tuple[dict[str, Path], str, str] | None:
    """(files, loader, version) of a whole cached copy, else None."""
    try:  # a cache is read back as any outside file: no link, a cap
        version, _release, loader = untrusted.read_text(folder / _VERSION, 4096).split()
    except (OSError, ValueError):
        return None
    files = {
        p.name: p
        for p in folder.iterdir()
        if p.is_file() and not p.is_symlink() and not p.name.startswith(".")
    }
    files.pop(_VERSION, None)
    if PROGRAM not in files or loader not in files or not all(whole(p) for p in files.values()):
        return None
    return files, loader, version


def tool(report: dict[str, str], folder: str, cache: Path) -> Tool:
    """The board's own kexec when it has one, else kexec-tools carried into FOLDER (the boot's
    folder on the board) and run through the carried loader."""
    if on_board(report.get("kexec", "")):
        return Tool(said=f"the board's own ({untrusted.printable(report['kexec'].strip())})")
    files, loader, version, release = fetch(report.get("arch", ""), cache)
    loader_path, program = f"{folder}/{loader}", f"{folder}/{PROGRAM}"
    words = (loader_path, "--library-path", folder, program)
    # the loader runs as a program (the others are mapped by it); --version shows at once that
    # the board can run it (a folder mounted noexec cannot)
    check = " ".join(quote(w) for w in (*words, "--version"))
    return Tool(
        words=words,
        files=dict(sorted(files.items())),
        prepare=f"chmod 0755 {quote(loader_path)} && {check}",
        said=f"carried: {PACKAGE} {untrusted.printable(version)} of Debian {release}",
    )


def can_carry(machine: str) -> bool:
    """Whether rtlab carries kexec-tools for a board of MACHINE (uname -m)."""
    from rtlab.targets.qemu import machines

    return machine in machines.ARCHES
