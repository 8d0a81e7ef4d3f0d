"""The one gate for a user's values: durations (`10s`, `10m`, `1h`), latencies (`200us`,
`1ms`), counts, probabilities and percentages, as the CLI, a study file and a plan's options
give them. Each kind is parsed here and kept within its bounds (rtlab/bounds.py), so no value
a user can type makes rtlab loop for ages, divide by zero or allocate without bound; a value
outside them is one line that names the fix."""

import math
import os
import re
import stat
from pathlib import Path

from rtlab.boundary.untrusted import read_at_most
from rtlab.bounds import MAX_DURATION_S, MAX_LATENCY_US, MAX_USER_FILE_BYTES, MIN_PROBABILITY, NUMBER_DIGITS
from rtlab.errors import UsageError

_DURATION = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_LATENCY = {"": 1, "us": 1, "µs": 1, "ms": 1000, "s": 1_000_000}
# ASCII digits only (re.ASCII): int() would take '١٢' or '１２' as 12, a value nobody reads
# the same way; and at most NUMBER_DIGITS of them, so int() never meets a 10,000-digit number.
_NUMBER = re.compile(rf"\s*([0-9]{{1,{NUMBER_DIGITS}}})\s*([a-zµ]*)\s*", re.ASCII)
# A decimal as people write a probability or a share: 0.001, 1e-9, 1.5 (no nan, inf or 1_0).
_DECIMAL = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:e([+-]?[0-9]{1,3}))?\s*", re.ASCII)
SHOWN = 40  # a value is echoed in an error line at most this long: one line stays readable


def shown(text: str) -> str:
    """TEXT as an error line quotes it: repr (control characters escaped), cut to SHOWN."""
    return repr(text[:SHOWN]) + ("..." if len(text) > SHOWN else "")


def _parse(text: str, units: dict[str, int], what: str, example: str) -> int:
    match = _NUMBER.fullmatch(text.lower())
    if not match or match.group(2) not in units:
        allowed = ", ".join(u for u in units if u)
        raise UsageError(
            f"bad {what} {shown(text)}: write a whole number with a unit ({allowed}), e.g. {example}"
        )
    return int(match.group(1)) * units[match.group(2)]


def _days(seconds: int) -> str:
    return f"{seconds // 86400}d" if seconds % 86400 == 0 else format_duration(seconds)


def parse_duration(text: str, most: int = MAX_DURATION_S) -> int:
    """Seconds in `text`, 1 s to MOST (a run's longest, unless the option says otherwise);
    a bare number is seconds."""
    seconds = _parse(text, _DURATION, "duration", "30s or 10m")
    if seconds < 1:
        raise UsageError(f"bad duration {shown(text)}: it must be at least 1s")
    if seconds > most:
        raise UsageError(f"bad duration {shown(text)}: it must be at most {_days(most)}")
    return seconds


def parse_latency(text: str, most: int = MAX_LATENCY_US) -> int:
    """Microseconds in `text`, 1 µs to MOST; a bare number is microseconds."""
    micros = _parse(text, _LATENCY, "latency", "200us or 1ms")
    if micros < 1:
        raise UsageError(f"bad latency {shown(text)}: it must be at least 1us")
    if micros > most:
        raise UsageError(f"bad latency {shown(text)}: it must be at most {most // 1_000_000}s")
    return micros


def parse_count(text: str, what: str = "count") -> int:
    """A whole number of things (ASCII digits, no sign): the option's own range is checked
    where it is known (plan.validate); the digits' limit keeps it a machine-sized number."""
    match = _NUMBER.fullmatch(text)
    if not match or match.group(2):
        raise UsageError(f"bad {what} {shown(text)}: give a whole number, e.g. 4")
    return int(match.group(1))


def _decimal(text: str) -> float | None:
    match = _DECIMAL.fullmatch(text)
    return float(text) if match else None


def probability(value: float, what: str, below: float = 1.0, written: str | None = None) -> float:
    """A probability from MIN_PROBABILITY up to (not including) BELOW; NaN and inf never are.
    WRITTEN: the value as the user wrote it (checked: digits and a unit), said in the refusal."""
    if not (math.isfinite(value) and MIN_PROBABILITY <= value < below):
        share = "50 %" if below == 0.5 else f"{below:g}"
        raise UsageError(
            f"{what} {written or repr(value)} is not a probability rtlab can use: give one from "
            f"{MIN_PROBABILITY:g} up to {share}, e.g. 1% or 0.001"
        )
    return value


def parse_probability(text: str, what: str, below: float = 1.0) -> float:
    """A probability as written: a decimal (0.001, 1e-9) or a percentage (1%)."""
    body = text.strip()
    percent = body.endswith("%")
    value = _decimal(body[:-1] if percent else body)
    if value is None:
        raise UsageError(f"{what} {shown(text)}: give a probability, e.g. 1% or 0.001")
    return probability(value / 100 if percent else value, what, below, written=body)


def seconds(value: float, what: str, least: float, most: float) -> float:
    """A time in seconds given as a number (a float option: a timeout): LEAST to MOST, never
    NaN or inf, which would make a wait end at once or never."""
    if not (math.isfinite(value) and least <= value <= most):
        raise UsageError(f"{what} {value!r}: give {least:g} to {most:g} seconds")
    return value


def parse_seconds(text: str, what: str, least: float, most: float) -> float:
    """A time in seconds as written in a target's options ("300", "2.5"): a plain decimal,
    LEAST to MOST."""
    value = _decimal(text.strip())
    if value is None:
        raise UsageError(f"{what} {shown(text)}: give a number of seconds, e.g. 300")
    return seconds(value, what, least, most)


def parse_percentage(text: str, what: str, most: float) -> float:
    """A share written as a percentage ("10%"), 0 % to MOST %, as a fraction (0.1)."""
    body = text.strip()
    value = _decimal(body[:-1]) if body.endswith("%") else None
    if value is None or value > most:
        raise UsageError(f"{what} {shown(text)}: give a percentage from 0% to {most:g}%, e.g. 10%")
    return value / 100


def read_user_file(path: Path, what: str, most: int = MAX_USER_FILE_BYTES, lenient: bool = False) -> str:
    """The text of a file the user names (a study, a loads file, a fragment, a token): a
    regular file (links followed: it is the user's own) of at most MOST bytes, UTF-8. OSError
    when it cannot be opened (the caller names the fix); a device, a FIFO, a folder, a file too
    large or not text (unless LENIENT: each bad byte then U+FFFD) are one line here.
    O_NONBLOCK: a FIFO is not waited on."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{what} {shown(str(path))} is not a regular file: give a text file")
        if info.st_size > most:
            raise UsageError(f"{what} {shown(str(path))} holds more than {most >> 20} MB: give the text file")
        data = read_at_most(f, most + 1)  # in chunks: no cap-sized buffer for a small file
    if len(data) > most:  # grew while read
        raise UsageError(f"{what} {shown(str(path))} holds more than {most >> 20} MB: give the text file")
    try:
        return data.decode("utf-8", errors="replace" if lenient else "strict")
    except UnicodeDecodeError:
        raise UsageError(f"{what} {shown(str(path))} is not UTF-8 text: give a text file") from None


def format_duration(seconds: int) -> str:
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
