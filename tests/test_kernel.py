"""RT kernel configs: fragments, Appendix A checks, the twin comparison, and (where
Debian's linux-source-6.12 and the riscv64 cross compiler are installed) the real merge
of the fragments onto riscv's defconfig for both twins."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import rtlab
from rtlab.kernel import fragments, recipe
from rtlab.kernel.verify import checks, twin_diff
from rtlab.system.kernel import parse_config


def test_twin_fragments_differ_only_in_the_preemption_model():
    rt = fragments.requested(["rt"])
    low = fragments.requested(["lowlatency"])
    differing = {k for k in set(rt) | set(low) if rt.get(k) != low.get(k)}
    assert differing == {"CONFIG_PREEMPT_RT", "CONFIG_PREEMPT"}
    assert rt["CONFIG_HZ"] == "1000" and rt["CONFIG_CPU_FREQ_DEFAULT_GOV_PERFORMANCE"] == "y"


def test_selection_and_bad_names():
    assert fragments.select("visionfive2", "rt") == [
        "rt",
        "tick-periodic",
        "visionfive2",
        "qemu-virt",
        "measurement",
    ]
    assert fragments.select("qemu-virt", "lowlatency", "nohz-full", debug=True)[-1] == "rt-debug"
    done = rtlab("kernel", "fragments", "--board", "pi4")
    assert done.returncode == 2 and "choose from visionfive2, qemu-virt" in done.stderr


def test_dropped_options_are_named():
    wanted = {"CONFIG_DWMAC_STARFIVE": "y", "CONFIG_PM": "y", "CONFIG_KASAN": "n"}
    actual = {"CONFIG_PM": "y", "CONFIG_DWMAC_STARFIVE": "m"}
    assert fragments.dropped(wanted, actual) == [("CONFIG_DWMAC_STARFIVE", "y", "m")]


def test_appendix_a_checks():
    good = {"CONFIG_PREEMPT_RT": "y", "CONFIG_HZ": "1000", "CONFIG_CPU_FREQ_DEFAULT_GOV_PERFORMANCE": "y"}
    assert all(c.ok for c in checks(good))
    bad = {"CONFIG_PREEMPT": "y", "CONFIG_HZ": "250", "CONFIG_CPU_FREQ_DEFAULT_GOV_SCHEDUTIL": "y"}
    assert [c.item for c in checks(bad, "rt") if not c.ok] == ["preemption model", "HZ", "default governor"]


def test_twin_diff_separates_model_derived_and_other():
    a = {"CONFIG_PREEMPT_RT": "y", "CONFIG_RCU_BOOST": "y", "CONFIG_HZ": "1000"}
    b = {"CONFIG_PREEMPT": "y", "CONFIG_HZ": "250"}
    model, derived, other = twin_diff(a, b)
    assert set(model) == {"CONFIG_PREEMPT_RT", "CONFIG_PREEMPT"}
    assert derived == {"CONFIG_RCU_BOOST": ("y", "n")}
    assert other == {"CONFIG_HZ": ("1000", "250")}


needs_source = pytest.mark.skipif(
    not recipe.DEBIAN_SOURCE.exists() or shutil.which(f"{recipe.CROSS}gcc") is None,
    reason="make test installs linux-source-6.12 and gcc-riscv64-linux-gnu",
)


@needs_source
def test_real_merge_gives_each_twin_exactly_its_model(tmp_path):
    configs = {}
    for preempt in ("rt", "lowlatency"):
        out = tmp_path / preempt
        done = rtlab(
            "kernel",
            "build",
            "--preempt",
            preempt,
            "--config-only",
            "-o",
            str(out),
            env={"RTLAB_CACHE": str(tmp_path / "cache")},
        )
        assert done.returncode == 0, done.stderr
        configs[preempt] = parse_config((out / ".config").read_text())
        manifest = (out / "build-manifest.json").read_text()
        assert '"version": "6.12' in manifest
    assert all(c.ok for c in checks(configs["rt"], "rt"))
    assert all(c.ok for c in checks(configs["lowlatency"], "lowlatency"))
    model, _, other = twin_diff(configs["rt"], configs["lowlatency"])
    assert model["CONFIG_PREEMPT_RT"] == ("y", "n") and other == {}
    verify = rtlab("kernel", "verify", str(tmp_path / "rt/.config"), str(tmp_path / "lowlatency/.config"))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    # riscv's defconfig turns on debug options that add latency; the measurement kernels do not
    assert configs["rt"].get("CONFIG_DEBUG_PAGEALLOC", "n") == "n"
    assert configs["lowlatency"].get("CONFIG_DEBUG_SPINLOCK", "n") == "n"
    assert Path(tmp_path / "cache/kernel-src/linux-source-6.12/Makefile").exists()
