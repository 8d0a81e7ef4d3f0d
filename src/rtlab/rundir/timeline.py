"""cyclictest's standard output with `-v -o N --spike=T` (rt-tests 2.x), read as printed.

    "%8d:%8lu:%8ld"              thread index, cycle of the block's maximum, that maximum (µs):
                                 one line per complete block of N samples of a thread (the
                                 last, partial block is never printed)
    "T:%2d Spike:%8ld: TS: %12ld"  thread index, latency (µs), CLOCK_MONOTONIC time (µs) of a
                                 sample above T; only the first --spike-nodes are kept
    "spikes = %d"                how many samples were above T in all

Lines that match none of these (headers, a line cut off by a crash) are counted, not fatal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from rtlab.boundary import untrusted
from rtlab.rundir import layout

FILE = layout.CYCLICTEST_OUT

# (numbers as C's printf gives them: 20 digits at most; longer ones are garbled lines)
_BLOCK = re.compile(r"^\s*(\d{1,20}):\s*(\d{1,20}):\s*(-?\d{1,20})\s*$")
_SPIKE = re.compile(r"^T:\s*(\d{1,20}) Spike:\s*(-?\d{1,20}): TS:\s*(\d{1,20})\s*$")
_TOTAL = re.compile(r"^spikes = (\d{1,20})\s*$")
# cyclictest's own header lines: expected, not garbled
_HEADER = re.compile(r"^(Max CPUs|Online CPUs|# |Thread \d+ Interval|\s*$)")


@dataclass
class Verbose:
    # thread index -> [(cycle of max, max µs)] in the order printed
    blocks: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    spikes: list[tuple[int, int, int]] = field(default_factory=list)  # (thread, µs, monotonic µs)
    spikes_total: int | None = None  # None: the count line never came (cyclictest cut short)
    garbled: int = 0  # lines that are none of the above


def parse(text: str) -> Verbose:
    out = Verbose()
    for line in untrusted.lines(text):
        if m := _BLOCK.match(line):
            out.blocks.setdefault(int(m.group(1)), []).append((int(m.group(2)), int(m.group(3))))
        elif m := _SPIKE.match(line):
            out.spikes.append((int(m.group(1)), int(m.group(2)), int(m.group(3))))
        elif m := _TOTAL.match(line):
            out.spikes_total = int(m.group(1))
        elif not _HEADER.match(line):
            out.garbled += 1
    return out


def read(folder: Path, root: Path | None = None) -> Verbose | None:
    """The load folder's verbose output, None when cyclictest printed none (an older run)."""
    path = folder / FILE
    if not path.is_file():
        return None
    try:
        return parse(untrusted.read_text(path, untrusted.RESULT_BYTES, root=root))
    except untrusted.Damaged:
        return None  # a link or too large: the time axis says it is missing
