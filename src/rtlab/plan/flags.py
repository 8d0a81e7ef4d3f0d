"""What the tools' command lines are built from: cyclictest's flags for the plan's numbers, and
the plan's values a probe reads (Measuring). Imports nothing of rtlab.plan, so the probes'
modules can build their command lines without the Plan (rtlab.plan re-exports the table)."""

from __future__ import annotations

from typing import Protocol

# cyclictest's options that carry the plan's numbers, by the Plan's field (block_samples: its
# method): cyclictest.argv is built from this table (Plan.cyclictest_argv) and read back from it when
# run.json is lost (rundir/readback.py); the agent's own -D (a segment's, a capture's) is generated from
# the same row (rtlab.agent.constants). The rt-tests probes share cyclictest's -D.
CYCLICTEST_FLAGS = {"duration_s": "-D", "interval_us": "-i", "priority": "-p", "histogram_us": "-h",
                    "block_samples": "-o"}  # fmt: skip


class Measuring(Protocol):
    """The plan's values a probe's command line is built from (a Plan, resolved for its target)."""

    @property
    def duration_s(self) -> int: ...
    @property
    def interval_us(self) -> int: ...
    @property
    def priority(self) -> int: ...
    @property
    def histogram_us(self) -> int: ...
    @property
    def rt_cpus(self) -> str | None: ...  # a kernel CPU list; None: every CPU
    @property
    def cpu_count(self) -> int | None: ...  # the target's online CPUs; None: not resolved
