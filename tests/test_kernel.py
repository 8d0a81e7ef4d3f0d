"""RT kernel configs: fragments, Appendix A checks, the twin comparison, and (where
Debian's linux-source-6.12 and the riscv64 cross compiler are installed) the real merge
of the fragments onto riscv's defconfig for both twins."""

from __future__ import annotations

import hashlib
import lzma
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import read_json, rtlab, run_args
from rtlab.errors import RunFailed
from rtlab.kernel import fragments, patches, recipe
from rtlab.kernel.verify import checks, twin_diff
from rtlab.system.kernel import parse_config


@pytest.mark.tools
def test_twin_fragments_differ_only_in_the_preemption_model():
    rt = fragments.requested([fragments.path("rt")])
    low = fragments.requested([fragments.path("lowlatency")])
    differing = {k for k in set(rt) | set(low) if rt.get(k) != low.get(k)}
    assert differing == {"CONFIG_PREEMPT_RT", "CONFIG_PREEMPT"}
    assert rt["CONFIG_HZ"] == "1000" and rt["CONFIG_CPU_FREQ_DEFAULT_GOV_PERFORMANCE"] == "y"


@pytest.mark.tools
def test_selection_and_bad_names():
    assert fragments.select("visionfive2", "rt") == [
        "small",
        "rt",
        "tick-periodic",
        "visionfive2",
        "qemu-virt",
        "tracing",
        "measurement",
    ]
    assert fragments.select("qemu-virt", "lowlatency", "nohz-full", debug=True)[-1] == "rt-debug"
    assert fragments.select("visionfive2", "rt", base="defconfig")[0] == "rt"
    # lazy preemption goes with PREEMPT_RT only: the twin stays plain CONFIG_PREEMPT
    assert fragments.select("qemu-virt", "rt", lazy=True)[:3] == ["small", "rt", "lazy"]
    assert "lazy" not in fragments.select("qemu-virt", "lowlatency", lazy=True)
    done = rtlab("kernel", "fragments", "--board", "pi4")
    assert done.returncode == 2 and "choose from visionfive2, qemu-virt" in done.stderr


@pytest.mark.tools
def test_dropped_options_are_named():
    wanted = {"CONFIG_DWMAC_STARFIVE": "y", "CONFIG_PM": "y", "CONFIG_KASAN": "n"}
    actual = {"CONFIG_PM": "y", "CONFIG_DWMAC_STARFIVE": "m"}
    assert fragments.dropped(wanted, actual) == [("CONFIG_DWMAC_STARFIVE", "y", "m")]


@pytest.mark.tools
def test_a_users_fragment_is_kept_whole_and_may_overrule_rtlabs_options():
    """A sweep's variant: CONFIG_PROVE_LOCKING=y selects the DEBUG_SPINLOCK a measurement build
    turns off; that is what the user asked for (said, not refused), but the variant's own
    option dropped stops the build, and so does one of rtlab's with nothing added."""
    ours = {"CONFIG_DEBUG_SPINLOCK": "n", "CONFIG_PREEMPT_RT": "y"}
    actual = {"CONFIG_DEBUG_SPINLOCK": "y", "CONFIG_PREEMPT_RT": "y", "CONFIG_PROVE_LOCKING": "y"}
    lost, overruled = fragments.kept(ours, {"CONFIG_PROVE_LOCKING": "y"}, actual)
    assert lost == [] and overruled == [("CONFIG_DEBUG_SPINLOCK", "n", "y")]
    lost, _ = fragments.kept(ours, {"CONFIG_KASAN": "y"}, actual)
    assert lost == [("CONFIG_KASAN", "y", "n")]
    assert fragments.kept(ours, {}, actual) == ([("CONFIG_DEBUG_SPINLOCK", "n", "y")], [])


