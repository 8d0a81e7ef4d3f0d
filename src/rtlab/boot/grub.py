"""The GRUB method: a one-shot entry of the board's own GRUB (its next_entry in grubenv), the
board's commands as text for its shell (every value through agent.shell.quote), its environment
block read as untrusted input. Nothing here runs anything (machine.py, steps.py and
way_back.py do).

Where the entry goes: /boot/grub/custom.cfg, which every grub.cfg that grub-mkconfig writes
sources at its end (Debian's /etc/grub.d/41_custom). Not /etc/grub.d: that would need
update-grub, which rewrites the whole grub.cfg (so it could never be put back byte for byte)
and which a board without grub-mkconfig has not. The files GRUB boots go into rtlab's own
folder on /boot (BOOT_DIR), beside the board's kernels, none of which is touched.

    install   the kernel's files into BOOT_DIR/ID; grubenv and custom.cfg saved (their bytes and
              SHA-256) into BOOT_DIR/saved; the entry added to custom.cfg; next_entry=ID
    execute   a reboot: GRUB takes next_entry, clears it (save_env) and boots the entry once
    back      grubenv and custom.cfg written back from BOOT_DIR/saved, proved by their SHA-256
              (sha256sum -c), BOOT_DIR removed: any later boot is the board's default
    default   (--make-default, after a verified boot) custom.cfg sets the entry as the default
              of every boot that is not a one-shot; --back restores the board's own

The one-shot is consumed by GRUB before the kernel starts, so a kernel that panics or hangs
is left by any reset (--power-cycle): the board boots its default kernel."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rtlab.agent.shell import quote
from rtlab.boundary import untrusted
from rtlab.errors import UsageError

GRUB_DIR = "/boot/grub"
GRUBENV = f"{GRUB_DIR}/grubenv"
CUSTOM = f"{GRUB_DIR}/custom.cfg"
GRUB_CFG = f"{GRUB_DIR}/grub.cfg"
BOOT_DIR = "/boot/rtlab"  # rtlab's own folder on /boot: what GRUB boots, and what it saved
SAVED = f"{BOOT_DIR}/saved"
ENV_SIZE = 1024  # GRUB's environment block: this many bytes, whatever it holds
ENV_HEADER = b"# GRUB Environment Block\n"
ENV_MAX_VARIABLES = 64


def _lines(data: bytes) -> list[tuple[str, str | None]]:
    """A grubenv block (from the board: untrusted) as its lines in order: (comment, None) for a
    line of GRUB's own such as Debian's "# WARNING: ...", (name, value) for a variable; ValueError
    naming what is wrong. As GRUB reads it: a line that starts with '#' is a comment, the '#'
    padding after the last line is none; a backslash escapes the next character of a value."""
    if len(data) != ENV_SIZE or not data.startswith(ENV_HEADER):
        raise ValueError(f"not a GRUB environment block ({len(data)} bytes, {ENV_SIZE} with its header)")
    body = data[len(ENV_HEADER) :].decode("latin-1")  # byte for byte: written back as it was
    found: list[tuple[str, str | None]] = []
    at = 0
    while at < len(body):
        if body[at] == "#":
            newline = body.find("\n", at)
            if newline < 0:  # the padding, to the block's end
                if body[at:].strip("#"):
                    raise ValueError("the GRUB environment block holds text after its padding")
                break
            found.append((body[at:newline], None))
            at = newline + 1
            continue
        line: list[str] = []
        while at < len(body) and body[at] != "\n":
            if body[at] == "\\" and at + 1 < len(body):
                at += 1
            line.append(body[at])
            at += 1
        if at >= len(body):
            raise ValueError("the GRUB environment block's last variable has no end of line")
        at += 1
        name, eq, value = "".join(line).partition("=")
        if not eq or not name or len(found) >= ENV_MAX_VARIABLES:
            raise ValueError(
                f"a line of the GRUB environment block is no variable: {untrusted.printable(name)}"
            )
        found.append((name, value))
    return found


def parse_env(data: bytes) -> dict[str, str]:
    """A grubenv block's variables (the last of a name wins, as in GRUB)."""
    return {name: value for name, value in _lines(data) if value is not None}


def set_variable(data: bytes, name: str, value: str) -> bytes:
    """DATA with NAME=VALUE, every other line kept where it is (GRUB's comments too): the
    variable replaced where it is, else added after the last line, as grub-editenv does."""
    lines = _lines(data)
    if name in (n for n, v in lines if v is not None):
        lines = [(n, value if n == name and v is not None else v) for n, v in lines]
    else:
        lines.append((name, value))
    return format_env(lines)


def format_env(lines: list[tuple[str, str | None]]) -> bytes:
    """LINES as GRUB's 1024-byte block, padded with '#' as grub-editenv pads it."""
    text = "".join(
        f"{n}\n"
        if v is None
        else f"{n}={v.replace(chr(92), chr(92) * 2).replace(chr(10), chr(92) + chr(10))}\n"
        for n, v in lines
    )
    try:
        data = ENV_HEADER + text.encode("latin-1")
    except UnicodeEncodeError:
        raise ValueError("the GRUB environment would hold a character that is no byte") from None
    if len(data) > ENV_SIZE:
        raise ValueError(f"the GRUB environment would take {len(data)} bytes, more than its {ENV_SIZE}")
    return data + b"#" * (ENV_SIZE - len(data))


