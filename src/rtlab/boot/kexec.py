"""The kexec method's commands on the board, as text for its shell: every value that reaches
it goes through agent.shell.quote. Nothing here runs anything (machine.py, steps.py and
way_back.py do), so a dry run prints exactly what a boot would run.

kexec loads the new kernel beside the running one and jumps to it without the firmware or
the bootloader: the board's default boot is never touched, so any reset (a watchdog, a
power cycle, `reboot`) brings back the kernel it had. The kernel rtlab starts carries
`rtlab.boot=ID` on its command line (the kernel ignores it): that is how rtlab tells, after
any event, whether the board runs a kernel of its own or its default one."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rtlab.agent.shell import START_OF, quote
from rtlab.boot.verify import cmdline_words

MARK = "rtlab.boot"  # on the command line of every kernel rtlab boots
# the bootloader's words about the previous boot: they would name files the new kernel has not
DROPPED = ("BOOT_IMAGE", "initrd")
# how the board reports itself: one section per marker, in this order (dmesg last: it is long)
SECTIONS = (
    "uname",
    "version",
    "cmdline",
    "boot_id",
    "kexec",
    "arch",
    "isolated",
    "nohz_full",
    "dmesg",
)
DMESG_BYTES = 1 << 20
SECTION_BYTES = 64 << 10  # any other section: a command line is at most a few KiB


def new_cmdline(running: str, append: list[str], boot_id: str) -> str:
    """The running kernel's command line without the bootloader's BOOT_IMAGE/initrd, without
    a word APPEND gives again (`panic=0` replaces `panic=10`: the kernel would take the last,
    but the record should not show both), without an earlier rtlab mark, plus APPEND and the
    mark. console= may be given several times and is kept."""
    keys = {a.partition("=")[0] for a in append if "=" in a} - {"console"}
    kept = [
        w for w in cmdline_words(running)
        if w.partition("=")[0] not in (*DROPPED, MARK) and (w.partition("=")[0] not in keys)
    ]  # fmt: skip
    return " ".join([*kept, *append, f"{MARK}={boot_id}"])


def report(dmesg: bool = True) -> str:
    """The board's state, each section after a line `@@NAME`: what verify and check read."""
    parts = {
        "uname": "uname -r",
        "version": "cat /proc/version",
        "cmdline": "cat /proc/cmdline",
        "boot_id": "cat /proc/sys/kernel/random/boot_id",
        "kexec": "command -v kexec || echo none",
        "arch": "uname -m",
        "isolated": "cat /sys/devices/system/cpu/isolated 2>/dev/null || echo @none",
        "nohz_full": "cat /sys/devices/system/cpu/nohz_full 2>/dev/null || echo @none",
        "dmesg": f"dmesg 2>/dev/null | tail -c {DMESG_BYTES}" if dmesg else "true",
    }
    return "; ".join(f"echo @@{name}; {command}" for name, command in parts.items())


def parse_report(text: str) -> dict[str, str]:
    """REPORT's output by section ("@none": the file is not there), dmesg taking the rest."""
    found: dict[str, list[str]] = {}
    current = None
    for line in text.split("\n"):
        name = line[2:] if line.startswith("@@") else None
        if name in SECTIONS and current != "dmesg" and name not in found:
            current = name
            found[name] = []
        elif current is not None:
            found[current].append(line)
    # a board that sends more than it was asked for is cut: one section never costs the host more
    return {
        name: "\n".join(lines).strip("\n")[-(DMESG_BYTES if name == "dmesg" else SECTION_BYTES) :]
        for name, lines in found.items()
    }


@dataclass(frozen=True)
class Files:
    """Where a boot's files go on the board: FOLDER/<name>, FOLDER made by rtlab (mkdir without
    -p for the last part: an existing folder is another boot's and is never written into)."""

    base: str  # rtlab's folder on the board (targets.base.target_dir)
    boot: str  # this boot's id

    @property
    def root(self) -> str:
        return f"{self.base}/boot"

    @property
    def folder(self) -> str:
        return f"{self.root}/{self.boot}"

    def path(self, name: str) -> str:
        return f"{self.folder}/{name}"

    def make(self) -> str:
        return f"mkdir -p {quote(self.root)} && mkdir {quote(self.folder)}"

    def put(self, name: str) -> str:
        """Standard input into NAME, then its size printed (checked against what was sent)."""
        path = quote(self.path(name))
        return f"cat > {path} && wc -c < {path}"

    def remove_all(self) -> str:
        """Every boot's files: rtlab's boot folder goes whole (none of the running system is in it)."""
        return f"rm -rf {quote(self.root)}"


