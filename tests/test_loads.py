"""Loads beyond the StarFive five: a user's file (any command, stress-ng lists), the partial
cpu60 load, the OOM load in a guest, --idle-after-boot; bad files refused before anything runs."""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

import pytest

from conftest import (
    event_seen,
    needs_root,
    needs_tools,
    processes_in,
    processes_named,
    read_json,
    rtlab,
    run_args,
    start_rtlab,
    wait_for,
)
from rtlab.analysis.status import verify
from rtlab.plan import Plan
from rtlab.plan.loads import BUILTIN, DEFAULT_LOADS
from rtlab.rundir.disk import RawLoad
from rtlab.rundir.events import parse
from test_qemu import guests, needs_x86

USER_LOADS = """
[loads.spin]                      # any command, stopped with its process group
command = ["sh", "-c", "while :; do :; done"]
about = "one busy shell"

[loads.net]
stress-ng = ["--sock", "{workers}"]
on = "all"
"""


@pytest.mark.host
def test_builtin_loads_are_the_studies_stress_ng_lines():
    plan = Plan(loads=tuple(BUILTIN)).for_target("0-3", 4)
    argv = {name: plan.load_argv(name, scratch="/run/s") for name in BUILTIN}
    # stress-ng prints its throughput when it ends (--metrics-brief)
    timeout = ["--metrics-brief", "--timeout", f"{plan.settle_s + plan.duration_s + 30 + 2}s"]
    assert argv == {
        "idle": None,
        "cpu": ["stress-ng", "--matrix", "4", *timeout],
        "os": ["stress-ng", "--set", "4", *timeout],
        "memory": ["stress-ng", "--vm", "4", *timeout],
        "storage": ["stress-ng", "--dir", "4", "--temp-path", "/run/s", *timeout],
        "cpu60": ["stress-ng", "--cpu", "4", "--cpu-load", "60", *timeout],
        "cpu100": ["stress-ng", "--cpu", "4", "--cpu-load", "100", *timeout],
        "irq": ["stress-ng", "--sock", "4", "--timer", "4", *timeout],
        "oom": ["stress-ng", "--bigheap", "4", *timeout],
        "hackbench": ["hackbench", "-g", "4", "-l", "1000000000"],
        "kcompile": ["sh", "-c", BUILTIN["kcompile"].command[2], "kcompile", "/run/s", "4"],
    }
    # each probe measured beside the load: stress-ng outlives the agent's whole wait for it
    # (its duration, its start: 5 s, rtla's 60 s, and 30 s past it; rtla's SIGINT 10 s more),
    # so a slow probe is never left without its load
    probed = Plan(loads=("cpu",), probes=("timerlat", "oslat")).for_target("0-3", 4)
    seconds = (
        probed.settle_s
        + probed.duration_s
        + 30
        + 2
        + (probed.duration_s + 60 + 30 + 10)
        + (probed.duration_s + 5 + 30)
    )
    assert probed.load_argv("cpu", scratch="/run/s")[-2:] == ["--timeout", f"{seconds}s"]
    assert plan.load_prepare_argv("kcompile", scratch="/run/s")[-2:] == ["kcompile", "/run/s"]
    assert all(plan.load_prepare_argv(name, "/run/s") is None for name in BUILTIN if name != "kcompile")
    assert Plan().loads == DEFAULT_LOADS == ("idle", "cpu", "os", "memory", "storage")
    assert all(load.about for load in BUILTIN.values())