def from_hex(text: str) -> bytes:
    """od -An -v -tx1's output (what the board printed) as bytes; at most one block."""
    digits = "".join(text.split())
    if len(digits) > 2 * ENV_SIZE + 2 or len(digits) % 2:
        raise ValueError("the board's grubenv, as od printed it, is not one block")
    return bytes.fromhex(digits)


# the board's GRUB as rtlab needs it, one `key=value` line each, then the env block in hex
PROBE = f"""
for f in {GRUB_CFG} {GRUBENV}; do [ -f "$f" ] || echo "missing=$f"; done
grep -q next_entry {GRUB_CFG} 2>/dev/null && echo once=yes
grep -q custom.cfg {GRUB_CFG} 2>/dev/null && echo custom=yes
[ -e {CUSTOM} ] && echo custom_exists=yes
[ "$(stat -c %d /boot)" = "$(stat -c %d /)" ] && echo boot_on_root=yes
command -v grub-editenv >/dev/null 2>&1 && echo editenv=yes
[ -e {SAVED} ] && echo ours=yes
echo @@grubenv
head -c {ENV_SIZE + 1} {GRUBENV} 2>/dev/null | od -An -v -tx1
true
"""


@dataclass
class Probe:
    """What PROBE found on the board."""

    missing: list[str]
    once: bool  # grub.cfg takes next_entry
    custom: bool  # grub.cfg sources custom.cfg
    custom_exists: bool
    boot_on_root: bool  # /boot is a folder of / (GRUB's paths start with /boot)
    editenv: bool
    ours: bool  # BOOT_DIR/saved: an earlier boot's configuration not yet put back
    env: bytes

    @classmethod
    def parse(cls, text: str) -> Probe:
        head, _, env = text.partition("@@grubenv\n")
        said = [untrusted.printable(line.strip()) for line in untrusted.lines(head)]
        flags = {line.partition("=")[0] for line in said if line.endswith("=yes")}
        try:
            block = from_hex(env[: 4 * ENV_SIZE])
        except ValueError:
            block = b""
        return cls(
            missing=[line.partition("=")[2] for line in said if line.startswith("missing=")],
            once="once" in flags, custom="custom" in flags, custom_exists="custom_exists" in flags,
            boot_on_root="boot_on_root" in flags, editenv="editenv" in flags, ours="ours" in flags,
            env=block,
        )  # fmt: skip

    def refusal(self) -> str | None:
        """Why GRUB cannot boot a one-shot entry on this board, in one line; None if it can."""
        if self.missing:
            return f"it has no {' or '.join(self.missing)}"
        if not self.once:
            return f"its {GRUB_CFG} does not take a one-shot entry (no next_entry): run update-grub"
        if not self.custom:
            return f"its {GRUB_CFG} does not source custom.cfg (grub-mkconfig's 41_custom): run update-grub"
        try:
            parse_env(self.env)
        except ValueError as e:
            return f"its {GRUBENV}: {e}; grub-editenv {GRUBENV} create makes a new one"
        return None

    @property
    def available(self) -> bool:
        return self.refusal() is None


@dataclass(frozen=True)
class Entry:
    """One boot's entry: its id (next_entry names it), title, files as the board and as GRUB
    see them (on a /boot of its own, GRUB's paths leave out /boot)."""

    boot: str  # the boot's id
    title: str
    cmdline: str
    initrd: bool
    boot_on_root: bool

    @property
    def id(self) -> str:
        return f"rtlab-{self.boot}"

    @property
    def folder(self) -> str:
        return f"{BOOT_DIR}/{self.boot}"

    def path(self, name: str) -> str:
        return f"{self.folder}/{name}"

    def make(self) -> str:
        """The boot's folder in BOOT_DIR (which save() made), without -p: never another's."""
        return f"mkdir {quote(self.folder)}"

    def put(self, name: str) -> str:
        """Standard input into NAME, then its size printed (checked against what was sent)."""
        path = quote(self.path(name))
        return f"cat > {path} && wc -c < {path}"

    def grub_path(self, name: str) -> str:
        return self.path(name) if self.boot_on_root else self.path(name).removeprefix("/boot")

    def menuentry(self) -> str:
        """The entry, in GRUB's script (whose quoting is the shell's): its root found by the
        kernel's file, so it boots from wherever /boot is."""
        kernel = quote(self.grub_path("kernel"))
        args = " ".join(quote(w) for w in self.cmdline.split())
        lines = [
            f"menuentry {quote(self.title)} --id {quote(self.id)} {{",
            f"\tsearch --no-floppy --file --set=root {kernel}",
            f"\tlinux {kernel} {args}",
        ]
        if self.initrd:
            lines.append(f"\tinitrd {quote(self.grub_path('initrd'))}")
        return "\n".join(["# rtlab boot: removed by rtlab boot --back", *lines, "}", ""])

    def default_line(self) -> str:
        """--make-default: the entry boots whenever no one-shot was asked (grub.cfg sets
        boot_once when it takes next_entry), whatever grub.cfg set as its default."""
        return f'if [ -z "${{boot_once}}" ]; then set default={quote(self.id)}; fi\n'


