"""arm64 kernels as the Linaro talk builds them for its RB5: arm64's defconfig, trimmed, with
the RT fragment or its low-latency twin, the board's own options and QEMU virt's, and the
talk's test kernel (its debug variant). The merges are real (Debian's linux-source-6.12, the
aarch64 cross compiler); the whole build booted in the arm64 guest is `make test-slow`'s."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from conftest import read_json, rtlab, run_args
from rtlab.kernel import fragments, recipe
from rtlab.kernel.verify import checks, twins
from rtlab.system.kernel import parse_config

ARM64 = recipe.ARCHES["arm64"]
needs_source = pytest.mark.skipif(
    not recipe.DEBIAN_SOURCE.exists() or shutil.which(f"{ARM64.cross}gcc") is None,
    reason="make test installs linux-source-6.12 and gcc-aarch64-linux-gnu",
)
# The talk's "build a test kernel with" lists, word for word (seeds: linaro-rt-linux-rb5-talk)
TALK_DEBUG = (
    "CONFIG_KASAN", "CONFIG_DEBUG_SHIRQ", "CONFIG_SOFTLOCKUP_DETECTOR", "CONFIG_DETECT_HUNG_TASK",
    "CONFIG_WQ_WATCHDOG", "CONFIG_DEBUG_PREEMPT", "CONFIG_DEBUG_IRQFLAGS",
    "CONFIG_PROVE_LOCKING", "CONFIG_PROVE_RAW_LOCK_NESTING", "CONFIG_DEBUG_ATOMIC_SLEEP",
)  # fmt: skip


@pytest.mark.unit
def test_each_board_names_its_architecture_and_its_fragments():
    assert fragments.select("rb5", "rt") == [
        "small-arm64", "rt", "tick-periodic", "rb5", "qemu-virt-arm64", "tracing", "measurement",
    ]  # fmt: skip
    assert fragments.select("qemu-virt-arm64", "lowlatency", debug=True) == [
        "small-arm64", "lowlatency", "tick-periodic", "qemu-virt-arm64", "tracing", "rt-debug",
    ]  # fmt: skip
    assert fragments.select("visionfive2", "rt")[0] == "small"  # riscv64's trim, as before
    assert recipe.Request("rb5", "rt").arch == ARM64
    assert recipe.Request("rb5", "rt").slug == "rb5-rt-periodic"
    assert fragments.BOARDS["rb5"].dtbs == ("qcom/qrb5165-rb5.dtb",)
    for board in fragments.BOARDS.values():  # every fragment a board names is shipped
        assert all(fragments.path(name).is_file() for name in board.fragments)
    done = rtlab("kernel", "fragments", "--board", "rb3")
    assert done.returncode == 2 and "rb5, qemu-virt-arm64" in done.stderr


@pytest.mark.unit
def test_the_debug_fragment_is_the_talks_test_kernel():
    asked = fragments.requested([fragments.path("rt-debug")])
    assert {option for option, value in asked.items() if value == "y"} >= set(TALK_DEBUG)
    # none of it in a kernel built to measure
    measured = fragments.requested([fragments.path(n) for n in fragments.select("rb5", "rt")])
    assert not set(TALK_DEBUG) & {option for option, value in measured.items() if value == "y"}


@pytest.mark.unit
def test_arm64_configs_get_the_talks_checks_besides_appendix_a():
    base = {"CONFIG_PREEMPT_RT": "y", "CONFIG_HZ": "1000", "CONFIG_CPU_FREQ_DEFAULT_GOV_PERFORMANCE": "y"}
    assert [c.item for c in checks(base)] == ["preemption model", "HZ", "default governor"]
    arm64 = {**base, "CONFIG_ARM64": "y", "CONFIG_CPUSETS": "y", "CONFIG_TIMERLAT_TRACER": "y"}
    found = {c.item: c.ok for c in checks(arm64)}
    assert found["cpusets"] and found["timerlat tracer"]
    assert not found["hwlat tracer"] and not found["wake-up latency tracer"]


@pytest.mark.tools
@needs_source
def test_the_rb5_twins_merge_onto_arm64s_defconfig(tmp_path, kernel_cache):
    """Both twins and the debug variant merged for real: Appendix A and the talk's checks hold,
    the twins differ in the model and what Kconfig derives from it only (on arm64 also
    transparent huge pages and NUMA balancing, which PREEMPT_RT turns off), the other SoC
    families are gone and the RB5's own drivers are built in."""
    env = {"RTLAB_CACHE": str(kernel_cache)}
    configs = {}
    for name, more in (
        ("rt", ["--preempt", "rt"]),
        ("ll", ["--preempt", "lowlatency"]),
        ("debug", ["--debug"]),
    ):
        out = tmp_path / name
        done = rtlab("kernel", "build", "--board", "rb5", *more, "--config-only", "-o", str(out), env=env)
        assert done.returncode == 0, done.stderr
        assert "lazy preemption" not in done.stderr  # riscv's advice, not arm64's
        configs[name] = parse_config((out / ".config").read_text())
        manifest = read_json(out / "build-manifest.json")
        assert manifest["request"]["arch"] == "arm64" and manifest["source"]["version"].startswith("6.12")
    assert configs["rt"]["CONFIG_ARM64"] == "y"
    assert all(c.ok for c in checks(configs["rt"], "rt")), checks(configs["rt"], "rt")
    assert all(c.ok for c in checks(configs["ll"], "lowlatency"))
    pair = twins(configs["rt"], configs["ll"])
    assert pair.problems == () and pair.other == {}, pair.other
    assert pair.derived["CONFIG_TRANSPARENT_HUGEPAGE"] == ("n", "y")
    for gone in ("CONFIG_ARCH_ROCKCHIP", "CONFIG_ARCH_TEGRA", "CONFIG_ACPI", "CONFIG_DRM", "CONFIG_KVM"):
        assert configs["rt"].get(gone, "n") == "n", gone
    rb5_and_virt = (
        "CONFIG_ARCH_QCOM", "CONFIG_SM_GCC_8250", "CONFIG_SERIAL_QCOM_GENI_CONSOLE", "CONFIG_SCSI_UFS_QCOM",
        "CONFIG_PCI_HOST_GENERIC", "CONFIG_SERIAL_AMBA_PL011_CONSOLE",
    )  # fmt: skip
    for kept in rb5_and_virt:
        assert configs["rt"][kept] == "y", kept
    for option in TALK_DEBUG:
        assert configs["debug"].get(option) == "y", option
    assert configs["rt"].get("CONFIG_PROVE_LOCKING", "n") == "n"
    verify = rtlab("kernel", "verify", str(tmp_path / "rt/.config"), str(tmp_path / "ll/.config"))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "cpusets: y ok" in verify.stdout