@pytest.mark.host
@needs_root
@needs_tools
def test_a_command_and_a_stress_ng_list_from_a_file(tmp_path):
    (tmp_path / "mine.toml").write_text(USER_LOADS)
    out = tmp_path / "mine"
    last = os.cpu_count() - 1
    done = rtlab(
        *run_args(out, "spin,net", "2s", "--loads-file", str(tmp_path / "mine.toml"), settle="1s"),
        *(["--rt-cpus", str(last)] if last else []),
    )
    assert done.returncode == 0, done.stderr
    assert {k: v["status"] for k, v in read_json(out / "run.json")["loads"].items()} == {
        "spin": "complete",
        "net": "complete",
    }
    spin = (out / "loads/spin/load.argv").read_text().splitlines()
    net = (out / "loads/net/load.argv").read_text().splitlines()
    house = "0" if last == 1 else f"0-{last - 1}"
    # the command runs on the housekeeping CPUs, as it was written; `on = "all"` loads everywhere
    assert spin == (["taskset", "-c", house] if last else []) + ["sh", "-c", "while :; do :; done"]
    assert net[:3] == ["stress-ng", "--sock", str(os.cpu_count())] and "--taskset" not in net
    for load in ("spin", "net"):
        assert (
            (out / f"loads/{load}/load.log")
            .read_text()
            .splitlines()[-1]
            .startswith("@rtlab load-process exit=")
        )
        assert "running_at_end=yes" in (out / f"loads/{load}/load.log").read_text()
    definitions = read_json(out / "run.json")["plan"]["load_definitions"]
    assert definitions["spin"]["command"] == ["sh", "-c", "while :; do :; done"]
    assert definitions["net"] == {
        "about": "",
        "check": "alive",
        "on": "all",
        "stress-ng": ["--sock", "{workers}"],
    }
    assert processes_named("sh", "taskset", "stress-ng", "cyclictest") == set()


@pytest.mark.host
@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[loads.x]\ncomand = ["a"]\n', "unknown key comand: use about, check, command, needs, on, prepare"),
        ("[loads.x]\ncommand = []\n", "command is empty: give the program and its arguments"),
        (
            '[loads.x]\ncommand = ["rtlab-no-such-program"]\n',
            "rtlab-no-such-program is not installed on local",
        ),
        ('[loads.cpu]\ncommand = ["true"]\n', "cpu is built in: give your load another name"),
        ('[loads.x]\nstress-ng = ["--cpu", "{cpus}"]\n', "only {workers}, {scratch} are filled in"),
        ('[loads.x]\nstress-ng = ["--cpu", "1", "--timeout", "9"]\n', "rtlab sets stress-ng's --timeout"),
        ('[loads.x]\ncommand = ["true"]\non = "rt"\n', 'use "housekeeping" or "all"'),
        ("[loads.x\n", "is not valid TOML"),
        ('[loads.x]\ncommand = ["sh", """-c\nx"""]\n', "holds a line break: write it on one line"),
        ('[loads.x]\nprepare = ["true"]\n', "prepare is for a load that runs something: add its command"),
        ('[loads.x]\ncommand = ["true"]\nneeds = ["rtlab-no-such-tool"]\n', "rtlab-no-such-tool is not"),
    ],
)
def test_a_bad_loads_file_is_one_line_and_nothing_runs(tmp_path, text, says):
    (tmp_path / "bad.toml").write_text(text)
    out = tmp_path / "never"
    done = rtlab("run", "--loads-file", str(tmp_path / "bad.toml"), "--duration", "1s", "--out", str(out))
    assert done.returncode == 2
    message = [line for line in done.stderr.splitlines() if line.startswith("rtlab:")]
    assert len(message) == 1 and says in message[0], done.stderr
    assert not out.exists()


def _cpu_seconds(group: int) -> float:
    """CPU time (user + system) of the live processes of a process group, from /proc/PID/stat."""
    ticks = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[2]) == group:  # fields after the name: state, ppid, pgrp, ...
                ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


