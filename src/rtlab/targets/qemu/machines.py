"""The guests rtlab can boot: machine types per architecture and kernels by name."""

from __future__ import annotations

import platform
from dataclasses import dataclass

from rtlab.errors import UsageError


@dataclass(frozen=True)
class Arch:
    name: str  # as uname -m says
    debian: str  # Debian's architecture name
    # the Debian releases whose packages the guest may use, in order of preference: the first
    # whose index apt verifies is taken (debian.Apt.first_verified) and recorded in the run
    releases: tuple[str, ...]
    qemu: str  # the emulator
    machine: tuple[str, ...]  # machine options
    console: str  # the serial console the kernel writes to
    nic: str  # the network device `ssh=PORT` adds
    # its driver in Debian's kernels, modules in load order (what a board's initrd insmods)
    nic_modules: tuple[str, ...]
    # rtla with auto-analysis (6.3 and later): bookworm's is 6.1, its backports carry 6.12;
    # Debian builds none for riscv64
    rtla: str | None = None  # the package, as apt-get install takes it
    suites: tuple[str, ...] = ()  # suites beside the release, e.g. backports

    @property
    def release(self) -> str:
        """The preferred release (what a cache folder is named after before apt has checked)."""
        return self.releases[0]


ARCHES = {
    "x86_64": Arch(
        "x86_64",
        "amd64",
        ("bookworm",),
        "qemu-system-x86_64",
        ("-machine", "q35"),
        "ttyS0",
        "e1000",
        ("e1000",),
        rtla="rtla/bookworm-backports",
        suites=("bookworm-backports",),
    ),  # fmt: skip
    # riscv64 is a Debian release architecture from trixie on. The newest release first
    # (testing), then stable, then unstable, which is no release: a mirror may serve one of
    # them damaged (trixie's riscv64 index was, for weeks), and apt rightly refuses it.
    # The network card is virtio on PCI, whose transport the kernels build in; virtio on
    # MMIO (`virtio-net-device`) would need virtio_mmio.ko loaded before anything else.
    "riscv64": Arch(
        "riscv64",
        "riscv64",
        ("forky", "trixie", "sid"),
        "qemu-system-riscv64",
        ("-machine", "virt", "-bios", "default"),
        "ttyS0",
        "virtio-net-pci",
        ("failover", "net_failover", "virtio_net"),
    ),  # fmt: skip
}

# name -> (architecture, Debian metapackage of the kernel)
KERNELS = {
    "debian-rt": ("x86_64", "linux-image-rt-amd64"),
    # bookworm-backports' RT kernel (6.12): the tracers' newer parts, rtla hwnoise and
    # timerlat's user-space threads (-u), which 6.1 lacks
    "debian-rt-backports": ("x86_64", "linux-image-rt-amd64/bookworm-backports"),
    "x86_64:debian-rt-backports": ("x86_64", "linux-image-rt-amd64/bookworm-backports"),
    "debian": ("x86_64", "linux-image-amd64"),
    "x86_64:debian-rt": ("x86_64", "linux-image-rt-amd64"),
    "x86_64:debian": ("x86_64", "linux-image-amd64"),
    "riscv64:debian": ("riscv64", "linux-image-riscv64"),  # not PREEMPT_RT: Debian builds none
}

QEMU_PACKAGES = {"x86_64": "qemu-system-x86", "riscv64": "qemu-system-misc opensbi"}


def arch(name: str) -> Arch:
    try:
        return ARCHES[name]
    except KeyError:
        raise UsageError(f"unknown guest architecture {name!r}: choose from {', '.join(ARCHES)}") from None


def named_kernel(name: str) -> tuple[Arch, str]:
    if name == "riscv64:debian-rt":
        raise UsageError(
            "Debian has no PREEMPT_RT riscv64 kernel: build one with `rtlab kernel build` and boot it "
            "with --target qemu:kernel=PATH,arch=riscv64"
        )
    try:
        arch_name, package = KERNELS[name]
    except KeyError:
        raise UsageError(
            f"unknown guest kernel {name!r}: choose from {', '.join(KERNELS)} or kernel=PATH[,arch=...]"
        ) from None
    return ARCHES[arch_name], package


def host_arch() -> str:
    return platform.machine()