@pytest.mark.guests
@pytest.mark.slow
@needs_source
@pytest.mark.skipif(not shutil.which("qemu-system-aarch64"), reason="make test installs qemu-system-arm")
def test_the_rb5_rt_kernel_against_its_twin_in_the_arm64_guest(tmp_path):
    """docs/arm64-rt-kernel.md: the RB5's PREEMPT_RT kernel and its low-latency twin built
    (Image and the board's device tree), each booted in qemu-system-aarch64 and measured three
    times, then judged with intervals; the kernel the guest ran is the one built."""
    sides = {"rt": "Real-time", "lowlatency": "Low-latency"}
    for preempt in sides:
        out = tmp_path / preempt
        done = rtlab("kernel", "build", "--board", "rb5", "--preempt", preempt, "-o", str(out))
        assert done.returncode == 0, done.stderr
        manifest = read_json(out / "build-manifest.json")
        assert {"Image", ".config", "dtbs/qrb5165-rb5.dtb"} <= set(manifest["outputs"])
        for name, digest in manifest["outputs"].items():
            assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest, name
        target = f"qemu:kernel={out / 'Image'},arch=arm64"
        done = rtlab(
            *run_args(tmp_path / f"{preempt}-runs", "idle,cpu", "5s", "--target", target, "--repeat", "3")
        )
        assert done.returncode == 0, done.stderr
        for k in (1, 2, 3):
            info = read_json(tmp_path / f"{preempt}-runs" / f"repeat-{k}" / "sysinfo.json")
            assert info["kernel"]["machine"] == "aarch64"
            assert (info["derived"]["preemption"]["model"] == "PREEMPT_RT") is (preempt == "rt")
            assert info["config"]["options"]["CONFIG_HZ"] == "1000"
    runs = [str(tmp_path / f"{preempt}-runs") for preempt in sides]
    done = rtlab("compare", *runs, "--labels", ",".join(sides.values()), "--format", "json")
    assert done.returncode == 0, done.stderr
    verdicts = json.loads(done.stdout)["runs"][1]["verdicts"]
    assert verdicts["replicates"] == {"base": 3, "new": 3}
    table = rtlab("compare", *runs, "--labels", ",".join(sides.values()), "--format", "md")
    assert "| idle |" in table.stdout and "| cpu |" in table.stdout
    Path(tmp_path / "table.md").write_text(table.stdout)
