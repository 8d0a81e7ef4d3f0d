"""stress-ng's own throughput: the table --metrics-brief prints when it ends (also on SIGTERM,
which is how the agent stops a load), read from the load's load.log.

    stress-ng: metrc: [7400] stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s
    stress-ng: metrc: [7400]                           (secs)    (secs)    (secs)   (real time) (usr+sys time)
    stress-ng: metrc: [7400] cpu                3918      3.02      2.90      0.01      1297.98        1345.77

Older releases tag the lines "info:" instead of "metrc:"; newer ones (0.17 on) add two
columns, CPU used per instance (%) and RSS Max (KB). Only rows of numbers count: the header,
the units line and --metrics' per-method lines ("600115.62 mult matrix ops per sec") do not.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

_ROW = re.compile(r"^stress-ng: (?:metrc|info): +\[\d+\] +(\S+)((?: +[0-9.]+){6,8}) *$", re.MULTILINE)


@dataclass(frozen=True)
class StressorMetrics:
    bogo_ops: float
    real_s: float  # the stressor's wall time
    usr_s: float
    sys_s: float
    ops_per_s: float  # bogo ops per second of real time: the throughput compared across runs
    ops_per_cpu_s: float  # per second of CPU time (usr + sys)
    rss_max_kb: float | None = None  # stress-ng 0.17 and later

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def parse(text: str) -> dict[str, StressorMetrics]:
    """Each stressor's row, by name, in stress-ng's order; {} when it printed none (it was
    killed, or is not stress-ng). A stressor named twice keeps its last row."""
    found: dict[str, StressorMetrics] = {}
    for name, numbers in _ROW.findall(text):
        values = [float(v) for v in numbers.split()]
        rss = values[7] if len(values) == 8 else None
        ops, real, usr, sys, per_s, per_cpu = values[:6]
        found[name] = StressorMetrics(ops, real, usr, sys, per_s, per_cpu, rss)
    return found
