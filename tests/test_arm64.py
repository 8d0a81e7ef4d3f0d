"""arm64 guests (qemu-system-aarch64 `virt`, the RB5's architecture): Debian bookworm's
PREEMPT_RT and standard arm64 kernels, each booted once for this file, measured under the
same short plan and compared as a user compares two kernels (Table 5-1's layout)."""

from __future__ import annotations

import io
import math
import shutil
from csv import DictReader
from pathlib import Path

import pytest

from conftest import processes_named, read_json, rtlab, run_args
from rtlab.errors import UsageError
from rtlab.system.clusters import clusters
from rtlab.targets.qemu.spec import GuestSpec

needs_arm64 = pytest.mark.skipif(
    not shutil.which("qemu-system-aarch64"), reason="make test installs qemu-system-arm"
)
LOADS = ["idle", "cpu"]
# the target spellings a user writes: Debian's arch name, and uname -m's
KERNELS = {"RT": "arm64:debian-rt", "Standard": "aarch64:debian"}


def guests() -> set[int]:
    return processes_named("qemu-system-aarch64", "qemu-system-aar", session=True)  # comm is cut to 15


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("arm64")
    found = {}
    for label, kernel in KERNELS.items():
        out = base / label
        done = rtlab(*run_args(out, ",".join(LOADS), "2s", "--target", f"qemu:{kernel}", settle="1s"))
        assert done.returncode == 0, done.stderr
        found[label] = out
    return found


@pytest.mark.guests
@needs_arm64
def test_the_rt_guest_runs_debians_preempt_rt_arm64_kernel(runs):
    info = read_json(runs["RT"] / "sysinfo.json")
    assert info["kernel"]["machine"] == "aarch64"
    assert "PREEMPT_RT" in info["kernel"]["version"] and info["kernel"]["realtime"] == "1"
    assert info["derived"]["preemption"]["model"] == "PREEMPT_RT"
    assert info["config"]["options"]["CONFIG_PREEMPT_RT"] == "y"  # the package's own config
    # every vCPU is the Cortex-A72 asked for, all one kind: no clusters, so none of the
    # per-cluster rows a heterogeneous SoC such as the RB5's gets
    assert {core["type"] for core in info["cpus"]["cores"].values()} == {"0x41:0xd08"}
    assert clusters(info["cpus"]) == []
    target = read_json(runs["RT"] / "run.json")["target"]
    assert target["arch"] == "aarch64" and target["release"] == "bookworm"
    assert target["kernel"]["package"].endswith("-rt-arm64"), target["kernel"]


@pytest.mark.guests
@needs_arm64
def test_the_standard_guest_is_not_realtime(runs):
    info = read_json(runs["Standard"] / "sysinfo.json")
    assert info["kernel"]["machine"] == "aarch64"
    assert "PREEMPT_RT" not in info["kernel"]["version"] and info["kernel"]["realtime"] is None
    assert info["derived"]["preemption"]["realtime"] is False
    package = read_json(runs["Standard"] / "run.json")["target"]["kernel"]["package"]
    assert package.endswith("-arm64") and "-rt-" not in package


def expected(run: Path, load: str) -> dict[str, float]:
    """The statistics of LOAD recomputed from cyclictest's own JSON: every thread's histogram
    summed into one system-wide histogram (population stdev, the seed's Appendix B). An
    emulated guest on a busy host can wake up later than the histogram reaches: cyclictest
    counts those wake-ups (cycles) and their max and average, not their values, so then the
    max and average are its own, and the stdev places them at the histogram's limit."""
    limit = read_json(run / "run.json")["plan"]["histogram_us"]
    threads = read_json(run / "loads" / load / "cyclictest.json")["thread"].values()
    merged: dict[int, int] = {}
    for thread in threads:
        for value, count in thread["histogram"].items():
            merged[int(value)] = merged.get(int(value), 0) + count
    binned = sum(merged.values())
    n = sum(thread["cycles"] for thread in threads)
    overflows = n - binned
    placed = {**merged, limit: merged.get(limit, 0) + overflows}
    mean = sum(v * c for v, c in placed.items()) / n
    found = {
        "samples": n,
        "overflows": overflows,
        "min_us": min(merged),
        "max_us": max(merged),
        "avg_us": mean,
        "stdev_us": math.sqrt(sum(c * (v - mean) ** 2 for v, c in placed.items()) / n),
    }
    if overflows:
        found["max_us"] = max(thread["max"] for thread in threads)
        found["avg_us"] = sum(thread["avg"] * thread["cycles"] for thread in threads) / n
    return found


@pytest.mark.guests
@needs_arm64
def test_compare_shows_both_kernels_with_statistics_from_their_histograms(runs):
    args = [str(runs["RT"]), str(runs["Standard"]), "--labels", "RT,Standard"]
    table = rtlab("compare", *args, "--format", "md")
    assert table.returncode == 0, table.stderr
    rows = [line for line in table.stdout.partition("###")[0].splitlines() if line.startswith("| ")]
    assert "| RT Max (µs) |" in rows[0] and "| Standard Max (µs) |" in rows[0], rows[0]
    assert [row.split("|")[1].strip() for row in rows[1:]] == LOADS
    # a number on each side of every load, none left empty
    assert all("|  |" not in row for row in rows[1:]), rows
    csv = rtlab("compare", *args, "--format", "csv")
    assert csv.returncode == 0, csv.stderr
    shown = {(r["label"], r["load"]): r for r in DictReader(io.StringIO(csv.stdout)) if r["cpu"] == "all"}
    for label, run in runs.items():
        for load in LOADS:
            row, want = shown[(label, load)], expected(run, load)
            assert row["status"] == "complete" and want["samples"] > 0, row
            for key in ("samples", "overflows", "min_us", "max_us"):
                assert int(row[key]) == want[key], (label, load, key, row)
            for key in ("avg_us", "stdev_us"):  # shown to three decimals
                assert float(row[key]) == pytest.approx(want[key], abs=0.0006), (label, load, key, row)
            # a stdev with wake-ups placed at the limit is a lower bound, and is said to be one
            assert ("stdev_us" in row["lower_bounds"]) == (want["overflows"] > 0), row
    assert guests() == set()


@pytest.mark.unit
@pytest.mark.parametrize("text", ["arm64:debian-rt", "aarch64:debian-rt", "arm64:debian-rt,arch=aarch64"])
def test_arm64_and_aarch64_name_the_same_guest(text):
    spec = GuestSpec.parse(text)
    assert spec.arch.name == "aarch64" and spec.arch.qemu == "qemu-system-aarch64"
    assert spec.arch.console == "ttyAMA0"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("arm64:debian,arch=riscv64", "qemu:arm64:debian is an arm64 kernel, not riscv64"),
        ("kernel=/etc/hostname,arch=sparc", "choose from x86_64, riscv64, arm64 (aarch64)"),
        ("aarch64:debian-rt-old", "unknown guest kernel 'aarch64:debian-rt-old'"),
    ],
)
def test_a_wrong_arm64_spec_is_one_line_naming_the_choices(text, said):
    with pytest.raises(UsageError) as caught:
        GuestSpec.parse(text)
    assert said in str(caught.value) and "\n" not in str(caught.value)
