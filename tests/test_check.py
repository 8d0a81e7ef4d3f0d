"""`rtlab check`: the audit on hand-made system facts, on a config file, and on real
kernels booted in QEMU (Debian's RT kernel passes, its standard kernel does not)."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import rtlab
from rtlab.system.audit import audit, verdict

RT_CONFIG = (
    "CONFIG_PREEMPT_RT=y\nCONFIG_HZ_1000=y\nCONFIG_HZ=1000\nCONFIG_CPUSETS=y\nCONFIG_TIMERLAT_TRACER=y\n"
)


def facts(
    version: str, config: str = "", cmdline: str = "console=ttyS0", realtime: str | None = None
) -> dict:
    options = {}
    for line in config.splitlines():
        key, _, value = line.partition("=")
        options[key] = value
    return {
        "kernel": {"version": version, "realtime": realtime, "cmdline": cmdline, "machine": "riscv64"},
        "config": {"options": options},
        "cpus": {"governors": {"0": "schedutil", "1": "performance"}},
        "runtime": {
            "files": {"/sys/kernel/mm/transparent_hugepage/enabled": "[always] madvise never"},
            "irqbalance": True,
        },
    }


def by_item(findings):
    return {f.item: f for f in findings}


@pytest.mark.unit
def test_mainline_rt_kernel_without_the_realtime_file_is_ready():
    findings = by_item(audit(facts("Linux 6.12.0 #1 SMP PREEMPT_RT", RT_CONFIG)))
    assert findings["preemption model"].status == "ok"
    assert findings["realtime flag"].status == "info"  # 6.12+ mainline RT has no /sys/kernel/realtime
    assert findings["HZ"].status == "ok"
    assert verdict(list(findings.values()))


@pytest.mark.unit
def test_non_rt_kernel_fails_with_the_fix():
    findings = audit(facts("Linux 6.12.0 #1 SMP PREEMPT", "CONFIG_PREEMPT=y\nCONFIG_HZ=250\n"))
    model = by_item(findings)["preemption model"]
    assert model.status == "fail" and "CONFIG_PREEMPT_RT=y" in model.advice
    assert by_item(findings)["HZ"].status == "warn"
    assert not verdict(findings)


@pytest.mark.unit
def test_debug_options_and_runtime_problems_are_flagged():
    findings = by_item(audit(facts("PREEMPT_RT", RT_CONFIG + "CONFIG_PROVE_LOCKING=y\nCONFIG_KASAN=y\n")))
    assert findings["PROVE_LOCKING"].status == "warn"
    assert "not for measurements" in findings["KASAN"].advice
    assert findings["irqbalance"].status == "warn"
    assert findings["transparent hugepages"].status == "warn"
    assert findings["governors"].status == "warn"


@pytest.mark.unit
def test_cmdline_advice_names_the_rt_cpus():
    findings = by_item(
        audit(facts("PREEMPT_RT", RT_CONFIG, cmdline="skew_tick=1 nohz_full=2-3"), rt_cpus="2-3")
    )
    assert findings["skew_tick"].status == "ok" and findings["nohz_full"].found == "nohz_full=2-3"
    assert findings["rcu_nocbs"].advice.startswith("rcu_nocbs=2-3:")
    assert "intel_idle.max_cstate" not in findings  # riscv64: no Intel idle driver


@pytest.mark.unit
def test_irqaffinity_advice_names_the_housekeeping_cpus():
    info = facts("PREEMPT_RT", RT_CONFIG)
    info["cpus"]["online"] = "0-3"
    advice = by_item(audit(info, rt_cpus="2-3"))["irqaffinity"].advice
    assert advice.startswith("irqaffinity=0-1:"), advice


@pytest.mark.unit
def test_each_runtime_knob_is_judged_by_its_own_class():
    info = facts("PREEMPT_RT", RT_CONFIG)
    info["runtime"]["files"].update(
        {
            "/proc/sys/kernel/sched_rt_runtime_us": "-1",
            "/proc/sys/kernel/timer_migration": "1",
            "/sys/kernel/mm/ksm/run": "1",
            "/sys/kernel/mm/transparent_hugepage/enabled": "always madvise [never]",
        }
    )
    findings = by_item(audit(info))
    assert findings["RT throttling"].status == "ok"
    assert findings["timer migration"].status == "info" and "rtlab tune" in findings["timer migration"].advice
    assert findings["ksm"].status == "warn"
    assert (
        findings["transparent hugepages"].status == "ok"
        and findings["transparent hugepages"].found == "never"
    )


@pytest.mark.unit
def test_check_with_a_config_file(tmp_path):
    config = tmp_path / "config"
    config.write_text(RT_CONFIG + "# CONFIG_PROVE_LOCKING is not set\n")
    done = rtlab("check", "--config", str(config), "--format", "json")
    document = json.loads(done.stdout)
    model = next(f for f in document["findings"] if f["item"] == "preemption model")
    assert model["status"] == "ok" and document["ready"] is True and done.returncode == 0
    mainline = tmp_path / "mainline"
    mainline.write_text("CONFIG_PREEMPT=y\nCONFIG_HZ=1000\n")
    done = rtlab("check", "--config", str(mainline))
    assert done.returncode == 1 and "fail" in done.stdout
    missing = rtlab("check", "--config", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr


@pytest.mark.guests
@pytest.mark.skipif(not shutil.which("qemu-system-x86_64"), reason="make test installs qemu-system-x86")
@pytest.mark.parametrize(("kernel", "ready"), [("debian-rt", True), ("debian", False)])
def test_check_real_kernels_in_qemu(kernel, ready):
    done = rtlab("check", "--target", f"qemu:{kernel}", "--format", "json")
    document = json.loads(done.stdout)
    assert document["ready"] is ready and done.returncode == (0 if ready else 1)
    findings = {f["item"]: f for f in document["findings"]}
    if ready:
        assert findings["realtime flag"]["status"] == "ok"  # Debian's 6.1 RT kernel has the RT patch's file
        assert findings["preemption model"]["found"].startswith("PREEMPT_RT")
