"""The guest's root file system: busybox, cyclictest, stress-ng and the libraries they
load, from Debian packages of the guest's architecture, plus the agent and /init.

Two archives concatenated (the kernel unpacks each in turn): a base one cached per
Debian release and architecture, and a small one with the agent and /init made for
every run, so a change to either never needs the packages again. A user's own
initrd may follow; its files win.
"""

from __future__ import annotations

import hashlib
import io
import shutil
from collections.abc import Sequence
from pathlib import Path

from rtlab.agent import script
from rtlab.debian import Apt, extract
from rtlab.targets.qemu import cpio, elfdeps

PACKAGES = ["busybox-static", "rt-tests", "stress-ng"]  # and rtla where the Arch names one
TOOLS = {
    "busybox": "bin/busybox",
    "cyclictest": "usr/bin/cyclictest",
    "stress-ng": "usr/bin/stress-ng",
    # the other probes of rt-tests (--probe)
    "oslat": "usr/bin/oslat",
    "cyclicdeadline": "usr/bin/cyclicdeadline",
    "pmqtest": "usr/bin/pmqtest",
    "ptsematest": "usr/bin/ptsematest",
    "sigwaittest": "usr/bin/sigwaittest",
    "svsematest": "usr/bin/svsematest",
    "signaltest": "usr/bin/signaltest",
    "rt-migrate-test": "usr/bin/rt-migrate-test",
    "pi_stress": "usr/bin/pi_stress",
    "hackbench": "usr/bin/hackbench",  # a load (loads.toml)
}
RTLA = {"rtla": "usr/bin/rtla"}
# libraries no program names but glibc opens at run time: pthread_exit and pthread_cancel
# unwind through libgcc_s (rtla timerlat -u's threads abort without it)
DLOPENED = ("libgcc_s.so.1",)
TRIPLETS = {"amd64": "x86_64-linux-gnu", "riscv64": "riscv64-linux-gnu", "arm64": "aarch64-linux-gnu"}
INIT = Path(__file__).with_name("init.sh")


def _find(stage: Path, name: str, folders: Sequence[str]) -> Path | None:
    """NAME in the first of FOLDERS of the unpacked packages that has it (links resolved)."""
    for folder in folders:
        path = stage / folder / name
        if path.exists():
            return elfdeps.resolve(stage, path)
    return None


def _find_tool(stage: Path, name: str) -> Path:
    found = _find(stage, name, ("usr/bin", "bin", "usr/sbin", "sbin"))
    if found is None:
        raise FileNotFoundError(f"{name} is in no package fetched for the guest")
    return found


def base_name(rtla: str | None) -> str:
    """The cached archive's file name: a new one whenever the tools it carries change."""
    tools = (
        " ".join(f"{name}={path}" for name, path in sorted(_tools(rtla).items())) + " " + " ".join(DLOPENED)
    )
    return f"base-{hashlib.sha256(tools.encode()).hexdigest()[:12]}.cpio"


def _tools(rtla: str | None) -> dict[str, str]:
    return TOOLS | RTLA if rtla else TOOLS


def build_base(apt: Apt, out: Path, rtla: str | None = None) -> Path:
    """The cached archive of tools and libraries (built once per release and architecture);
    `rtla`: the rtla package as apt takes it (e.g. rtla/bookworm-backports), None: none."""
    return build_tools(apt, out, [*PACKAGES, *([rtla] if rtla else [])], _tools(rtla))


def build_tools(apt: Apt, out: Path, packages: list[str], tools: dict[str, str]) -> Path:
    """A cached archive of `tools` (name -> path in the guest) from Debian `packages`, with
    exactly the shared libraries they load; also what a user's initrd can be made of."""
    if out.exists():
        return out
    triplet = TRIPLETS[apt.arch]
    stage = out.with_suffix(".stage")
    shutil.rmtree(stage, ignore_errors=True)
    apt.update()
    extract(apt.download_with_dependencies(packages), stage)
    programs = {name: _find_tool(stage, name) for name in tools}
    search = [f"usr/lib/{triplet}", f"lib/{triplet}", "usr/lib", "lib", "usr/lib64", "lib64"]
    opened = {name: found for name in DLOPENED if (found := _find(stage, name, search)) is not None}
    libraries, interpreter = elfdeps.closure(stage, [*programs.values(), *opened.values()], search)
    for name, path in opened.items():
        libraries.setdefault(name, path)

    buffer = io.BytesIO()
    w = cpio.Writer(buffer)
    for folder in ("usr", "usr/bin", "usr/sbin", "usr/lib", f"usr/lib/{triplet}", "usr/lib64", "bin", "sbin",
                   "dev", "proc", "sys", "tmp", "run", "root", "etc", "rtlab"):  # fmt: skip
        w.directory(folder)
    # Merged /usr: the interpreter a binary names (/lib/ld-linux-*.so.1) lies under usr/.
    w.symlink("lib", "usr/lib")
    w.symlink("lib64", "usr/lib64")
    w.char_device("dev/console", 5, 1)
    w.char_device("dev/null", 1, 3, 0o666)
    for name, path in programs.items():
        w.file(tools[name], path.read_bytes(), 0o755)
    for soname, path in sorted(libraries.items()):
        w.file(f"usr/lib/{triplet}/{soname}", path.read_bytes(), 0o755)
    if interpreter:
        real = libraries.get(Path(interpreter).name) or elfdeps.resolve(
            stage, stage / interpreter.lstrip("/")
        )
        w.file(f"usr/{interpreter.lstrip('/').removeprefix('usr/')}", real.read_bytes(), 0o755)
    w.file("etc/ld.so.conf", f"/usr/lib/{triplet}\n".encode())
    w.close()

    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".part")
    partial.write_bytes(buffer.getvalue())
    partial.replace(out)
    shutil.rmtree(stage, ignore_errors=True)
    return out


def overlay(kernel_config: Path | None = None) -> bytes:
    """The archive with /init, the agent and the kernel's config, made fresh for every boot."""
    buffer = io.BytesIO()
    w = cpio.Writer(buffer)
    w.file("init", INIT.read_bytes(), 0o755)
    w.directory("rtlab")
    w.file("rtlab/agent.sh", script(), 0o755)
    if kernel_config is not None:
        # /init links it to /boot/config-$(uname -r), where the agent looks.
        w.directory("boot")
        w.file("boot/config", kernel_config.read_bytes())
    w.close()
    return buffer.getvalue()