@pytest.mark.tools
def test_appendix_a_checks():
    good = {"CONFIG_PREEMPT_RT": "y", "CONFIG_HZ": "1000", "CONFIG_CPU_FREQ_DEFAULT_GOV_PERFORMANCE": "y"}
    assert all(c.ok for c in checks(good))
    bad = {"CONFIG_PREEMPT": "y", "CONFIG_HZ": "250", "CONFIG_CPU_FREQ_DEFAULT_GOV_SCHEDUTIL": "y"}
    assert [c.item for c in checks(bad, "rt") if not c.ok] == ["preemption model", "HZ", "default governor"]


@pytest.mark.tools
def test_verify_prints_each_check_on_one_line_however_long_the_path(tmp_path):
    # rich wraps at 80 columns in a pipe: a config under a long folder had its checks cut in
    # two ("...: cpusets:" / "y ok"), and a grep for a check found nothing
    folder = tmp_path / ("a-folder-with-a-long-name-" * 3)
    folder.mkdir()
    rt = {"CONFIG_ARM64": "y", "CONFIG_PREEMPT_RT": "y", "CONFIG_HZ": "1000", "CONFIG_CPUSETS": "y"}
    ll = {**{k: v for k, v in rt.items() if k != "CONFIG_PREEMPT_RT"}, "CONFIG_PREEMPT": "y"}
    for name, options in (("rt", rt), ("ll", ll)):
        (folder / name).write_text("".join(f"{k}={v}\n" for k, v in options.items()))
    done = rtlab("kernel", "verify", str(folder / "rt"), str(folder / "ll"))
    lines = done.stdout.splitlines()
    assert f"{folder / 'rt'}: cpusets: y ok" in lines, done.stdout
    assert f"{folder / 'll'}: preemption model: lowlatency ok" in lines, done.stdout
    assert "differs (preemption model): CONFIG_PREEMPT_RT: y / n" in lines, done.stdout
    assert len(lines) == 2 * 7 + 2, done.stdout  # Appendix A's 3 and arm64's 4 a file, then the 2 differences


@pytest.mark.tools
def test_twin_diff_separates_model_derived_and_other():
    a = {"CONFIG_PREEMPT_RT": "y", "CONFIG_RCU_BOOST": "y", "CONFIG_HZ": "1000"}
    b = {"CONFIG_PREEMPT": "y", "CONFIG_HZ": "250"}
    model, derived, other = twin_diff(a, b)
    assert set(model) == {"CONFIG_PREEMPT_RT", "CONFIG_PREEMPT"}
    assert derived == {"CONFIG_RCU_BOOST": ("y", "n")}
    assert other == {"CONFIG_HZ": ("1000", "250")}


needs_source = pytest.mark.skipif(
    not recipe.DEBIAN_SOURCE.exists() or shutil.which(f"{recipe.ARCHES['riscv64'].cross}gcc") is None,
    reason="make test installs linux-source-6.12 and gcc-riscv64-linux-gnu",
)


@pytest.mark.tools
@needs_source
def test_real_merge_gives_each_twin_exactly_its_model(tmp_path, kernel_cache):
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
            env={"RTLAB_CACHE": str(kernel_cache)},
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
    assert (kernel_cache / "kernel-src/linux-source-6.12/Makefile").exists()
    # the small base: other SoCs and ACPI gone, the board's own drivers and the PMIC kept
    for gone in ("CONFIG_ACPI", "CONFIG_ARCH_SUNXI", "CONFIG_SOUND", "CONFIG_NETFILTER"):
        assert configs["rt"].get(gone, "n") == "n", gone
    for kept in (
        "CONFIG_SOC_STARFIVE",
        "CONFIG_DWMAC_STARFIVE",
        "CONFIG_REGULATOR_AXP20X",
        "CONFIG_VIRTIO_BLK",
    ):
        assert configs["rt"][kept] == "y", kept

    # a fragment of the user's own is merged last and checked like the others
    own = tmp_path / "own.config"
    own.write_text("# CONFIG_HWLAT_TRACER is not set\n")
    env = {"RTLAB_CACHE": str(kernel_cache)}
    done = rtlab(
        "kernel", "build", "--config-only", "--fragment", str(own), "-o", str(tmp_path / "own"), env=env
    )
    assert done.returncode == 0, done.stderr
    assert parse_config((tmp_path / "own/.config").read_text()).get("CONFIG_HWLAT_TRACER", "n") == "n"
    # KVM needs VIRTUALIZATION, which the small base leaves out: named, not silently lost
    own.write_text("CONFIG_KVM=y\n")
    done = rtlab(
        "kernel", "build", "--config-only", "--fragment", str(own), "-o", str(tmp_path / "kvm"), env=env
    )
    assert done.returncode == 3 and "CONFIG_KVM=y (got n)" in done.stderr