@pytest.mark.host
@pytest.mark.alone
@pytest.mark.planted
@needs_root
@needs_tools
def test_cpu60_keeps_its_cpus_near_60_percent_busy(tmp_path):
    # Measured against cpu100 in the same run: on a machine a little busy with other work both
    # get less CPU than they ask, and the ratio of the two takes that other use out. Not when
    # the other work takes more than the 40 % cpu60 leaves: beside another measuring test
    # cpu100 got 47 % of the CPUs and cpu60 43 % (seen here), hence alone. Even alone, this
    # virtual machine once gave cpu100 59 % of its CPUs for those 4 s and cpu60 54 % before it
    # (nothing else of the suite ran: the VM's host took the rest, most likely), where alone
    # it gets 84 to 85 % (cyclictest and the agent have the rest): a cpu100 under 70 % says
    # the machine was not its own, and it is measured once more, with a warning; twice so fails.
    for attempt in (1, 2):
        busy, argv = _cpu60_and_cpu100(tmp_path / f"run-{attempt}")
        if busy["cpu100"] >= 0.7 or attempt == 2:
            break
        warnings.warn(f"measured again: cpu100 got {busy['cpu100']:.0%} of the CPUs ({busy})", stacklevel=2)
    assert busy["cpu100"] >= 0.7, f"cpu100 got {busy['cpu100']:.0%} of the CPUs twice: the machine was busy"
    assert busy["cpu60"] <= 0.75, f"cpu60 kept the CPUs {busy['cpu60']:.0%} busy"
    ratio = busy["cpu60"] / busy["cpu100"]
    assert 0.45 <= ratio <= 0.85, f"cpu60 used {ratio:.0%} of what cpu100 got ({busy})"
    assert "--cpu-load" in argv and argv[argv.index("--cpu-load") + 1] == "60"


def _cpu60_and_cpu100(out: Path) -> tuple[dict[str, float], list[str]]:
    """One run of cpu60 then cpu100: the share of the CPUs each load's own processes used over
    4 s of its measurement, and cpu60's command line."""
    proc = start_rtlab(*run_args(out, "cpu60,cpu100", "6s", settle="1s"))
    busy = {}
    for load in ("cpu60", "cpu100"):
        wait_for(lambda load=load: event_seen(out / "events", "measure-start", load=load), 120)
        group = int((out / f"loads/{load}/load.pid").read_text())
        # the load's own processes only: 4 s of them
        before, t0 = _cpu_seconds(group), time.monotonic()
        time.sleep(4)
        busy[load] = (_cpu_seconds(group) - before) / ((time.monotonic() - t0) * os.cpu_count())
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    return busy, (out / "loads/cpu60/load.argv").read_text().split("\n")


@pytest.mark.host
def test_an_oom_load_that_never_reached_out_of_memory_is_failed():
    data = {"num_threads": 1}
    end = {"exit": "0", "running_at_end": "yes", "oom_kills": "0"}
    raw = RawLoad(cyclictest=data, stressed=True, stress_end=end, check="oom-kill")
    assert verify("oom", raw, "complete", None) == (
        "failed",
        "the OOM killer killed nothing during the load: it never reached out of memory",
    )
    raw = RawLoad(cyclictest=data, stressed=True, stress_end={**end, "oom_kills": "-"}, check="oom-kill")
    assert verify("oom", raw, "complete", None)[0] == "failed"
    killed = RawLoad(cyclictest=data, stressed=True, stress_end={**end, "oom_kills": "3"}, check="oom-kill")
    assert verify("oom", killed, "complete", None) == ("complete", None)


