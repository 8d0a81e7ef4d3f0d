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

# --- the one gate for a user's values (units.py, cli/options.py) ------------------------------
# Whole numbers are read from at most this many ASCII digits: every bound below is far inside
# it, and int() never parses a 10,000-digit number (Python refuses past 4300 with a traceback).
NUMBER_DIGITS = 15
# A latency option (--deadline, --trace, --spike-threshold, --block, ...) is at most the longest
# block (60 s): cyclictest keeps its µs in C ints (2^31 µs is about 36 min), so each fits, and no
# deadline or threshold longer than a block of the time axis means anything to a verdict.
MAX_LATENCY_US = MAX_BLOCK_US
# rtlab worst --horizon: how long a system must meet its worst case, a product's service life at
# most (a century); the expected wake-ups in it stay a finite float at any interval.
MAX_HORIZON_S = 100 * 366 * 86400
# Probabilities (worst --probability, --false-alarm, history@RATE): from 1e-15 up, where a double
# still tells 1 - p from 1 (its epsilon is 2.2e-16); below it a tail quantile is the same number
# as at p = 0, an infinite latency or a division by zero.
MIN_PROBABILITY = 1e-15
# --margin's percentage: up to 1000 % (a run ten times worse is still "the same" at most).
MAX_MARGIN_PERCENT = 1000.0
# stress-ng workers per load: one per CPU of the largest machine Linux can have (NR_CPUS 8192,
# boundary/values.MAX_CPUS); more only measures fork pressure and can exhaust a board's PIDs.
MAX_WORKERS = 8192
# Whole runs of a campaign (run --repeat, bisect/sweep --repeats and --max-repeats): tens give
# the spread; a thousand runs of the default plan are weeks, and each is a folder and a table row.
MAX_REPEATS = 1000
# A QEMU guest's CPUs: each is a host thread under TCG; QEMU's pc machine stops at 255, and a
# guest of more CPUs than that only waits longer to boot.
MAX_GUEST_CPUS = 255
# A guest's boot timeout and margin: a day; longer is a wait nobody meant.
MAX_GUEST_WAIT_S = 86400
# scan --top: stress-ng has about 350 stressors; the loads file of the worst is at most them all.
MAX_TOP = 1000
# monitor --blocks: a million blocks of the default 5 min are 9.5 years (leave it out: until stopped).
MAX_BLOCKS = 1_000_000
# kernel build --jobs: make's parallel jobs, at most the CPUs Linux can have (8192); more only
# spawns compilers that wait.
MAX_JOBS = 8192
# A file the user names for rtlab to read (a study, a loads file, a Kconfig fragment, a token, a
# LAVA job): each is kB of text; 16 MB leaves room for a whole .config, and /dev/zero or a FIFO
# given by mistake is refused instead of read for ever.
MAX_USER_FILE_BYTES = 16 << 20
# rtlab boot --boot-timeout: a board's firmware and kernel answer over SSH within minutes; an
# hour is beyond any, and NaN or inf would make the wait (and the lock it sizes) end never.
MAX_BOOT_TIMEOUT_S = 3600
# A LAVA job id: the server's bigint primary key.
MAX_JOB_ID = (1 << 63) - 1
