"""Durations (`10s`, `10m`, `1h`) and latencies (`200us`, `1ms`) as the CLI accepts them."""

import re

from rtlab.errors import UsageError

_DURATION = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_LATENCY = {"": 1, "us": 1, "µs": 1, "ms": 1000, "s": 1_000_000}
_NUMBER = re.compile(r"^\s*(\d+)\s*([a-zµ]*)\s*$")


def _parse(text: str, units: dict[str, int], what: str, example: str) -> int:
    match = _NUMBER.match(text.lower())
    if not match or match.group(2) not in units:
        allowed = ", ".join(u for u in units if u)
        raise UsageError(f"bad {what} {text!r}: write a whole number with a unit ({allowed}), e.g. {example}")
    return int(match.group(1)) * units[match.group(2)]


def parse_duration(text: str) -> int:
    """Seconds in `text`; a bare number is seconds."""
    seconds = _parse(text, _DURATION, "duration", "30s or 10m")
    if seconds < 1:
        raise UsageError(f"bad duration {text!r}: it must be at least 1s")
    return seconds


def parse_latency(text: str) -> int:
    """Microseconds in `text`; a bare number is microseconds."""
    micros = _parse(text, _LATENCY, "latency", "200us or 1ms")
    if micros < 1:
        raise UsageError(f"bad latency {text!r}: it must be at least 1us")
    return micros


def format_duration(seconds: int) -> str:
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