@pytest.mark.guests
@needs_x86
def test_oom_and_irq_loads_in_a_guest_after_its_idle_time(tmp_path):
    out = tmp_path / "oom"
    # little memory, so the heaps reach the OOM killer early in the load: at 384M an emulated
    # guest on a busy host once measured its 4 s without a kill; alone here the kernel killed
    # 3 heaps in the load at 384M, 5 and 6 at 256M
    done = rtlab(
        *run_args(out, "oom,irq", "4s", "--target", "qemu:debian-rt,memory=256M", "--idle-after-boot", "20s"),
    )
    assert done.returncode == 0, done.stderr
    events = [e for e in map(parse, (out / "events").read_text().splitlines()) if e is not None]
    waited = next(e for e in events if e.kind == "boot-idle")
    first = next(e for e in events if e.kind == "load-start")
    # the first load starts 20 s after boot at the earliest (a guest slow to boot on a busy
    # host may be up that long already: then nothing is waited)
    assert float(waited.get("until")) == 20 <= float(first.get("t"))
    trailer = (out / "loads/oom/load.log").read_text().splitlines()[-1]
    kills = dict(f.split("=") for f in trailer.split()[2:])
    # the kernel killed the load's heaps, never cyclictest: its result is whole
    assert int(kills["oom_kills"]) >= 1 and kills["running_at_end"] == "yes"
    summary = read_json(out / "summary.json")
    assert summary["loads"]["oom"]["status"] == "complete"
    assert summary["loads"]["oom"]["merged"]["samples"] > 0
    # loopback is up in the guest: the socket stressor ran the whole load
    assert summary["loads"]["irq"]["status"] == "complete"
    assert guests() == set()


@pytest.mark.host
@needs_root
@needs_tools
def test_hackbench_runs_a_group_per_cpu_until_the_load_ends(tmp_path):
    """rteval's scheduler load: hackbench alive when the measurement ends, as many groups as
    CPUs (40 processes each), and nothing of it left once the run is over."""
    out = tmp_path / "run"
    done = rtlab(*run_args(out, "hackbench", "2s"))
    assert done.returncode == 0, done.stderr
    summary = read_json(out / "summary.json")
    assert summary["loads"]["hackbench"]["status"] == "complete", summary["loads"]["hackbench"]
    argv = (out / "loads/hackbench/load.argv").read_text().split("\n")
    assert argv[:3] == ["hackbench", "-g", str(os.cpu_count())]
    assert "running_at_end=yes" in (out / "loads/hackbench/load.log").read_text()
    assert not processes_in(out)


@pytest.mark.host
@needs_root
@needs_tools
def test_kcompile_builds_a_kernel_until_the_load_ends(tmp_path):
    """rteval's kernel-compile load: its tree unpacked (Debian's linux-source) and configured
    before the load starts, unmeasured; make still building when the measurement ends; the
    tree, the build and every process gone once the run is over."""
    out = tmp_path / "run"
    done = rtlab(*run_args(out, "kcompile", "2s"))
    assert done.returncode == 0, done.stderr
    summary = read_json(out / "summary.json")
    assert summary["loads"]["kcompile"]["status"] == "complete", summary["loads"]["kcompile"]
    log = (out / "loads/kcompile/load.log").read_text()
    prepared = log.index("@rtlab load-prepared seconds=")
    assert "configuring" in log[:prepared] and "defconfig" in log[:prepared]
    assert "running_at_end=yes" in log[prepared:]
    assert "kcompile: make failed" not in log
    assert not (out / "loads/kcompile/scratch").exists()
    assert not processes_in(out)


@pytest.mark.host
@needs_root
@needs_tools
def test_a_preparation_that_fails_fails_its_load_with_its_reason(tmp_path):
    """A load's preparation that fails: the load is failed with the preparation's last words,
    its command is never started, and the next load is measured as usual."""
    (tmp_path / "mine.toml").write_text(
        '[loads.data]\nprepare = ["sh", "-c", "echo cannot fetch the data set; exit 3"]\n'
        'command = ["sh", "-c", "touch started; sleep 60"]\n'
    )
    out = tmp_path / "run"
    done = rtlab(*run_args(out, "data,idle", "1s", "--loads-file", str(tmp_path / "mine.toml"), settle="1s"))
    assert done.returncode == 3, done.stderr  # a partial run: one load failed, one measured
    loads = read_json(out / "summary.json")["loads"]
    assert loads["data"]["status"] == "failed"
    said = "the load's preparation: sh exited with status 3: cannot fetch the data set"
    assert said in loads["data"]["reason"]
    assert loads["idle"]["status"] == "complete"
    assert not (out / "loads/data/started").exists()
    assert not processes_in(out)