def save() -> str:
    """The board's grubenv and custom.cfg kept in SAVED with their SHA-256 (custom.cfg's absence
    kept as a mark), before anything is changed; the digests printed for the record. SAVED
    made without -p: one left by an earlier boot is refused. SHA256SUMS is put in place last,
    whole: without it the copies may be cut short (a full /boot) and nothing was changed yet."""
    s = quote(SAVED)
    return (
        f"mkdir -p {quote(BOOT_DIR)} && mkdir {s} && cp -p {quote(GRUBENV)} {s}/grubenv && "
        f"if [ -e {quote(CUSTOM)} ]; then cp -p {quote(CUSTOM)} {s}/custom.cfg && "
        f"sha256sum {quote(GRUBENV)} {quote(CUSTOM)} > {s}/SHA256SUMS.part; "
        f"else : > {s}/custom.cfg.absent && sha256sum {quote(GRUBENV)} > {s}/SHA256SUMS.part; fi && "
        f"sync && mv {s}/SHA256SUMS.part {s}/SHA256SUMS && sync && cat {s}/SHA256SUMS"
    )


def add_entry() -> str:
    """custom.cfg as it was (if it was) with the entry from standard input after it, put in
    place whole (a reset midway leaves the old one or the new one)."""
    part = quote(f"{CUSTOM}.rtlab-part")
    return (
        f"{{ cat {quote(SAVED)}/custom.cfg 2>/dev/null; cat; }} > {part} && mv {part} {quote(CUSTOM)} && sync"
    )


def set_once(entry: Entry, probe: Probe) -> tuple[str, bytes | None]:
    """next_entry=ID in grubenv: by grub-editenv where the board has it, else rtlab's own block
    (sent on standard input) written over the file's bytes in place, as GRUB's save_env does."""
    if probe.editenv:
        return f"grub-editenv {quote(GRUBENV)} set next_entry={quote(entry.id)} && sync", None
    block = set_variable(probe.env, "next_entry", entry.id)
    new = quote(f"{SAVED}/grubenv.new")
    command = (
        f"cat > {new} && dd if={new} of={quote(GRUBENV)} bs={ENV_SIZE} count=1 conv=notrunc 2>/dev/null "
        "&& sync"
    )
    return command, block


def dry_run(entry: Entry, sent: dict[str, Path]) -> list[str]:
    """What a boot by the one-shot entry does after taking the lock, as --dry-run says it."""
    return [
        f"save {GRUBENV} and {CUSTOM} (bytes and SHA-256) into {SAVED}",
        f"install into {entry.folder}: " + ", ".join(f"{n} ({p})" for n, p in sent.items()),
        f"add to {CUSTOM}:\n{entry.menuentry()}",
        f"set next_entry={entry.id} in {GRUBENV}, reboot",
    ]


def make_default(entry: Entry) -> str:
    return f"printf '%s' {quote(entry.default_line())} >> {quote(CUSTOM)} && sync"


def restore() -> str:
    """The way back: grubenv and custom.cfg as saved (written over in place, the same files),
    proved by sha256sum -c against the digests taken before anything changed; then BOOT_DIR
    removed. Exit 5 if a digest differs (BOOT_DIR kept, with the saved copies). Prints
    `restored` and what it checked, or `nothing` where no boot of rtlab's changed GRUB: SAVED
    without SHA256SUMS is a save cut short, before anything changed, and no copy of it is
    written over the board's files."""
    s = quote(SAVED)
    return (
        f"if [ -f {s}/SHA256SUMS ]; then "
        f"if [ -f {s}/grubenv ]; then cat {s}/grubenv > {quote(GRUBENV)}; fi; "
        f"if [ -e {s}/custom.cfg.absent ]; then rm -f {quote(CUSTOM)}; "
        f"elif [ -f {s}/custom.cfg ]; then cat {s}/custom.cfg > {quote(CUSTOM)}; fi; "
        f"sync; "
        f"if [ -e {s}/custom.cfg.absent ] && [ -e {quote(CUSTOM)} ]; then echo left; exit 5; fi; "
        f"sha256sum -c {s}/SHA256SUMS || exit 5; echo restored; "
        f"else echo nothing; fi; rm -rf {quote(BOOT_DIR)} {quote(CUSTOM + '.rtlab-part')} && sync"
    )


def check_title(title: str) -> str:
    """--label as a menu title: one printable line (GRUB's menu shows it as it is)."""
    if not title or "\n" in title or untrusted.printable(title) != title or len(title) > 200:
        raise UsageError("--label: give one printable line of at most 200 characters")
    return title
