"""QEMU targets: real kernels booted in an emulated machine, measured by the same agent.

    qemu:debian-rt                  Debian's PREEMPT_RT kernel (x86_64)
    qemu:debian                     Debian's standard kernel, same guest
    qemu:riscv64:debian             Debian's riscv64 kernel (qemu-system-riscv64 virt), of the
                                    newest release whose riscv64 index apt verifies
    qemu:arm64:debian-rt            Debian bookworm's arm64 PREEMPT_RT kernel (qemu-system-aarch64
    qemu:arm64:debian               virt, Cortex-A72), and its standard one; aarch64: is arm64:
    qemu:kernel=PATH[,arch=riscv64|arm64][,initrd=PATH]   a kernel of the user's own
  options, after a comma: cpus=2, memory=1G, accel=auto|kvm|tcg, append=KERNEL ARGS,
  boot-timeout=SECONDS, margin=SECONDS (how long past the planned end a run may take; a
  software-emulated guest is given three times its plan besides), ssh=PORT (a network card,
  with the guest's port 22 at 127.0.0.1:PORT: for an initrd= that runs an SSH server)

The guest gets rtlab's initramfs (busybox, cyclictest, stress-ng from Debian packages
of its architecture, the agent) and talks over its serial console (see console.py):
commands go in, the agent's progress comes out, and the results come back as tar
archives in base64 (each load's as it ends, the rest at the run's end). Nothing is shared with
the host's file system.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import os
import shlex
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rtlab import debian
from rtlab.boundary import unpack, untrusted
from rtlab.boundary.shapes import TargetJSON
from rtlab.cache import cache_dir
from rtlab.errors import RunFailed, UsageError
from rtlab.rundir import disk, liveness
from rtlab.rundir.disk import HOST_FILES, PLAN_FILES, RunDir, write_note
from rtlab.rundir.events import Event, Kind, line
from rtlab.system.files import AgentFiles
from rtlab.targets.qemu import cpio, initramfs, kernels, machines, pvh
from rtlab.targets.qemu.console import BOOT_SILENT, BootSilent, Console, GuestDied, GuestHung, OutputTooLarge
from rtlab.targets.qemu.folder import Receiver, folder_but
from rtlab.targets.qemu.spec import GuestSpec

AGENT = "/rtlab/agent.sh"
KVM_PROBE_S = 30.0
AGENT_TIMEOUT_S = 300.0  # an agent command on the console (sysinfo, preflight, file ...)
# How long a guest that overran its run has to answer one short command before it is killed:
# a slow guest answers, a hung kernel does not (and the report tells the two apart). What it
# answers goes into console.log: its clock, the kernel's last messages (those below the
# console's loglevel too, such as RCU stalls) and what each process was doing.
ANSWER_S = 20.0
# A run's guest silent for longer than the plan's longest phase and ASK_SILENT_S more (no phase
# of a run is: the agent stops a measurement or probe GRACE_S past its planned end and kills it
# STOP_GRACE_S later, so a question never disturbs a measurement) is asked a question on its
# console, and one that answers nothing within ASK_ANSWER_S more has hung (a runaway real-time
# thread on every CPU, a kernel locked up under emulation): it is stopped then, not at the
# run's timeout (three times the whole plan under emulation, and the margin: a hung guest
# spins its CPUs all the while).
ASK_SILENT_S = 60.0
ASK_ANSWER_S = 30.0
LAST_LOOK = "cat /proc/uptime; dmesg 2>/dev/null | tail -n 40; ps 2>/dev/null; true"
_HOST_OWNED = HOST_FILES + PLAN_FILES
# What init.sh says as it begins (the kernel's boot is over) and once it takes commands
INIT_LINE, READY_LINE = "@rtlab-init", "@rtlab-ready"
SHELL_ON_CONSOLE = "rtlab.console=shell"  # init.sh: a shell on the console, not the command loop
SHELL_PROMPT = "rtlab-guest# "  # ... whose prompt it is


@dataclass(frozen=True)
class FarmImages:
    kernel: Path
    initrd: Path
    cmdline: str
    kernel_info: dict[str, Any]


@dataclass
class _Boot:
    kernel: Path  # as QEMU loads it (an x86 kernel unpacked on the host: pvh.py)
    kernel_info: dict[str, Any]
    initrd: Path
    accel: str = "tcg"
    accel_note: str = ""
    ready: str = ""
    boot_note: str = ""  # a first boot that hung and was started once more


def _hung(reason: str, console: Console) -> str:
    """What the run says of a first boot that hung: why it was stopped, and the last line its
    console printed, made one line (where it hung: OpenSBI, a kernel driver's probe)."""
    last = next((said.strip() for said in reversed(console.tail) if said.strip()), "")
    where = f', its last line "{untrusted.one_line(last[:120])}"' if last else ""
    return f"its first boot hung ({reason}{where}) and was stopped; it was booted once more"


class QemuTarget:
    runs_dir = ""  # every guest is new

    def __init__(self, spec: GuestSpec, cache: Path | None = None):
        self.spec = spec
        self.name = f"qemu:{spec.text}"
        self.cache = cache or cache_dir()
        self.console: Console | None = None
        self.boot: _Boot | None = None
        # in the cache, not /tmp: a host killed with SIGKILL leaves its 35 MB initramfs there,
        # and the next guest of any rtlab removes it
        self._tmp = liveness.scratch(self.cache / "qemu" / "scratch")
        self._remote: str | None = None
        self._limits = unpack.Limits.for_plan(None)
        self._refused: list[str] = []  # results the guest streamed beyond the caps
        self._results: dict[str, bytes] = {}  # each finished load's folder, as the agent streamed it
        self._chosen: debian.Apt | None = None

    # --- preparing and booting -------------------------------------------

    def _apt(self) -> debian.Apt:
        """apt for the guest's Debian release: the first of its architecture's that verifies."""
        if self._chosen is None:
            arch = self.spec.arch
            self._chosen = debian.Apt.first_verified(self.cache, arch.releases, arch.debian, arch.suites)
        return self._chosen

    def _kernel(self) -> tuple[Path, dict[str, Any]]:
        spec = self.spec
        if spec.kernel_path is not None:
            digest = hashlib.sha256(spec.kernel_path.read_bytes()).hexdigest()
            return spec.kernel_path, {"path": str(spec.kernel_path), "sha256": digest}
        assert spec.kernel_name is not None
        _, meta = machines.named_kernel(spec.kernel_name)
        apt = self._apt()
        image, package, version = kernels.fetch_kernel(apt, self.cache, meta)
        return image, {"package": package, "version": version, "release": apt.release, "path": str(image)}

    @staticmethod
    def _kernel_config(kernel: Path) -> Path | None:
        """The config beside the image: /boot/config-RELEASE of a package, .config of a build tree."""
        release = kernel.name.partition("-")[2]
        candidates = [kernel.with_name(f"config-{release}")] if release else []
        candidates.append(kernel.with_name(".config"))
        return next((c for c in candidates if c.is_file()), None)

    def _initrd_parts(self, kernel: Path) -> list[Path | bytes]:
        """The archives of the guest's initramfs, in the order the kernel unpacks them: tools,
        agent and /init, then the user's own (whose files win)."""
        arch = self.spec.arch
        apt = self._apt()
        rtla = arch.rtla if apt.release == arch.release else None  # a package of its first release
        base = initramfs.build_base(
            apt, self.cache / "initramfs" / f"{apt.release}-{arch.debian}" / initramfs.base_name(rtla), rtla
        )
        user = [self.spec.initrd] if self.spec.initrd is not None else []
        return [base, initramfs.overlay(self._kernel_config(kernel)), *user]

    def _initrd(self, kernel: Path) -> Path:
        out = self._tmp / "initrd.cpio"
        with out.open("wb") as f:
            for part in self._initrd_parts(kernel):
                if isinstance(part, bytes):
                    f.write(part)
                else:
                    with part.open("rb") as b:
                        shutil.copyfileobj(b, f)
        return out

    def _cmdline(self, farm: bool = False) -> str:
        """The kernel's command line; for a farm, with all its messages (LAVA waits for "Linux
        version") and a shell on the console. Otherwise the architecture's way to boot
        (machines.Arch.boot_words); the guest's /init turns the console down to alerts."""
        arch = self.spec.arch
        words = [f"console={arch.console}", "rdinit=/init", "panic=-1"]
        words += [SHELL_ON_CONSOLE] if farm else list(arch.boot_words)
        # noirqdebug: under emulation the serial port's interrupt can look spurious to the kernel,
        # which then disables it ("Disabling IRQ #4") and the console, our only channel, stalls.
        return " ".join([*words, "noirqdebug", self.spec.append]).strip()

    def _argv(self, boot: _Boot, accel: str) -> list[str]:
        arch = self.spec.arch
        return [
            arch.qemu, *arch.machine,
            "-accel", accel,
            *(("-cpu", "host") if accel == "kvm" else ("-cpu", arch.cpu) if arch.cpu else ()),
            "-smp", str(self.spec.cpus), "-m", self.spec.memory,
            "-kernel", str(boot.kernel), "-initrd", str(boot.initrd), "-append", self._cmdline(),
            "-nodefaults", "-display", "none", "-monitor", "none", "-serial", "stdio", "-no-reboot",
            *self.spec.network_args(),
        ]  # fmt: skip

    def farm_images(self, folder: Path) -> FarmImages:
        """The guest for a farm's own QEMU (LAVA's qemu device type): its kernel and initramfs
        copied into FOLDER, the initramfs one archive (LAVA unpacks the first only, to add its
        test shell's files), and the kernel's command line, which gives the console a shell."""
        kernel, info = self._kernel()
        folder.mkdir(parents=True, exist_ok=True)
        image = folder / f"rtlab-{self.spec.arch.name}-kernel"
        shutil.copyfile(kernel, image)
        parts = [p if isinstance(p, bytes) else p.read_bytes() for p in self._initrd_parts(kernel)]
        initrd = folder / f"rtlab-{self.spec.arch.name}-initramfs.cpio"
        initrd.write_bytes(cpio.joined(parts))
        return FarmImages(image, initrd, self._cmdline(farm=True), info)

    def _kvm_marker(self) -> Path:
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return self.cache / "qemu" / f"kvm-failed-{boot_id}"

    def _accels(self) -> list[str]:
        if self.spec.accel != "auto":
            return [self.spec.accel]
        usable = self.spec.arch.name == machines.host_arch() and os.access("/dev/kvm", os.R_OK | os.W_OK)
        if usable and not self._kvm_marker().exists():
            return ["kvm", "tcg"]
        return ["tcg"]

    def started(self) -> Console:
        """The running guest's console (booted on first use)."""
        if self.console is not None:
            return self.console
        if shutil.which(self.spec.arch.qemu) is None:
            packages = machines.QEMU_PACKAGES[self.spec.arch.name]
            raise UsageError(f"{self.spec.arch.qemu} is not installed: apt-get install {packages}")
        kernel, info = self._kernel()
        loaded = pvh.bootable(kernel, self.cache, self._tmp) if self.spec.arch.name == "x86_64" else kernel
        if loaded != kernel:
            info = {**info, "entry": "pvh"}  # started at its PVH entry, unpacked on the host
        boot = _Boot(loaded, info, self._initrd(kernel))
        accels = self._accels()
        tries = list(accels)
        while tries:
            accel = tries.pop(0)
            timeout = KVM_PROBE_S if accel == "kvm" and len(accels) > 1 else self.spec.boot_timeout
            console, ready, reason = self._boot_once(boot, accel, timeout)
            if ready is not None:
                boot.accel, boot.ready = accel, ready
                self.console, self.boot = console, boot
                return console
            if accel == "kvm" and len(accels) > 1:
                self._kvm_marker().parent.mkdir(parents=True, exist_ok=True)
                self._kvm_marker().write_text(reason + "\n")
                boot.accel_note = f"KVM failed ({reason}); software emulation used"
                continue
            if reason.endswith(BOOT_SILENT) and not boot.boot_note:  # once: a hang, not the kernel
                boot.boot_note = _hung(reason, console)
                tries.insert(0, accel)
                continue
            tail = "\n".join(list(console.tail)[-15:])
            quiet = " (a kernel that boots silent is waited for with append=quiet)" if boot.boot_note else ""
            raise RunFailed(
                f"the {self.name} guest did not start ({reason}){quiet}; it was stopped. Console tail "
                f"(all of it in {self.cache / 'qemu' / 'last-console.log'}):\n{tail}"
            )
        raise RunFailed(f"the {self.name} guest did not start")

    def _boot_once(self, boot: _Boot, accel: str, timeout: float) -> tuple[Console, str | None, str]:
        """A guest started with ACCEL: its console, its ready line (None: it did not start, and
        is stopped) and why not."""
        console = Console(self._argv(boot, accel))
        deadline = time.monotonic() + timeout
        try:
            ready = None
            silence = self.spec.boot_silence_s
            if silence is None or console.wait_for(INIT_LINE, timeout, silence):
                ready = console.wait_for(READY_LINE, deadline - time.monotonic())
        except (GuestDied, BootSilent) as e:
            ready, reason = None, str(e)
        except BaseException:  # Ctrl-C while it boots: the guest goes now, not as rtlab ends
            console.close(grace=0)
            raise
        else:
            reason = f"no shell within {timeout:.0f} s"
        if ready is None:
            console.close(grace=0)
            self._save_console(console, self.cache / "qemu" / "last-console.log")
        return console, ready, reason

    @staticmethod
    def _save_console(console: Console, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_note(path, "\n".join(console.tail) + "\n")  # replaced, never written through a link

    # --- the Target interface ---------------------------------------------

    def describe(self) -> TargetJSON:
        data: TargetJSON = {
            "kind": "qemu",
            "name": self.name,
            "arch": self.spec.arch.name,
            "cpus": self.spec.cpus,
            "memory": self.spec.memory,
            "host": os.uname().nodename,
            **({"release": self._chosen.release} if self._chosen is not None else {}),
            "emulated_note": "emulated latencies include the emulator: compare only with runs on the "
            "same host and accelerator",
        }
        if self.boot is not None:
            data.update(
                {
                    "kernel": self.boot.kernel_info,
                    "accel": self.boot.accel,
                    "accel_note": self.boot.accel_note,
                    **({"boot_note": self.boot.boot_note} if self.boot.boot_note else {}),
                }
            )
        return data

    def agent(self, args: list[str], planned_s: float = 0) -> tuple[int, str]:
        console = self.started()
        status, lines = console.run(f"sh {AGENT} {shlex.join(args)}", timeout=AGENT_TIMEOUT_S + planned_s)
        return (status if status is not None else 124), "\n".join(lines)

    def workdir(self, run: RunDir, uid: str) -> str:
        return f"/tmp/rtlab/runs/{uid}"

    def _must(self, command: str, timeout: float = 60) -> list[str]:
        status, lines = self.started().run(command, timeout)
        if status != 0:
            raise RunFailed(f"{self.name}: `{command[:80]}` failed ({status}): {' / '.join(lines[-3:])}")
        return lines

    def push(self, run: RunDir, remote: str) -> None:
        self._remote = remote
        self._limits = unpack.Limits.for_plan(run.plan())
        plan: dict[str, str] = {}
        for path in sorted(run.path.rglob("*")):
            rel = path.relative_to(run.path).as_posix()
            if path.is_dir():
                self._must(f"mkdir -p {shlex.quote(f'{remote}/{rel}')}")
            elif path.name in PLAN_FILES:
                plan[f"{remote}/{rel}"] = run.text(path)
        self.files().write_texts(plan)  # the one way files reach a target through the agent

    def run_agent(
        self, args: list[str], on_line: Callable[[str], None], planned_s: float, quiet_s: float | None = None
    ) -> int:
        console = self.started()
        # Emulation slows the agent's own work (tool start-up, rtla arming its tracer, archiving
        # results) several times over on a busy host, so a software guest gets its plan twice more.
        emulated = self.boot is not None and self.boot.accel == "tcg"
        timeout = planned_s * (3 if emulated else 1) + self.spec.margin
        # Each load's files come back over the console as soon as it ends, so a guest that
        # hangs or dies later costs only the loads it had not finished.
        cap = self._limits.total_bytes * 4 // 3 + 4096  # base64 of the run's cap
        receive = Receiver(self._results, self._refused, cap, on_line, console.heard_agent)
        quiet = planned_s if quiet_s is None else quiet_s
        command = f"sh {AGENT} {shlex.join([*args, '--stream-results'])}"
        started = time.monotonic()
        try:
            status, _ = console.run(command, timeout, receive, ask=(quiet + ASK_SILENT_S, ASK_ANSWER_S))
        except GuestDied as e:
            on_line(line(Kind.GUEST_DIED, reason=e))
            return 125
        except GuestHung as e:  # stopped now, not at the timeout: more time would not help
            self._stopped(console, on_line, time.monotonic() - started, e.silent_s, answered=False)
            return 124
        if status is None:  # overran: slow or hung? stop it, keep what the console showed
            silent, answer = time.monotonic() - console.heard_at, None
            with contextlib.suppress(GuestDied):  # the agent's lines meanwhile still count
                answer, _ = console.run(LAST_LOOK, ANSWER_S, receive)
            self._stopped(console, on_line, timeout, silent, answered=answer == 0)
            return 124
        return status

    def _stopped(
        self,
        console: Console,
        on_line: Callable[[str], None],
        after_s: float,
        silent_s: float,
        answered: bool,
    ) -> None:
        """A guest stopped before its agent's command ended, and what the host saw of it."""
        on_line(
            line(
                Kind.GUEST_TIMEOUT,
                seconds=f"{after_s:.0f}",
                margin=f"{self.spec.margin:.0f}",
                silent=f"{silent_s:.0f}",
                answered="yes" if answered else "no",
            )
        )
        console.kill()

    def interrupt(self) -> None:
        if self.console is not None and self._remote is not None:
            self.console.send(f"sh {AGENT} stop {shlex.quote(self._remote)}")

    def collect(self, run: RunDir, remote: str, keep: bool = False) -> None:
        limits = unpack.Limits.for_plan(run.plan())
        cap = limits.total_bytes * 4 // 3 + 4096
        problems = list(self._refused)
        home: list[str] = []
        for load, data in self._results.items():  # the loads that ended, whatever came later
            try:
                unpack.unpack(data, run.path, limits, f"the guest's results of {load}", keep=_HOST_OWNED)
                home.append(load)
            except unpack.Refused as e:
                problems.append(str(e))
        console = self.console
        try:
            if console is not None and console.alive():
                command = f"{folder_but(remote, home)} | gzip | base64"
                status, lines = console.run(command, timeout=300, keep_chars=cap)
                if status == 0:
                    encoded = (line for line in lines if untrusted.BASE64_LINE.match(line))
                    data = base64.b64decode("".join(encoded))
                    unpack.unpack(data, run.path, limits, "the guest's run folder", keep=_HOST_OWNED)
        except (GuestDied, OutputTooLarge, binascii.Error, unpack.Refused) as e:
            problems.append(str(e))
        finally:
            if console is not None:
                self._save_console(console, run.path / disk.CONSOLE)
        if problems:
            write_note(run.path / disk.COLLECT_ERROR, "".join(f"{p}\n" for p in problems))

    def still_running(self, remote: str) -> bool | None:
        return None  # every guest ends with rtlab

    def holds(self, remote: str) -> bool:
        return False  # ... and its RAM disk with it

    def events(self, remote: str) -> list[Event]:
        return []

    def files(self) -> AgentFiles:
        return AgentFiles(self)

    def close(self) -> None:
        if self.console is not None:
            self.console.close()
            self.console = None
        shutil.rmtree(self._tmp, ignore_errors=True)