KEXEC = ("kexec",)  # the board's own; a carried one is its loader, --library-path and the file


def load(
    kernel: str,
    cmdline: str,
    initrd: str | None = None,
    dtb: str | None = None,
    program: tuple[str, ...] = KEXEC,
) -> str:
    words = [*program, "-l", kernel]
    if initrd:
        words += ["--initrd", initrd]
    if dtb:
        words += ["--dtb", dtb]
    words += ["--append", cmdline]
    return " ".join(quote(w) for w in words)


def unload(program: tuple[str, ...] = KEXEC) -> str:
    return " ".join(quote(w) for w in (*program, "-u"))


UNLOAD = unload()


def detached(command: str) -> str:
    """COMMAND in the background, out of the SSH session (SIGHUP ignored, as the agent's run
    is), a second later: the session that started it returns before the connection drops."""
    return f"(trap '' HUP; sleep 1; {command}) >/dev/null 2>&1 </dev/null & echo started"


def execute(program: tuple[str, ...] = KEXEC) -> str:
    """Into the loaded kernel: through systemd where it runs (services stopped, disks
    unmounted first), else kexec -e at once after a sync (a busybox board)."""
    run = " ".join(quote(w) for w in (*program, "-e"))
    return detached(f"sync; if [ -d /run/systemd/system ]; then systemctl kexec; else {run}; fi")


def dry_run(folder: str, sent: dict[str, Path], load: str, program: tuple[str, ...] = KEXEC) -> list[str]:
    """What a boot by kexec does after taking the lock, as --dry-run says it (SENT: every file
    copied into FOLDER, kexec-tools among them where rtlab carries its own)."""
    return [
        f"install into {folder}: " + ", ".join(f"{n} ({p})" for n, p in sent.items()),
        f"load: {load}",
        f"execute: {execute(program)}",
    ]


def reboot() -> str:
    """Back to the default kernel: an ordinary reboot (the firmware and bootloader choose, as
    they always do); where init does not answer `reboot` (a busybox /init script), forced."""
    return detached(
        "sync; if [ -d /run/systemd/system ]; then systemctl reboot; "
        "else reboot; sleep 10; sync; reboot -f; fi"
    )


def lock(base: str, holder: str, seconds: int) -> str:
    """The measurement's lock (the agent's: BASE/lock made with mkdir, `owner` saying "PID
    START DIR"), taken for a boot: held by a `sleep` of SECONDS that stands for it, so a run
    started meanwhile is refused by its preflight naming HOLDER, and a lock left by a board
    that rebooted (its holder gone) is stale, as the agent judges. Prints "locked PID" or
    "busy PID DIR"."""
    q = quote(f"{base}/lock")
    return f"""
lock={q}; mkdir -p {quote(base)} || exit 3
{START_OF}
if ! mkdir "$lock" 2>/dev/null; then
  if read -r pid start dir < "$lock/owner" 2>/dev/null; then
    if kill -0 "$pid" 2>/dev/null && [ "$(start_of "$pid")" = "$start" ]; then
      echo "busy $pid $dir"; exit 4
    fi
  elif [ $(( $(date +%s) - $(stat -c %Y "$lock" 2>/dev/null || echo 0) )) -lt 60 ]; then
    echo "busy ? ?"; exit 4
  fi
  mv "$lock" "$lock.stale.$$" && rm -rf "$lock.stale.$$"
  mkdir "$lock" || {{ echo "busy ? ?"; exit 4; }}
fi
(trap '' HUP; exec sleep {int(seconds)}) >/dev/null 2>&1 </dev/null &
pid=$!
printf '%s %s %s\\n' "$pid" "$(start_of $pid)" {quote(holder)} > "$lock/owner.part" &&
  mv "$lock/owner.part" "$lock/owner"
echo "locked $pid"
"""


def unlock(base: str, holder: str) -> str:
    """The lock released if this boot holds it, never another run's: its holder ended only if
    it is still the process that took it (after a reboot its PID may be anyone's), the lock's
    folder removed (a board whose /tmp is on disk keeps it across the reboot)."""
    q = quote(f"{base}/lock")
    return (
        f'{START_OF}; if read -r pid start dir < {q}/owner 2>/dev/null && [ "$dir" = {quote(holder)} ]; then '
        'if [ "$(start_of "$pid")" = "$start" ]; then '
        f'kill "$pid" 2>/dev/null; fi; rm -rf {q}; fi; true'
    )