@pytest.mark.tools
def test_the_x86_64_board_starts_from_tinyconfig_and_names_what_it_adds():
    assert fragments.select("qemu-x86_64", "rt") == [
        "small-x86_64", "rt", "tick-periodic", "qemu-x86_64", "tracing", "measurement",
    ]  # fmt: skip
    x86 = recipe.Request("qemu-x86_64", "rt").arch
    assert (x86.kernel, x86.cross, x86.target, x86.small) == ("x86", "", "bzImage", "tinyconfig")
    assert recipe.ARCHES["riscv64"].small == "defconfig" and recipe.ARCHES["riscv64"].target == "Image"
    added = fragments.requested([fragments.path("small-x86_64"), fragments.path("qemu-x86_64")])
    for needed in ("CONFIG_64BIT", "CONFIG_SMP", "CONFIG_PROC_SYSCTL", "CONFIG_BLK_DEV_INITRD",
                   "CONFIG_INET", "CONFIG_E1000", "CONFIG_SERIAL_8250_CONSOLE", "CONFIG_KEXEC"):  # fmt: skip
        assert added[needed] == "y", needed
    # an emulated x86_64 board's timer check panics about one boot in ten: skipped on its command line
    assert added["CONFIG_CMDLINE_BOOL"] == "y" and added["CONFIG_CMDLINE"] == "no_timer_check"


@pytest.mark.tools
@pytest.mark.skipif(
    not recipe.DEBIAN_SOURCE.exists() or shutil.which("gcc") is None,
    reason="make test installs linux-source-6.12 and gcc",
)
def test_the_x86_64_board_merges_onto_tinyconfig(tmp_path, kernel_cache):
    """The real merge: every option of the fragments kept, x86_64 and PREEMPT_RT, the board's
    devices built in, and none of the x86_64 defconfig's desktop (its size is the point)."""
    out = tmp_path / "x86"
    done = rtlab("kernel", "build", "--board", "qemu-x86_64", "--config-only", "-o", str(out),
                 env={"RTLAB_CACHE": str(kernel_cache)})  # fmt: skip
    assert done.returncode == 0, done.stderr
    config = parse_config((out / ".config").read_text())
    assert all(c.ok for c in checks(config, "rt")), checks(config, "rt")
    for kept in ("CONFIG_X86_64", "CONFIG_E1000", "CONFIG_KEXEC", "CONFIG_LOCALVERSION_AUTO", "CONFIG_ACPI"):
        assert config[kept] == "y", kept
    for gone in ("CONFIG_DRM", "CONFIG_SOUND", "CONFIG_USB_SUPPORT", "CONFIG_CFG80211", "CONFIG_MODULES"):
        assert config.get(gone, "n") == "n", gone
    assert sum(1 for v in config.values() if v == "y") < 1000  # x86_64_defconfig: about 1600
    assert read_json(out / "build-manifest.json")["request"]["arch"] == "x86_64"


def _fake_source(tmp_path: Path) -> Path:
    """A stand-in for /usr/src/linux-source-6.12.tar.xz: the few files the patches touch."""
    top = tmp_path / "src" / "linux-source-6.12"
    (top / "kernel").mkdir(parents=True)
    (top / "arch/riscv").mkdir(parents=True)
    (top / "Makefile").write_text("VERSION = 6\n")
    (top / "kernel/Kconfig.preempt").write_text("config PREEMPT\n\tbool\n")
    (top / "arch/riscv/Kconfig").write_text("config RISCV\n\tdef_bool y\n")
    tarball = tmp_path / "linux-source-6.12.tar.xz"
    subprocess.run(
        ["tar", "-cJf", str(tarball), "-C", str(tmp_path / "src"), "linux-source-6.12"], check=True
    )
    return tarball


