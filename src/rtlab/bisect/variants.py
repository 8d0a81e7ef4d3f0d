"""Kernel configurations as a sweep measures them: the base, and variants that add options
to it, each written as a Kconfig fragment (the form `rtlab kernel build --fragment` merges
last, and a prepare command can merge into a board's own build)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from rtlab.errors import UsageError
from rtlab.names import slug
from rtlab.system.kernel import kconfig_string, kconfig_value, kconfig_written, parse_config
from rtlab.units import read_user_file

_OPTION = re.compile(r"^(?:CONFIG_)?([A-Z0-9_]{1,80})=(.{1,200})$")
_PLAIN = re.compile(r"^(?:[ynm]|-?\d{1,20}|0x[0-9a-fA-F]{1,16})$")


@dataclass(frozen=True)
class Variant:
    name: str  # as the table shows it: the option, or the fragment's file name
    # (CONFIG_X, value as a .config line writes it: a string in its quotes), "n" for not set
    options: tuple[tuple[str, str], ...]

    @property
    def key(self) -> str:
        """Its name in the index: the same options are the same variant."""
        text = "\n".join(f"{k}={v}" for k, v in sorted(self.options))
        return f"{slug(self.name)[:40]}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"

    def fragment(self) -> str:
        """The options as Kconfig lines: a string as it was written (its quotes and escapes
        kept, so the fragment sets what was read), another word that is no y/n/m or number
        as a string."""
        lines = []
        for option, value in self.options:
            if value == "n":
                lines.append(f"# {option} is not set")
            elif _PLAIN.match(value) or value.startswith('"'):
                lines.append(f"{option}={value}")
            else:
                lines.append(f"{option}={kconfig_string(value)}")
        return "\n".join(lines) + ("\n" if lines else "")


BASE = Variant("base", ())


def option(text: str) -> Variant:
    """--option CONFIG_X=y (or X=y, or CONFIG_X=n for "not set")."""
    found = _OPTION.match(text.strip())
    if not found or any(ord(c) < 32 for c in text):
        raise UsageError(f"--option {text!r}: give CONFIG_NAME=VALUE, e.g. CONFIG_PROVE_LOCKING=y")
    name, value = f"CONFIG_{found.group(1)}", kconfig_written(found.group(2))
    return Variant(f"{name}={kconfig_value(value)}", ((name, value),))


def fragment_file(path: Path, what: str = "--fragment") -> Variant:
    """A Kconfig fragment (or a whole .config) as a variant: every option it sets."""
    try:
        text = read_user_file(path, what, lenient=True)  # a .config's odd byte is not its options
    except OSError as e:
        raise UsageError(f"{what} {path}: {e.strerror}: give a Kconfig fragment") from None
    options = parse_config(text, as_written=True)
    if not options:
        raise UsageError(f"{what} {path} sets no CONFIG_ option: give a Kconfig fragment")
    return Variant(path.name, tuple(sorted(options.items())))


def difference(good: Variant, bad: Variant) -> list[tuple[str, str]]:
    """The options BAD sets otherwise than GOOD (one GOOD sets and BAD leaves out is left as
    GOOD has it: not a difference BAD names)."""
    had = dict(good.options)
    return [(k, v) for k, v in bad.options if had.get(k) != v]


def subset(name: str, base: Variant, options: list[tuple[str, str]]) -> Variant:
    """BASE with OPTIONS on top (a later option wins)."""
    merged = dict(base.options)
    merged.update(options)
    return Variant(name, tuple(sorted(merged.items())))
