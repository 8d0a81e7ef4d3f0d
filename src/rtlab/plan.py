"""What to measure: loads, cyclictest options, durations. Pure data.

A plan is built from CLI options or a preset, resolved against the target (how
many CPUs it has) and written into the run directory for the agent as plain files.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from rtlab.errors import UsageError
from rtlab.loads import LOADS, STRESS_TIMEOUT_MARGIN_S, stress_argv

# Wide enough that nothing overflows: this 2-vCPU VM showed 27 ms under stress-ng.
# cyclictest keeps one counter per microsecond per thread (8 bytes each).
DEFAULT_HISTOGRAM_US = 100_000


@dataclass(frozen=True)
class Plan:
    loads: tuple[str, ...] = tuple(LOADS)
    duration_s: int = 60
    interval_us: int = 200
    priority: int = 99
    histogram_us: int = DEFAULT_HISTOGRAM_US
    settle_s: int = 5
    workers: int | None = None  # stress-ng workers per load; None: the target's CPU count
    storage_dir: str | None = None  # where `storage` works; None: a scratch folder in the run
    governor: str = "performance"  # or "keep"
    preset: str | None = None

    def validate(self) -> Plan:
        if not 1 <= self.priority <= 99:
            raise UsageError(f"bad priority {self.priority}: SCHED_FIFO priorities are 1 to 99")
        if self.interval_us < 50:
            raise UsageError(f"interval {self.interval_us}us is too short: use 50us or more")
        if self.histogram_us < 10:
            raise UsageError(f"histogram range {self.histogram_us}us is too small: use 1ms or more")
        if self.workers is not None and self.workers < 1:
            raise UsageError(f"bad worker count {self.workers}: use 1 or more")
        if self.settle_s < 0:
            raise UsageError(f"bad settle time {self.settle_s}s: use 0 or more")
        return self

    def for_cpus(self, cpus: int) -> Plan:
        """The plan with N, the stress-ng worker count, fixed for a target."""
        return self if self.workers is not None else replace(self, workers=max(cpus, 1))

    def cyclictest_argv(self) -> list[str]:
        # The seed's `-m -S -p 99 -i 200 -q -D 10m -H 200`, with a wider histogram
        # whose text dump is not wanted: the JSON holds the same counts.
        return [
            "-m", "-S",
            "-p", str(self.priority),
            "-i", str(self.interval_us),
            "-q",
            "-D", str(self.duration_s),
            "-h", str(self.histogram_us),
            "--histfile=/dev/null",
        ]  # fmt: skip

    def stress_argv(self, load: str, scratch: str) -> list[str] | None:
        """stress-ng's arguments for `load`; `scratch` is the run's own scratch folder."""
        if self.workers is None:
            raise ValueError("resolve the plan with for_cpus() first")
        temp_path = (self.storage_dir or scratch) if load == "storage" else None
        timeout = self.settle_s + self.duration_s + STRESS_TIMEOUT_MARGIN_S
        return stress_argv(load, self.workers, timeout, temp_path)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["loads"] = list(self.loads)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["loads"] = tuple(fields.get("loads", ()))
        return cls(**fields)


# The StarFive study's protocol (section 5): every load for 10 minutes,
# `cyclictest -m -S -p 99 -i 200`, N = online CPUs, governor `performance`.
PRESETS: dict[str, Plan] = {
    "starfive": Plan(duration_s=600, interval_us=200, priority=99, preset="starfive"),
}


def preset(name: str) -> Plan:
    try:
        return PRESETS[name]
    except KeyError:
        raise UsageError(f"unknown preset {name!r}: choose from {', '.join(PRESETS)}") from None
