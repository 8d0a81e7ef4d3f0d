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
    # the CPU model under software emulation (under KVM the host's own); None: the machine's
    cpu: str | None = None
    debian_name: str = ""  # what Debian and the user call it where that differs from uname -m
    # How the kernel speaks while it boots (the guest's /init turns it down to alerts after).
    # Quiet: Debian's 6.1 PREEMPT_RT kernels print from a console thread of their own, and an
    # x86_64 RT board whose boot said everything hung silent in its first run under load, once
    # in a whole make test (its boot quiet, never seen). riscv64's says all of it from the first
    # line (the device tree's console, `earlycon`): a riscv64 guest on a busy host now and then
    # hangs after OpenSBI, and its console's tail then says where.
    boot_words: tuple[str, ...] = ("quiet", "loglevel=3")
    # How long a boot that speaks (earlycon) may say nothing before the guest is taken to have
    # hung and is started once more; None where a boot is quiet, and silence says nothing
    boot_silence_s: float | None = None

    @property
    def spelling(self) -> str:
        """The name a user writes in a target (qemu:arm64:debian-rt)."""
        return self.debian_name or self.name

    @property
    def release(self) -> str:
        """The preferred release (what a cache folder is named after before apt has checked)."""
        return self.releases[0]


# virtio-net on PCI where the transport is modules (Debian's arm64 kernels): the transport's
# two libraries, the transport, then the driver and what it needs, in load order
VIRTIO_NET_PCI_MODULES = (
    "virtio_pci_legacy_dev",
    "virtio_pci_modern_dev",
    "virtio_pci",
    "failover",
    "net_failover",
    "virtio_net",
)

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
        boot_words=("earlycon",),
        # its kernel prints every few tenths of a second until /init (the longest gap seen, 0.24 s
        # of its clock); a guest that hung after OpenSBI or early in its boot (QEMU's riscv64 SMP
        # on a busy host, now and then) was found only at the boot's timeout, 5 minutes in
        boot_silence_s=60.0,
    ),  # fmt: skip
    # arm64, named aarch64 as uname -m says (what a board reports, what KVM is matched on).
    # `virt` with no -cpu emulates a 32-bit Cortex-A15, which no arm64 kernel runs on; `max`
    # enables pointer authentication, whose emulated QARMA cipher slows every function call
    # several times over. A Cortex-A72 is ARMv8.0 as Debian's arm64 kernels are built for,
    # and the core of the boards at hand (the RB5's Kryo 585 big cores descend from it).
    # Its NIC is virtio on PCI, as riscv64's: the ECAM host bridge is built in, the virtio PCI
    # transport and the net driver are modules in Debian's arm64 kernels, loaded in order.
    # The interrupt controller is the newest the accelerator has (gic-version=max): `virt`'s
    # default GICv2 takes 8 CPUs at most, and KVM on a GICv3 host may have no GICv2 to offer.
    # Debian's arm64 /boot/vmlinuz is the Image itself, uncompressed; QEMU 7.2 (bookworm's)
    # also boots a gzip'd Image.gz of one's own with -kernel, so neither is unpacked here.
    "aarch64": Arch(
        "aarch64",
        "arm64",
        ("bookworm",),
        "qemu-system-aarch64",
        ("-machine", "virt,gic-version=max"),
        "ttyAMA0",
        "virtio-net-pci",
        VIRTIO_NET_PCI_MODULES,
        rtla="rtla/bookworm-backports",
        suites=("bookworm-backports",),
        cpu="cortex-a72",
        debian_name="arm64",
    ),  # fmt: skip
}
# other spellings of an architecture's name, as a user may write them
ALIASES = {"arm64": "aarch64"}

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
    "arm64:debian-rt": ("aarch64", "linux-image-rt-arm64"),
    "arm64:debian": ("aarch64", "linux-image-arm64"),
    "arm64:debian-rt-backports": ("aarch64", "linux-image-rt-arm64/bookworm-backports"),
}

QEMU_PACKAGES = {
    "x86_64": "qemu-system-x86",
    "riscv64": "qemu-system-misc opensbi",
    "aarch64": "qemu-system-arm",  # holds qemu-system-aarch64
}


def arch_names() -> str:
    """The architectures as a user may write them, for a message: x86_64, riscv64, arm64 (aarch64)."""
    return ", ".join(f"{a.spelling} ({a.name})" if a.debian_name else a.name for a in ARCHES.values())


def arch(name: str) -> Arch:
    try:
        return ARCHES[ALIASES.get(name, name)]
    except KeyError:
        raise UsageError(f"unknown guest architecture {name!r}: choose from {arch_names()}") from None


def named_kernel(name: str) -> tuple[Arch, str]:
    asked = name
    prefix, colon, rest = name.partition(":")
    if colon and prefix in ARCHES and ARCHES[prefix].debian_name:  # aarch64:debian is arm64:debian
        name = f"{ARCHES[prefix].debian_name}:{rest}"
    if name == "riscv64:debian-rt":
        raise UsageError(
            "Debian has no PREEMPT_RT riscv64 kernel: build one with `rtlab kernel build` and boot it "
            "with --target qemu:kernel=PATH,arch=riscv64"
        )
    try:
        arch_name, package = KERNELS[name]
    except KeyError:
        raise UsageError(
            f"unknown guest kernel {asked!r}: choose from {', '.join(KERNELS)} or kernel=PATH[,arch=...]"
        ) from None
    return ARCHES[arch_name], package


def host_arch() -> str:
    return platform.machine()