def _diff(path: str, old: str, new: str) -> str:
    """A unified diff replacing a one-line-or-more file's text."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    body = [f"-{line}" for line in old_lines] + [f"+{line}" for line in new_lines]
    hunk = f"@@ -1,{len(old_lines)} +1,{len(new_lines)} @@\n"
    return f"--- a/{path}\n+++ b/{path}\n{hunk}" + "\n".join(body) + "\n"


@pytest.mark.tools
def test_rt_patch_series_makes_a_tree_of_its_own(tmp_path, monkeypatch):
    # Debian's source archives are not reachable from every machine: the series here is
    # a stand-in with the shape of debian/patches-rt (quilt, one patch compressed)
    monkeypatch.setattr(recipe, "DEBIAN_SOURCE", _fake_source(tmp_path))
    series = tmp_path / "patches-rt"
    series.mkdir()
    (series / "0001-lazy-core.patch").write_text(
        _diff(
            "kernel/Kconfig.preempt",
            "config PREEMPT\n\tbool\n",
            "config PREEMPT\n\tbool\nconfig PREEMPT_LAZY\n\tbool\n",
        )
    )
    riscv = _diff(
        "arch/riscv/Kconfig", "config RISCV\n\tdef_bool y\n", "config RISCV\n\tselect ARCH_HAS_PREEMPT_LAZY\n"
    )
    (series / "0002-riscv-lazy.patch.xz").write_bytes(lzma.compress(riscv.encode()))
    (series / "series").write_text("# the RT series\n0001-lazy-core.patch\n\n0002-riscv-lazy.patch.xz\n")
    cache = tmp_path / "cache"
    log = tmp_path / "log"

    plain = recipe.source(cache, None)
    chosen = patches.resolve(str(series), cache)
    patched = recipe.source(cache, None, chosen, log)
    assert patched != plain and patched.name == f"linux-source-6.12+rt-{chosen.digest}"
    assert fragments.source_has_lazy(patched) and not fragments.source_has_lazy(plain)
    assert (plain / "kernel/Kconfig.preempt").read_text() == "config PREEMPT\n\tbool\n"
    assert recipe.source(cache, None, chosen, log) == patched  # cached: applied once

    # a patch that does not apply is named, and leaves no tree that looks ready
    (series / "0003-broken.patch").write_text(_diff("Makefile", "VERSION = 5\n", "VERSION = 7\n"))
    (series / "series").write_text("0001-lazy-core.patch\n0003-broken.patch\n")
    broken = patches.resolve(str(series), cache)
    with pytest.raises(RunFailed, match=r"0003-broken.patch \(2 of 2\) does not apply"):
        recipe.source(cache, None, broken, log)
    assert not (cache / f"kernel-src/linux-source-6.12+rt-{broken.digest}").exists()

    (series / "series").write_text("0001-lazy-core.patch\nmissing.patch\n")
    done = rtlab("kernel", "build", "--config-only", "--rt-patches", str(series), "-o", str(tmp_path / "o"))
    assert done.returncode == 2 and "missing.patch" in done.stderr
    done = rtlab(
        "kernel", "build", "--rt-patches", "debian", "--source", str(tmp_path), "-o", str(tmp_path / "o")
    )
    assert done.returncode == 2 and "apply them to your --source tree yourself" in done.stderr


@pytest.mark.guests
@pytest.mark.slow
@needs_source
@pytest.mark.skipif(not shutil.which("qemu-system-riscv64"), reason="make test installs qemu-system-misc")
def test_full_rt_build_boots_in_qemu_and_measures(tmp_path):
    """The whole path of docs/riscv-rt-kernel.md: ~8 min from a clean cache on 2 CPUs
    (incremental afterwards: the default cache is used), then a short run in the guest."""
    out = tmp_path / "rt"
    done = rtlab("kernel", "build", "--board", "visionfive2", "--preempt", "rt", "-o", str(out))
    assert done.returncode == 0, done.stderr
    manifest = read_json(out / "build-manifest.json")
    board_dtbs = {f"dtbs/jh7110-starfive-visionfive-2-v1.{rev}.dtb" for rev in ("2a", "3b")}
    assert {"Image", ".config"} | board_dtbs <= set(manifest["outputs"])
    for name, digest in manifest["outputs"].items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest, name

    run = tmp_path / "run"
    target = f"qemu:kernel={out / 'Image'},arch=riscv64"
    done = rtlab(*run_args(run, "idle,cpu", "5s", "--target", target, settle="1s"))
    assert done.returncode == 0, done.stderr
    info = read_json(run / "sysinfo.json")
    assert "SMP PREEMPT_RT" in info["kernel"]["version"] and info["kernel"]["machine"] == "riscv64"
    assert info["derived"]["preemption"] == {
        "model": "PREEMPT_RT",
        "mode": None,
        "realtime": True,
        "source": "config",
    }
    assert info["config"]["options"]["CONFIG_HZ"] == "1000"  # the Image's own config reached the guest
    for load in ("idle", "cpu"):
        entry = read_json(run / "summary.json")["loads"][load]
        histogram = entry["histograms"]["merged"]
        assert entry["status"] == "complete"
        assert entry["merged"]["samples"] == sum(histogram["counts"]) > 0
        assert entry["merged"]["min_us"] == histogram["values"][0]


@pytest.mark.guests
@pytest.mark.slow
@needs_source
@pytest.mark.skipif(not shutil.which("qemu-system-riscv64"), reason="make test installs qemu-system-misc")
def test_the_rt_kernel_against_its_low_latency_twin_with_repeats(tmp_path):
    """docs/riscv-rt-kernel.md's comparison, shorter: the PREEMPT_RT build and its twin that
    differs only in the preemption model (both from the build cache after the test above),
    each measured three times in qemu-system-riscv64, then judged with intervals."""
    import json

    sides = {"rt": "rt", "lowlatency": "ll"}
    for preempt, name in sides.items():
        done = rtlab(
            "kernel", "build", "--board", "visionfive2", "--preempt", preempt, "-o", str(tmp_path / name)
        )
        assert done.returncode == 0, done.stderr
    diff = rtlab("kernel", "verify", str(tmp_path / "rt" / ".config"), str(tmp_path / "ll" / ".config"))
    assert "PREEMPT_RT" in diff.stdout + diff.stderr
    for name in sides.values():
        target = f"qemu:kernel={tmp_path / name / 'Image'},arch=riscv64"
        done = rtlab(
            *run_args(tmp_path / f"{name}-runs", "idle,cpu", "3s", "--target", target, "--repeat", "3")
        )
        assert done.returncode == 0, done.stderr
        for k in (1, 2, 3):
            info = read_json(tmp_path / f"{name}-runs" / f"repeat-{k}" / "sysinfo.json")
            model = info["derived"]["preemption"]["model"]
            assert (model == "PREEMPT_RT") is (name == "rt"), (name, model)
    runs = [str(tmp_path / f"{name}-runs") for name in sides.values()]
    done = rtlab("compare", *runs, "--labels", "Real-time,Low-latency", "--format", "json")
    assert done.returncode == 0, done.stderr
    verdicts = json.loads(done.stdout)["runs"][1]["verdicts"]
    assert verdicts["replicates"] == {"base": 3, "new": 3}, verdicts["replicates"]
    for load in ("idle", "cpu"):
        assert verdicts["loads"][load]["verdict"] in ("better", "worse", "same", "unknown")
    table = rtlab("compare", *runs, "--labels", "Real-time,Low-latency", "--format", "md")
    assert "| idle |" in table.stdout and "is the difference real?" in table.stdout
