"""The ranges a plan's values keep, and their defaults: plan.validate refuses a value outside
them, and the caps on what comes back from a target (boundary/unpack.py) are sized by them, so
a run.json from a board cannot ask for more room than a plan rtlab accepts could fill."""

from __future__ import annotations

# What cyclictest can do: it keeps -D in a C int of seconds and -i, -h in ints of µs, and
# locks one 8-byte counter per histogram µs per thread into memory. Bounded well inside.
MAX_DURATION_S = 366 * 86400  # a year: longer soaks are several runs
MAX_INTERVAL_US = 1_000_000  # one wake-up a second; longer and too few samples mean anything
# Wide enough that nothing overflows: this 2-vCPU VM showed 27 ms under stress-ng.
DEFAULT_HISTOGRAM_US = 100_000
MIN_HISTOGRAM_US, MAX_HISTOGRAM_US = 10, 1_000_000  # 8 MB locked per measured CPU at most

# The time axis: cyclictest's oscilloscope mode prints each block's maximum (-v -o), its
# --spike list every sample above a threshold with its CLOCK_MONOTONIC time.
DEFAULT_BLOCK_US = 1_000_000
MIN_BLOCK_US, MAX_BLOCK_US = 100_000, 60_000_000
# The spike nodes bound what a mainline kernel can fill (about 40 bytes of output each); the
# summary says when the list was cut.
DEFAULT_SPIKE_NODES = 10_000
MAX_SPIKE_NODES = 1_000_000

# Spike causes: a trace pass after each load's measurement (0 s: none). Each capture restarts
# cyclictest; TRACE_SPIKES of them bound the pass's data (a few hundred kB each, gzipped).
DEFAULT_TRACE_SPIKES = 20
MAX_TRACE_SPIKES = 1000
