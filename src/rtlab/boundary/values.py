"""Where numbers and strings from outside become values: the one place for their bounds.

A board's sysinfo, a tool's JSON or a run folder copied from elsewhere can say anything: a CPU
count of ten million, a CPU list "0-99999999", a kernel release of 200 characters, a start in
the year 9999. Each such value is checked here against what its field can hold, the same on
every store (SQLite would take what PostgreSQL refuses): CPU numbers below the most CPUs Linux
can have, whole numbers within their column, texts within their column's length, dates not
after now plus a small skew between clocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the history's rows are checked here; every command reads this module
    import sqlalchemy as sa

MAX_COUNT = 1 << 53  # samples, µs: exact as a JSON reader keeps them; a sample a µs for 285 years
MAX_CPUS = 8192  # Linux's largest NR_CPUS (x86's MAXSMP); riscv64's is 512
CLOCK_SKEW = timedelta(minutes=10)  # a board's clock ahead of the host's by up to this is fine
# SQL's integer columns, the same bounds on SQLite and PostgreSQL
INTEGER = (-(1 << 31), (1 << 31) - 1)
BIG_INTEGER = (-(1 << 63), (1 << 63) - 1)


class OutOfBounds(ValueError):
    """A value that its field cannot hold: one line naming the field."""


@dataclass(frozen=True)
class Bound:
    """A whole number's range, as metadata of a shape's field (Annotated[int, Bound(1, 8192)])."""

    lo: int
    hi: int

    def problem(self, value: int) -> str | None:
        return None if self.lo <= value <= self.hi else f"{value} is outside {self.lo}..{self.hi}"


@dataclass(frozen=True)
class CpuList:
    """A kernel CPU list ("0-3,6") whose CPUs Linux can have, as a shape's field's metadata."""

    def problem(self, value: str) -> str | None:
        try:
            cpu_list(value)
        except OutOfBounds as e:
            return str(e)
        return None


def cpu_list(text: str) -> frozenset[int]:
    """The CPUs of a kernel CPU list, each below MAX_CPUS: OutOfBounds else (never a list of
    a hundred million from "0-99999999")."""
    cpus: set[int] = set()
    for part in filter(None, (p.strip() for p in text.strip().split(","))):
        first, dash, last = part.partition("-")
        if not (first.isascii() and first.isdigit()) or (dash and not (last.isascii() and last.isdigit())):
            raise OutOfBounds(f"bad CPU list {text[:40]!r}: write it as the kernel does, e.g. 2-3 or 1,3,5")
        lo, hi = int(first[:6]), int(last[:6]) if dash else int(first[:6])
        if len(first) > 5 or len(last) > 5 or hi >= MAX_CPUS:
            raise OutOfBounds(f"CPU list {text[:40]!r} names a CPU beyond the {MAX_CPUS} Linux can have")
        if lo > hi:
            raise OutOfBounds(f"bad CPU range {part!r} in {text[:40]!r}")
        cpus.update(range(lo, hi + 1))
    return frozenset(cpus)


def timestamp(text: Any, now: datetime | None = None) -> tuple[str | None, str | None]:
    """(an ISO 8601 UTC time as stored, or None; why it was not kept, or None). A time after
    now plus CLOCK_SKEW is not kept: a run "started" in 9999 would stay the newest for ever."""
    if text is None or text == "":
        return None, None
    if not isinstance(text, str) or len(text) > 40:
        return None, "its start time is not a time"
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None, f"its start time {text!r} is not an ISO 8601 time"
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    if when > (now or datetime.now(UTC)) + CLOCK_SKEW:
        return None, f"its start time {text} is in the future: kept out of the newest"
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), None


def fit(table: sa.Table, row: dict[str, Any]) -> str | None:
    """Why ROW cannot go into TABLE as it is (a text longer than its column, a whole number
    outside its column's range), as "table.column: why", or None. Checked before the insert,
    so the store's own limits (PostgreSQL's, which SQLite does not have) are never what says no."""
    for name, value in row.items():
        if value is not None and name in table.c:
            why = _unfit(table.c[name].type, value)
            if why is not None:
                return f"{table.name}.{name}: {str(value)[:40]!r} {why}"
    return None


def _unfit(kind: Any, value: Any) -> str | None:
    import sqlalchemy as sa

    if isinstance(kind, sa.String) and kind.length is not None:
        if not isinstance(value, str) or len(value) > kind.length:
            return f"is longer than its {kind.length} characters"
    elif isinstance(kind, sa.Integer) and not isinstance(kind, sa.Boolean):
        lo, hi = BIG_INTEGER if isinstance(kind, sa.BigInteger) else INTEGER
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            return f"is not a whole number within {lo}..{hi}"
    elif isinstance(kind, sa.Float) and (
        isinstance(value, bool) or not isinstance(value, int | float) or not abs(value) <= 1e300
    ):
        return "is not a number a store keeps"
    return None
