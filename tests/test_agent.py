"""The agent alone, under the shells boards have: busybox ash (with only busybox's
commands on PATH) and dash."""

from __future__ import annotations

import base64
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rtlab.agent
from conftest import AGENT, BUSYBOX, fake_sysfs, needs_root, needs_tools, processes_in, start_time
from rtlab.plan import GRACE_S, Plan
from rtlab.rundir.events import HOST_SAID, LOG_MARKS, Kind, parse

SHELLS = ["busybox-ash", "dash"]


def agent_cmd(shell: str, busybox_path: str, *args: str) -> tuple[list[str], dict[str, str]]:
    if shell == "dash":
        return ["dash", str(AGENT), *args], dict(os.environ)
    return [BUSYBOX or "busybox", "ash", str(AGENT), *args], {**os.environ, "PATH": busybox_path}


def fake_root(root: Path) -> dict[Path, bytes]:
    """/proc and /sys of a small RT board: realtime flag, version string, two governors."""
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/version").write_text("Linux version 6.6.20-rt25 #1 SMP PREEMPT_RT riscv64\n")
    (root / "proc/cmdline").write_text('console=ttyS0 isolcpus=1 note="quoted" back\\slash\n')
    (root / "proc/sys/kernel/hostname").write_text("visionfive2\n")
    (root / "proc/cpuinfo").write_text(
        "processor\t: 0\nisa\t: rv64imafdc\nuarch\t: sifive,u74-mc\n\n"
        "processor\t: 1\nisa\t: rv64imafdc\nuarch\t: sifive,u74-mc\n"
    )
    (root / "sys/kernel").mkdir(parents=True)
    (root / "sys/kernel/realtime").write_text("1\n")
    (root / "sys/devices/system/cpu").mkdir(parents=True)
    (root / "sys/devices/system/cpu/online").write_text("0-1\n")
    clock = root / "sys/devices/system/clocksource/clocksource0"
    clock.mkdir(parents=True)
    (clock / "current_clocksource").write_text("riscv_clocksource\n")
    (root / "proc/loadavg").write_text("0.52 0.31 0.12 1/97 321\n")
    (root / "etc/tuned").mkdir(parents=True)
    (root / "etc/tuned/active_profile").write_text("realtime\n")
    (root / "run").mkdir()
    (root / "run/.containerenv").write_text("")
    return fake_sysfs(root, {0: "powersave", 1: "schedutil"})


def _said(raw: bytes) -> bytes:
    """What json_str's string holds for RAW, as sed and tr made it: one trailing line break ends
    the last line (awk's record), the others and tabs become spaces, the other control
    characters go; every other byte is kept."""
    raw = raw[:-1] if raw.endswith(b"\n") else raw
    return bytes(b for b in raw.translate(None) if b >= 0x20 or b in b"\t\r\n").translate(
        bytes.maketrans(b"\t\r\n", b"   ")
    )


@pytest.mark.hostile
@pytest.mark.parametrize("shell", SHELLS)
@settings(max_examples=60, deadline=None)
@given(raw=st.binary(max_size=300).map(lambda b: b.replace(b"\0", b"")))
def test_any_bytes_are_one_json_string_of_what_they_said(shell, busybox_path, raw):
    # the agent's JSON writer takes what a board's files say: any bytes (a shell argument holds
    # no NUL) give one JSON string, in a UTF-8 locale too, and nothing on stderr
    script = AGENT.read_text()
    functions = script[script.index("JSON_AWK='") : script.index("\nMISSING=")]
    _, env = agent_cmd(shell, busybox_path)
    sh = ["dash"] if shell == "dash" else [BUSYBOX or "busybox", "ash"]
    done = subprocess.run(
        [*sh, "-c", functions + '\njson_str "$1"', "json_str", os.fsdecode(raw)],
        capture_output=True, env={**env, "LANG": "C.UTF-8"}, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    said = json.loads(done.stdout.decode("utf-8", "surrogateescape"))
    assert said.encode("utf-8", "surrogateescape") == _said(raw)


@pytest.mark.host
@pytest.mark.parametrize("shell", SHELLS)
def test_sysinfo_passes_a_boards_bytes_through_as_they_are_in_any_locale(shell, busybox_path, tmp_path):
    # firmware strings that are not UTF-8, control characters, quotes and backslashes: one
    # JSON document on stdout, nothing on stderr (which the host reads with it), the bytes
    # kept, line breaks and tabs made spaces and the other control characters dropped
    fake_root(tmp_path)
    dmi = tmp_path / "sys/class/dmi/id"
    dmi.mkdir(parents=True)
    (dmi / "sys_vendor").write_bytes(b'Vendor\xff\xfe\x80\xc3(\xe2\x82 "q" \\b\x01\x1b[31m\x7f\tend\r\nnext')
    (dmi / "product_name").write_bytes(b"x" * 200_000)  # a long value: no quadratic escaping
    cmd, env = agent_cmd(shell, busybox_path, "sysinfo")
    done = subprocess.run(
        cmd, capture_output=True, env={**env, "RTLAB_ROOT": str(tmp_path), "LANG": "C.UTF-8"}
    )
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    info = json.loads(done.stdout.decode("utf-8", "surrogateescape"))
    said = info["platform"]["dmi"]["sys_vendor"].encode("utf-8", "surrogateescape")
    assert said == b'Vendor\xff\xfe\x80\xc3(\xe2\x82 "q" \\b[31m\x7f end  next'
    assert info["platform"]["dmi"]["product_name"] == "x" * 200_000


@pytest.mark.host
@pytest.mark.parametrize("shell", SHELLS)
def test_sysinfo_is_json_and_records_missing_files(shell, busybox_path, tmp_path):
    fake_root(tmp_path)
    (tmp_path / "boot/extlinux").mkdir(parents=True)
    (tmp_path / "boot/extlinux/extlinux.conf").write_text("default l0\n")
    cmd, env = agent_cmd(shell, busybox_path, "sysinfo")
    done = subprocess.run(cmd, capture_output=True, text=True, env={**env, "RTLAB_ROOT": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["hostname"] == "visionfive2"
    assert info["kernel"]["realtime"] == "1"
    assert "PREEMPT_RT" in info["kernel"]["version"]
    assert info["kernel"]["cmdline"] == 'console=ttyS0 isolcpus=1 note="quoted" back\\slash'
    assert info["cpus"] == {
        "online": "0-1",
        "count": 2,
        "model": "sifive,u74-mc",
        "governors": {"0": "powersave", "1": "schedutil"},
        "cores": {"0": {"type": "sifive,u74-mc"}, "1": {"type": "sifive,u74-mc"}},
    }
    # A board without debugfs or a kernel config: recorded, not fatal.
    assert "/sys/kernel/debug/sched/preempt" in info["missing"]
    assert "/proc/config.gz" in info["missing"]
    assert info["kernel"]["preempt_mode"] is None
    # how a kernel can be booted there: the board's extlinux.conf (and kexec where the shell finds it)
    said = info["platform"].pop("boot_methods")
    assert said.removeprefix("kexec ") == "extlinux:/boot/extlinux/extlinux.conf", said
    # rteval's platform facts: the fake board's own files, none of DMI (a device-tree board)
    assert info["platform"] == {
        "dmi": dict.fromkeys(("sys_vendor", "product_name", "board_name", "bios_vendor", "bios_version",
                              "bios_date")),
        "clocksource": "riscv_clocksource", "load_average": "0.52 0.31 0.12 1/97 321",
        "tuned_profile": "realtime", "tuned_verifies": None, "container": "podman",
    }  # fmt: skip
    assert "/proc/loadavg" not in info["missing"]


def write_plan(run: Path, loads: dict[str, list[str] | None], seconds: int) -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / "plan.loads").write_text("".join(f"{name}\n" for name in loads))
    for name, stress in loads.items():
        folder = run / "loads" / name
        folder.mkdir(parents=True)
        argv = [
            "-m",
            "-S",
            "-p",
            "99",
            "-i",
            "200",
            "-q",
            "-D",
            str(seconds),
            "-h",
            "100000",
            "--histfile=/dev/null",
        ]
        (folder / "cyclictest.argv").write_text("\n".join(argv) + "\n")
        if stress is not None:
            (folder / "load.argv").write_text("\n".join(["stress-ng", *stress]) + "\n")


@pytest.mark.host
@needs_root
@needs_tools
@pytest.mark.parametrize("shell", SHELLS)
def test_run_measures_and_restores_governors(shell, busybox_path, tmp_path):
    root = tmp_path / "root"
    before = fake_root(root)
    # a board's power sensors (hwmon, µW); its /proc has no meminfo and no process status
    for n, microwatts in ((0, 1_500_000), (1, 500_000)):
        (root / f"sys/class/hwmon/hwmon{n}").mkdir(parents=True)
        (root / f"sys/class/hwmon/hwmon{n}/power1_input").write_text(f"{microwatts}\n")
    run = tmp_path / "run"
    write_plan(run, {"idle": None, "cpu": ["--matrix", "1", "--timeout", "30s"]}, seconds=1)
    cmd, env = agent_cmd(shell, busybox_path, "run", str(run), "--duration", "1", "--settle", "1")
    done = subprocess.run(
        cmd, capture_output=True, text=True, env={**env, "RTLAB_ROOT": str(root)}, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    events = [parse(line) for line in lines]
    assert [e.kind for e in events[:2]] == ["clock", "governor"] and events[1].get("status") == "set"
    assert events[-1].kind == "done" and events[-1].get("status") == "complete"
    assert (run / "events").read_text().splitlines() == lines
    # every event is on the target's clock since boot, in order, the wall clock once
    times = [float(e.get("t")) for e in events]
    assert times == sorted(times) and abs(times[0] - float(Path("/proc/uptime").read_text().split()[0])) < 60
    assert abs(int(events[0].get("wall")) - time.time()) < 60
    kinds = [(e.kind, e.get("load")) for e in events if e.get("load")]
    assert kinds == [
        (k, load)
        for load in ("idle", "cpu")
        for k in ("load-start", "measure-start", "measure-end", "resources", "load-end")
    ]
    # what the target lacks is a dash, never an error; the power is the sensors' sum, in mW
    used = next(e for e in events if e.kind == "resources")
    assert used.fields == {
        "t": used.get("t"), "load": "idle", "mem_total_kb": "-", "mem_available_min_kb": "-",
        "mem_free_min_kb": "-", "cyclictest_hwm_kb": "-", "power_mw": "2000", "power_sources": "2",
    }  # fmt: skip
    for load in ("idle", "cpu"):
        data = json.loads((run / "loads" / load / "cyclictest.json").read_text())
        assert data["num_threads"] == os.cpu_count()
        assert all(t["cycles"] > 0 for t in data["thread"].values())
    assert "@rtlab load-process exit=0 running_at_end=yes" in (run / "loads/cpu/load.log").read_text()
    assert {f: f.read_bytes() for f in before} == before
    assert not (run / "governors.saved").exists() and not (run / "agent.pid").exists()
    assert processes_in(run) == []


@pytest.mark.host
@needs_root
@needs_tools
@pytest.mark.parametrize("shell", SHELLS)
def test_a_run_has_put_everything_back_and_freed_the_lock_when_it_says_done(shell, busybox_path, tmp_path):
    """The host reads `done` as the end of the run (over SSH it stops listening there) and may
    start the next run on the system at once: by then the governors are back, the agent's pid
    file gone and the lock free, not a moment later in the agent's exit."""
    root = tmp_path / "root"
    before = fake_root(root)
    run, base = tmp_path / "run", tmp_path / "target"
    write_plan(run, {"idle": None}, seconds=1)
    cmd, env = agent_cmd(shell, busybox_path, "run", str(run), "--duration", "1", "--settle", "0")
    env = {**env, "RTLAB_ROOT": str(root), "RTLAB_TARGET_DIR": str(base)}
    agent = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    stuck = threading.Timer(60, agent.kill)  # a stuck agent ends its output, and the test
    stuck.start()
    try:
        seen = {}
        for said in agent.stdout:  # read as the agent prints each line
            event = parse(said)
            if event is not None and event.kind == "clock":
                seen["lock while measuring"] = (base / "lock").is_dir()
            if event is not None and event.kind == "done":
                # what the next run finds the moment the host has read `done`
                seen["lock"] = (base / "lock").exists()
                seen["agent.pid"] = (run / "agent.pid").exists()
                seen["governors"] = {f: f.read_bytes() for f in before} == before
                seen["status"] = event.get("status")
                break
        assert seen == {
            "lock while measuring": True,
            "lock": False,
            "agent.pid": False,
            "governors": True,
            "status": "complete",
        }
        assert agent.wait(30) == 0
    finally:
        stuck.cancel()
        if agent.poll() is None:
            agent.kill()
        agent.wait()
    assert processes_in(run) == []


@pytest.mark.host
def test_arguments_are_data_not_code(busybox_path, tmp_path):
    # load.argv lines reach the program as single arguments; nothing in them is run.
    run = tmp_path / "run"
    hostile = ["--dir", "1", "--temp-path", "$(touch pwned)", "; touch pwned2", "`touch pwned3`"]
    write_plan(run, {"storage": hostile}, seconds=1)
    (run / "loads/storage/cyclictest.argv").write_text("-l\n1\n-q\n")
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    # A stand-in stress-ng that records its argv: the real one would refuse these paths.
    (fake_bin / "stress-ng").write_text(
        '#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done > argv.seen\n'
    )
    (fake_bin / "stress-ng").chmod(0o755)
    cmd, env = agent_cmd("dash", busybox_path, "run", str(run), "--governor", "keep")
    env["PATH"] = f"{fake_bin}:{env['PATH']}"
    subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=30)
    seen = (run / "loads/storage/argv.seen").read_text().splitlines()
    assert seen == hostile
    assert not list(tmp_path.rglob("pwned*"))


@pytest.mark.host
@needs_root
@needs_tools
def test_stop_after_a_hard_kill_restores_governors(busybox_path, tmp_path):
    root = tmp_path / "root"
    before = fake_root(root)
    run = tmp_path / "run"
    write_plan(run, {"cpu": ["--matrix", "1", "--timeout", "60s"]}, seconds=60)
    cmd, env = agent_cmd("dash", busybox_path, "run", str(run), "--settle", "0")
    env["RTLAB_ROOT"] = str(root)
    agent = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
    assert agent.stdout is not None
    for line in agent.stdout:
        if line.startswith("@rtlab measure-start"):
            break
    assert all(f.read_text() == "performance\n" for f in before)
    agent.send_signal(signal.SIGKILL)  # a crash: no trap runs
    agent.wait()
    assert (run / "governors.saved").exists()
    stop = subprocess.run(
        [*agent_cmd("dash", busybox_path, "stop", str(run))[0]],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert stop.returncode == 0
    assert {f: f.read_bytes() for f in before} == before
    assert not (run / "governors.saved").exists()
    # cyclictest and stress-ng outlive a SIGKILLed agent only until their own -D/--timeout;
    # end them here rather than wait.
    for pid, _ in processes_in(run):
        os.kill(pid, signal.SIGKILL)
    if _group_alive(agent.pid):
        os.killpg(agent.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while processes_in(run) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_in(run) == []


@pytest.mark.host
@needs_root
@needs_tools
def test_stop_after_a_hard_kill_ends_a_loads_preparation(busybox_path, tmp_path):
    """A load's preparation running another program than the load (here sleep, the load
    stress-ng) is found and ended by `agent.sh stop` after the agent died with SIGKILL."""
    run = tmp_path / "run"
    write_plan(run, {"cpu": ["--matrix", "1", "--timeout", "60s"]}, seconds=60)
    (run / "loads/cpu/load.prepare.argv").write_text("sleep\n300\n")
    cmd, env = agent_cmd("dash", busybox_path, "run", str(run), "--settle", "0", "--governor", "keep")
    agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env, start_new_session=True)
    deadline = time.monotonic() + 20
    while not [c for _, c in processes_in(run) if c == "sleep"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [c for _, c in processes_in(run) if c == "sleep"], "the preparation never started"
    agent.send_signal(signal.SIGKILL)  # a crash: no trap runs
    agent.wait()
    assert (run / "loads/cpu/load.prepare.pid").exists()
    stop = subprocess.run([*agent_cmd("dash", busybox_path, "stop", str(run))[0]], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert stop.returncode == 0, stop.stdout + stop.stderr
    deadline = time.monotonic() + 10
    while processes_in(run) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_in(run) == []


@pytest.mark.host
@pytest.mark.parametrize("shell", SHELLS)
def test_stop_leaves_alone_a_process_that_took_the_agents_pid(shell, busybox_path, tmp_path):
    """agent.pid names the agent by its PID and its start time: once the agent died hard (or
    the board rebooted), a process that took its PID is another one, and `agent.sh stop` leaves
    it running; the process it does name is stopped."""
    run = tmp_path / "run"
    run.mkdir()
    other = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        cmd, env = agent_cmd(shell, busybox_path, "stop", str(run))
        (run / "agent.pid").write_text(f"{other.pid} {int(start_time(other.pid)) + 1}\n")
        stop = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        assert stop.returncode == 0, stop.stderr  # it had an agent to tell, which is gone
        time.sleep(0.5)
        assert other.poll() is None, "a process the agent never was got its stop"
        (run / "agent.pid").write_text(f"{other.pid} {start_time(other.pid)}\n")
        stop = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        assert stop.returncode == 0, stop.stderr
        assert other.wait(timeout=10) == -signal.SIGTERM
    finally:
        other.kill()
        other.wait()


# rtla as the agent meets it, for a tracefs that cannot exist here (a fake tree under
# RTLAB_ROOT): it changes an osnoise option and makes its instance with its tracer on, as rtla
# does, then either dies without undoing them ("die") or, on SIGINT, undoes them and ends as
# rtla does ("stop"), writing the signal it got into $FAKE_RTLA_SAID. Python, not sh: a
# non-interactive sh cannot trap SIGINT when it started ignored, as a background job's does.
FAKE_RTLA = """#!{python}
import os, pathlib, signal, sys, time
t = pathlib.Path(os.environ["RTLAB_ROOT"]) / "sys/kernel/tracing"
period = (t / "osnoise/period_us").read_text()
(t / "osnoise/period_us").write_text("500\\n")
(t / "instances/timerlat_hist").mkdir(exist_ok=True)
(t / "instances/timerlat_hist/current_tracer").write_text("timerlat\\n")
(t / "instances/timerlat_hist/tracing_on").write_text("1\\n")
if os.environ["FAKE_RTLA"] == "die":
    sys.exit("rtla: died")
def stop(signum, frame):
    pathlib.Path(os.environ["FAKE_RTLA_SAID"]).write_text(signal.Signals(signum).name)
    (t / "osnoise/period_us").write_text(period)
    for f in ("current_tracer", "tracing_on"):
        (t / "instances/timerlat_hist" / f).unlink()
    (t / "instances/timerlat_hist").rmdir()
    sys.exit(0)
signal.signal(signal.SIGINT, stop)
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.host
@needs_root
@needs_tools
@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("ending", ["die", "stop"])
def test_an_rtla_probe_leaves_tracefs_as_it_found_it(shell, busybox_path, tmp_path, ending):
    """An rtla probe that dies leaves its tracer on in its own instance (then no osnoise probe
    can start after a timerlat one, as in an emulated guest whose timerlat was killed) and the
    osnoise options it set: the agent saved them before and puts them back; a user's own
    instance is left alone. A run stopped during an rtla probe stops it with SIGINT, on which
    rtla undoes what it set (it dies of SIGTERM)."""
    root = tmp_path / "root"
    fake_root(root)
    tfs = root / "sys/kernel/tracing"
    files = {"trace_marker": "", "set_event": "sched:sched_switch\n", "tracing_on": "1\n",
             "current_tracer": "nop\n", "trace": "a user's trace\n", "trace_clock": "[mono]\n",
             "buffer_size_kb": "1408\n", "osnoise/period_us": "1000000\n",
             "osnoise/runtime_us": "900000\n", "instances/mine/current_tracer": "timerlat\n",
             "instances/mine/tracing_on": "1\n"}  # fmt: skip
    if ending == "die":
        # what an earlier rtla killed while starting left: its instance, no tracer on yet
        files |= {
            "instances/timerlat_hist/current_tracer": "nop\n",
            "instances/timerlat_hist/tracing_on": "0\n",
        }
    for name, text in files.items():
        (tfs / name).parent.mkdir(parents=True, exist_ok=True)
        (tfs / name).write_text(text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "rtla").write_text(FAKE_RTLA.replace("{python}", sys.executable))
    (bin_dir / "rtla").chmod(0o755)
    run = tmp_path / "run"
    write_plan(run, {"idle": None}, seconds=1)
    (run / "plan.probes").write_text("timerlat\n")
    (run / "loads/idle/timerlat").mkdir()
    (run / "loads/idle/timerlat/probe.argv").write_text("rtla\ntimerlat\nhist\n-d\n1\n")
    said = tmp_path / "said"
    cmd, env = agent_cmd(
        shell, busybox_path, "run", str(run), "--duration", "1", "--settle", "0", "--governor", "keep"
    )
    env.update(
        RTLAB_ROOT=str(root), FAKE_RTLA=ending, FAKE_RTLA_SAID=str(said), PATH=f"{bin_dir}:{env['PATH']}"
    )
    agent = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        out, _ = agent.communicate(timeout=60) if ending == "die" else ("", None)
        if ending == "stop":
            probe_out = run / "loads/idle/timerlat/probe.out"
            deadline = time.monotonic() + 30
            while "ready" not in (probe_out.read_text() if probe_out.exists() else ""):
                assert time.monotonic() < deadline, "the fake rtla never started"
                time.sleep(0.1)
            agent.send_signal(signal.SIGTERM)  # the host's stop
            out, _ = agent.communicate(timeout=60)
    finally:
        if agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
    ends = [parse(line) for line in out.splitlines() if line.startswith("@rtlab probe-end")]
    if ending == "die":
        assert [(e.get("status"), e.get("reason")) for e in ends] == [
            ("failed", "timerlat exited with status 1: rtla: died")
        ]
        # its instance was there before (no tracer on): turned off again, kept (one rtla made
        # is removed too, by rmdir, which a fake directory with files refuses)
    else:
        assert said.read_text() == "SIGINT" and [e.get("status") for e in ends] == ["partial"]
        assert not (tfs / "instances/timerlat_hist").exists()
    # as it was byte for byte: what rtla changed, a user's own instance and the top level
    for name, text in files.items():
        assert (tfs / name).read_text() == text, name
    assert not (run / "tracefs.saved").exists() and processes_in(run) == []


@pytest.mark.hostile
@given(st.text(max_size=300), st.text(max_size=300))
@settings(max_examples=200, deadline=None)
def test_tracefs_changes_of_any_text_are_a_list_of_strings(before, after):
    # a board's tracefs.before/.after, any bytes it wrote (buffer_size_kb "abc" raised before)
    from rtlab.rundir.ftrace import tracefs_changes

    for a, b in ((before, after), ("buffer_size_kb " + before, "buffer_size_kb " + after)):
        found = tracefs_changes(a, b)
        assert isinstance(found, list) and all(isinstance(x, str) for x in found)
    assert tracefs_changes(before, before) == []


@pytest.mark.unit
def test_tracefs_changes_compare_the_instances_as_a_set():
    from rtlab.rundir.ftrace import tracefs_changes

    before = "tracing_on 1\ninstance nop rtla_left\ninstance timerlat mine\nevent sched:sched_switch\n"
    assert tracefs_changes(before, "\n".join(reversed(before.splitlines()))) == []
    after = before.replace("instance nop rtla_left", "instance timerlat rtla_left")
    assert tracefs_changes(before, after) == ["the instances and their tracers"]
    assert tracefs_changes(before, before + "instance osnoise new\n") == ["the instances and their tracers"]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


@pytest.mark.host
def test_every_line_kind_the_agent_prints_is_one_the_host_knows():
    from rtlab.agent import names

    generated = names.variables()
    text = "\n".join(line for line in AGENT.read_text().splitlines() if not line.lstrip().startswith("#"))
    printed = {generated[v] for v in re.findall(r"\$(E_[A-Z_]+)", text)}
    marks = {generated[v] for v in re.findall(r"\$(M_[A-Z_]+)", text)}
    # the lines closing load.log, cyclictest.log, probe.log and (level a) rtla.out
    assert marks == set(LOG_MARKS)
    assert printed <= {kind.value for kind in Kind} - {str(k) for k in HOST_SAID}
    assert {"load-start", "load-end", "done", "busy", "result", "probe-end", "hwlat-end"} <= printed


def _agent_variable(name: str) -> str:
    """A single-quoted variable of the shipped agent."""
    text = AGENT.read_text()
    match = re.search(rf"^{name}='([^']*)'", text, re.MULTILINE)
    assert match, name
    return match.group(1)


@pytest.mark.host
def test_the_agent_collects_the_files_the_audit_and_knobs_read():
    from rtlab.system.knobs import RUNTIME_FILES

    assert _agent_variable("RUNTIME_FILES").split() == list(RUNTIME_FILES)


@pytest.mark.host
def test_the_agent_records_every_kernel_option_the_audit_judges():
    from rtlab.kernel.verify import MODEL_OPTIONS
    from rtlab.system.kernel import LATENCY_DEBUG_OPTIONS

    pattern = re.compile(_agent_variable("CONFIG_RE"))
    wanted = [*LATENCY_DEBUG_OPTIONS, "CONFIG_PREEMPT_RT", "CONFIG_HZ", "CONFIG_NO_HZ_FULL", *MODEL_OPTIONS]
    missed = [option for option in wanted if not pattern.match(f"{option}=y")]
    assert missed == []


@pytest.mark.host
@needs_root
@needs_tools
@pytest.mark.parametrize("shell", SHELLS)
def test_segments_are_whole_cyclictest_runs(shell, busybox_path, tmp_path):
    run = tmp_path / "run"
    write_plan(run, {"idle": None}, seconds=3)
    cmd, env = agent_cmd(shell, busybox_path, "run", str(run), "--duration", "3", "--segment", "2")
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    segments = run / "loads/idle/segments"
    # 2 s, then the 1 s left: each its own JSON, with its own -D
    assert sorted(p.name for p in segments.iterdir()) == ["001", "002", "complete"]
    assert (segments / "001/cyclictest.argv").read_text().endswith("-D\n2\n")
    assert (segments / "002/cyclictest.argv").read_text().endswith("-D\n1\n")
    for n in ("001", "002"):
        assert all(
            t["cycles"] > 0
            for t in json.loads((segments / n / "cyclictest.json").read_text())["thread"].values()
        )
    ends = [e for e in map(parse, done.stdout.splitlines()) if e.kind == "segment-end"]
    assert [(e.get("n"), e.get("status")) for e in ends] == [("1", "complete"), ("2", "complete")]
    assert (
        done.stdout.splitlines()[-1].startswith("@rtlab done")
        and "status=complete" in done.stdout.splitlines()[-1]
    )


@pytest.mark.host
def test_sysinfo_reads_the_config_without_a_temporary_file(tmp_path):
    """The kernel's config is streamed, never copied to a temporary file that an interrupted
    agent would leave behind ($TMPDIR/rtlab-config.* once): with no $TMPDIR to write in, every
    option is still read, and a writable one stays empty."""
    for tmpdir in (tmp_path / "absent", tmp_path):
        done = subprocess.run(["sh", str(AGENT), "sysinfo"], capture_output=True, text=True,
                              env={**os.environ, "TMPDIR": str(tmpdir)}, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        config = json.loads(done.stdout)["config"]
        if config["source"] is None:
            pytest.skip("this kernel offers no config (/proc/config.gz, /boot/config-*)")
        assert config["options"], config
    assert list(tmp_path.iterdir()) == []


# --- the contract: rtlab.agent.contract, rundir's names, the event kinds --------------------

_PARTS = sorted((Path(rtlab.agent.__file__).parent / "parts").glob("*.sh"))


def _code_lines() -> list[str]:
    """The agent's parts without their comments."""
    return [line.split(" #", 1)[0] for p in _PARTS for line in p.read_text().splitlines()
            if not line.lstrip().startswith("#")]  # fmt: skip


def _path_words(code: str, name: str) -> list[str]:
    """NAME spelled as a path component in CODE (`$DIR/loads/`, `"$ld/segments"`), but not as one of
    tracefs's or /proc's own files that share it ($t/trace, $tfs/trace, per_cpu/cpuN/trace,
    /proc/interrupts): those are the kernel's, not the run folder's."""
    word = re.escape(name)
    found = re.findall(rf"(\S*?)/{word}(?=[/\"*\s]|$)|(?<![\w$.{{-]){word}/", code, re.MULTILINE)
    kernel = re.compile(r"(\$\{?(t|tfs)\}?|/proc|/sys|per_cpu/cpu\$cpu|\$ROOT\S*)$")
    return [head for head in found if not kernel.search(head.strip('"'))]


@pytest.mark.unit
def test_the_agent_spells_no_run_folder_name_or_event_kind_by_hand():
    """Every run-folder name and event kind in the agent's parts is a generated variable
    ($F_<NAME>, $E_<KIND>, $M_<MARK>: rtlab.agent.names, from rundir/layout.py and
    rundir/events.py): a literal one fails here, as does a line for the host written without
    the two writers (emit, say)."""
    from rtlab.rundir import layout

    code = "\n".join(_code_lines())
    assert "@rtlab" not in code  # the writers' prefix is generated ($EVENT_MARK)
    writers = re.findall(r"\b(?:emit|say) +(\S+)", code)
    assert writers and [w for w in writers if not re.fullmatch(r'"\$[A-Za-z_]+"', w)] == []
    kinds = {k.value for k in Kind} | set(LOG_MARKS)
    spelled = {k for k in kinds if "-" in k and re.search(rf"(?<![\w$-]){re.escape(k)}(?![\w-])", code)}
    assert spelled == set()
    dotted = {r.name for r in layout.TABLE if "." in r.name.strip(".")}
    spelled = {n for n in dotted if re.search(rf"(?<![\w$.{{-]){re.escape(n)}(?![\w-])", code)}
    suffixes = {r.name for r in layout.TABLE if r.shape is layout.Shape.SUFFIX}
    spelled |= {s for s in suffixes if re.search(rf"{re.escape(s)}\b", code)}
    plain = {r.name for r in layout.TABLE if "." not in r.name}
    spelled |= {n for n in plain if _path_words(code, n)}
    assert spelled == set()
    assert not re.search(r"^\s*--[a-z-]+\) [A-Z_]+=\$2", code, re.MULTILINE)  # the generated parser's alone


@pytest.mark.unit
def test_the_agents_names_are_the_tables():
    """The two sides tied: every $F_, $E_ and $M_ the parts use is generated, with the table's
    value, and every name the table gives the agent is used by it (the run folder's events,
    segments/, trace/ and its captures, hwlat.trace and tracefs.* included)."""
    from rtlab.agent import names
    from rtlab.rundir import layout

    generated = names.variables()
    code = "\n".join(_code_lines())
    used = set(re.findall(r"\$\{?([FEM]_[A-Z0-9_]+)", code))
    assert used - set(generated) == set()
    rows = {r.variable: r.name for r in layout.agent_rows()}
    assert len(rows) == len(layout.agent_rows())  # one variable per row
    assert set(rows) - used == set(), "a row the agent never uses: agent=False"
    shipped = dict(re.findall(r"^([FEM]_[A-Z0-9_]+)='([^']*)'$", AGENT.read_text(), re.MULTILINE))
    assert {v: shipped[v] for v in rows} == rows
    assert {rows[v] for v in ("F_EVENTS", "F_SEGMENTS", "F_TRACE", "F_HWLAT_TRACE", "F_TRACEFS_BEFORE",
                              "F_TRACEFS_AFTER", "F_TRACE_EVENTS")} == {
        "events", "segments", "trace", "hwlat.trace", "tracefs.before", "tracefs.after"}  # fmt: skip
    assert generated["E_LOAD_END"] == "load-end" and generated["M_LOAD_PROCESS"] == "load-process"


@pytest.mark.unit
def test_the_docs_run_directory_is_the_tables():
    """Each path docs/run-folder.md's "The run directory" lists is a row of rundir/layout.py, in
    the folder the page puts it in, a folder there when the page ends it with /."""
    from rtlab.rundir import layout

    page = (Path(__file__).parents[1] / "docs" / "run-folder.md").read_text()
    section = page.split("\n## The run directory\n", 1)[1].split("\n#", 1)[0]
    block = section.split("```\n", 2)[1]
    paths = [line.split()[0] for line in block.splitlines() if line and not line.startswith(" ")]
    assert len(paths) >= 10, paths
    wrong = []
    for path in paths:
        folder, name = path.rstrip("/").rpartition("/")[::2]
        if name.startswith("<"):  # a probe's folder: named by the probe, not the table
            continue
        rows = [r for r in layout.TABLE if r.name == name and (folder + "/" if folder else "") in r.where]
        if len(rows) != 1 or rows[0].folder != path.endswith("/"):
            wrong.append(path)
    assert wrong == []


@pytest.mark.unit
@pytest.mark.parametrize("shell", SHELLS)
def test_the_generated_options_reach_the_agent_as_the_plan_says(shell):
    """The host's command line (contract.argv) parsed by the agent's generated parser: every
    variable holds the plan's value, and the defaults stand for what the plan leaves out."""
    from rtlab.agent import contract

    plan = Plan(duration_s=7, settle_s=3, governor="keep", segment_s=4, idle_after_boot_s=9,
                trace_us=250, trace_s=11, trace_spikes=5, trace_level="b")  # fmt: skip
    rows = contract.options()
    show = "; ".join(f'echo "{o.variable}=${o.variable}"' for o in rows)
    script = f'die() {{ echo "died: $*"; exit 2; }}\n{contract.part()}\nrun_options "$@"\n{show}\n'
    sh = ["dash"] if shell == "dash" else [BUSYBOX or "busybox", "ash"]
    done = subprocess.run([*sh, "-c", script, "sh", *contract.argv(plan), "--stream-results"],
                          capture_output=True, text=True)  # fmt: skip
    said = dict(line.split("=", 1) for line in done.stdout.splitlines())
    assert said == {
        "DURATION_S": "7", "SETTLE_S": "3", "GOVERNOR": "keep", "GRACE_S": str(GRACE_S), "SEGMENT_S": "4",
        "IDLE_AFTER_BOOT_S": "9", "TRACE_S": "11", "TRACE_US": "250", "TRACE_SPIKES": "5",
        "TRACE_LEVEL": "b", "CGROUP": "", "STREAM_RESULTS": "1",
    }  # fmt: skip
    plain = subprocess.run([*sh, "-c", script, "sh"], capture_output=True, text=True)
    defaults = dict(line.split("=", 1) for line in plain.stdout.splitlines())
    assert defaults == {o.variable: o.default for o in rows}
    bad = subprocess.run([*sh, "-c", script, "sh", "--secnds", "1"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stdout.strip() == "died: unknown option --secnds"
    # one name from the command line to the agent: each option the plan gives is a Plan field's
    from_plan = {o.name for o in rows if o.value} - {"grace_s"}  # grace_s: plan.GRACE_S, a constant
    assert from_plan <= set(Plan.__dataclass_fields__), from_plan - set(Plan.__dataclass_fields__)
    assert [o.flag for o in rows][:2] == ["--duration", "--settle"] and rows[0].variable == "DURATION_S"


@pytest.mark.unit
def test_cyclictests_argv_is_read_back_by_the_table_it_was_built_by(tmp_path):
    """A run whose run.json is damaged gets its plan back from cyclictest.argv, through the flag
    table Plan.cyclictest_argv built it with (plan.CYCLICTEST_FLAGS): the same numbers."""
    from rtlab.rundir import readback
    from rtlab.rundir.disk import RunDir

    numbers = {"duration_s": 42, "interval_us": 250, "priority": 80, "histogram_us": 5000, "block_us": 50_000}
    plan = Plan(loads=("idle",), **numbers)
    (tmp_path / "loads/idle").mkdir(parents=True)
    (tmp_path / "plan.loads").write_text("idle\n")
    (tmp_path / "loads/idle/cyclictest.argv").write_text("\n".join(plan.cyclictest_argv()) + "\n")
    (tmp_path / "run.json").write_text("{")
    manifest, _, _, problems = readback.read(RunDir(tmp_path))
    assert {k: manifest["plan"][k] for k in numbers} == numbers
    assert problems and "the plan is read from plan.loads and cyclictest.argv" in problems[0]


class _LocalAgent:
    """The agent under SHELL with RTLAB_ROOT at a folder: a target's files, each call counted."""

    name = "local agent"

    def __init__(self, shell: str, busybox_path: str, root: Path):
        self.shell, self.busybox_path, self.root, self.calls = shell, busybox_path, root, 0

    def agent(self, args: list[str]) -> tuple[int, str]:
        self.calls += 1
        cmd, env = agent_cmd(self.shell, self.busybox_path, *args)
        done = subprocess.run(cmd, capture_output=True, text=True, env={**env, "RTLAB_ROOT": str(self.root)})
        return done.returncode, done.stdout + done.stderr


@pytest.mark.tools
@pytest.mark.parametrize("shell", SHELLS)
def test_a_file_written_through_the_agent_arrives_whole_in_one_call_when_small(shell, busybox_path, tmp_path):
    from rtlab.system.files import AgentFiles

    target = _LocalAgent(shell, busybox_path, tmp_path)
    files = AgentFiles(target)
    small = "-m\n-p\n99\n$(touch pwned)\n'quoted' \\ é\n"
    files.write_text("/run/1/loads/idle/cyclictest.argv", small)
    assert target.calls == 1  # put64: written beside and renamed, in one shell
    large = "".join(f"line {i} ünïcode\n" for i in range(400))  # several chunks of base64
    files.write_text("/run/1/plan.loads", large)
    files.write_text("/run/1/plan.loads", large + "again\n")  # over an older file
    run = tmp_path / "run/1"
    assert (run / "loads/idle/cyclictest.argv").read_bytes() == small.encode()
    assert (run / "plan.loads").read_bytes() == (large + "again\n").encode()
    assert sorted(p.name for p in run.rglob("*.part")) == [] and not list(tmp_path.rglob("pwned"))
    # a run's plan: its small files together in one call, a large one in chunks beside them
    target.calls = 0
    plan = {f"/run/2/loads/{name}/cyclictest.argv": f"-m\n-a\n{i}\n" for i, name in enumerate("abcd")}
    files.write_texts({**plan, "/run/2/plan.loads": large, "/run/2/plan.probes": "\n"})
    chunks = -(-len(base64.b64encode(large.encode())) // AgentFiles.CHUNK)
    assert target.calls == 1 + chunks + 2  # the small five in one; the large: remove, appends, rename
    for path, text in {**plan, "/run/2/plan.loads": large, "/run/2/plan.probes": "\n"}.items():
        assert (tmp_path / path.lstrip("/")).read_bytes() == text.encode()
    # one that cannot be written (its folder is a file) ends the call: named, and no .part left
    (tmp_path / "run/3").mkdir(parents=True)
    (tmp_path / "run/3/loads").write_text("a file")
    with pytest.raises(OSError, match="run/3/loads/x/cyclictest.argv"):
        files.write_texts({"/run/3/plan.loads": "x\n", "/run/3/loads/x/cyclictest.argv": "-m\n"})
    assert (tmp_path / "run/3/plan.loads").read_text() == "x\n"
    assert not list(tmp_path.rglob("*.part"))
    assert target.agent(["file", "put64", "/run/3/odd"])[0] != 0  # a path without its content


def _cyclictest_json(cycles: list[int]) -> str:
    """cyclictest's --json output for threads with these cycle counts, one per CPU, laid out as
    rt-tests 2.x writes it (an average over no cycles is -nan)."""
    threads = {
        str(n): {"histogram": {"30": c} if c else {}, "cycles": c, "min": 30 if c else 1000000,
                 "max": 30 if c else 0, "avg": 30.0 if c else "NAN", "cpu": n, "node": 0}
        for n, c in enumerate(cycles)
    }  # fmt: skip
    document = {"file_version": 1, "num_threads": len(cycles), "thread": threads}
    return json.dumps(document, indent=2).replace('"NAN"', "-nan") + "\n"


@pytest.mark.unit
@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize(
    "segments",
    [[[5, 5]], [[5, 0]], [[0, 5, 0, 5]], [[0, 0]], [[0] * 6], [[5, 0], [5, 5]], [[5, 0], [0, 0]],
     [[0, 0, 0, 0, 0, 5], [5, 0]], [[0, 5]] * 5],
)  # fmt: skip
def test_the_agents_words_for_a_thread_without_samples_are_the_hosts(tmp_path, busybox_path, shell, segments):
    """A load (or a soak run's segments) with a thread that took no sample: the agent fails it
    in the words rtlab's own reading of the files gives (its load-end event is LAVA's result)."""
    from rtlab.rundir import cyclictest
    from rtlab.rundir.disk import RunDir

    text = AGENT.read_text()
    functions = "\n".join(re.search(rf"^{f}\(\) {{\n.*?^}}\n", text, re.M | re.S)[0]  # type: ignore[index]
                          for f in ("idle_threads", "segments_starved"))  # fmt: skip
    variables = "\n".join(re.search(rf"^{v}=.*$", text, re.M)[0] for v in ("F_SEGMENTS", "F_CYCLICTEST_JSON"))  # type: ignore[index]
    load = tmp_path / "run/loads/idle"
    load.mkdir(parents=True)
    soak = len(segments) > 1
    for n, cycles in enumerate(segments, 1):
        path = load / f"segments/{n:03d}/cyclictest.json" if soak else load / "cyclictest.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_cyclictest_json(cycles))
    call = f'segments_starved "{load}"' if soak else f'idle_threads "{load}/cyclictest.json"'
    argv, env = agent_cmd(shell, busybox_path)
    said = subprocess.run([*argv[:-1 if shell == "dash" else 2], "-c", f"{variables}\n{functions}\n{call}"],
                          capture_output=True, text=True, env=env, check=True).stdout.strip()  # fmt: skip
    if soak:  # the load is lost only when every segment is: then the host's reason is the agent's
        raw = RunDir(tmp_path / "run").raw_load("idle")
        assert said == (raw.problem or ""), raw
    else:  # the host's reading of the file, as the analysis checks it
        try:
            cyclictest.threads(cyclictest.read(load / "cyclictest.json"), 100)
            host = None
        except cyclictest.InvalidResult as e:
            host = str(e)
        assert (f"{cyclictest.FILE}: {said}" if said else None) == host


@pytest.mark.unit
@pytest.mark.parametrize("shell", SHELLS)
def test_a_tools_exit_is_named_a_signal_only_when_it_can_be_one(busybox_path, shell):
    # rt-migrate-test's failed check exits with -1, 255 to the shell: not "signal 127" (Linux
    # has 64 signals)
    function = re.search(r"^exit_text\(\) {\n.*?^}\n", AGENT.read_text(), re.M | re.S)
    assert function
    argv, env = agent_cmd(shell, busybox_path)
    calls = "; echo; ".join(f"exit_text tool {rc}" for rc in (1, 137, 192, 193, 255))
    done = subprocess.run([*argv[: -1 if shell == "dash" else 2], "-c", f"{function[0]}\n{calls}"],
                          capture_output=True, text=True, env=env, check=True)  # fmt: skip
    said = done.stdout.splitlines()
    assert said == ["tool exited with status 1", "tool exited with signal 9", "tool exited with signal 64",
                    "tool exited with status 193", "tool exited with status 255"]  # fmt: skip


@pytest.mark.tools
@pytest.mark.parametrize("shell", SHELLS)
def test_a_stop_as_a_nap_begins_ends_the_nap(shell, busybox_path):
    # The agent naps in a sleep it can end (a settle, an hwlat pass, its watch). A stop that
    # came as that sleep was forked was lost: before its pid was known (nothing to end), or in
    # the child before it had cleared the shell's handlers (the SIGTERM caught and dropped), and
    # the nap ran whole (1 Ctrl-C in 100 left an hwlat pass its 10 minutes). Stops sent at
    # random moments around the fork: every nap ends within seconds.
    functions = AGENT.read_text().split("# --- the command")[0]
    driver = "trap on_signal TERM\necho ready\nread -r _\npause 30\necho ended\n"
    cmd, env = agent_cmd(shell, busybox_path)
    cmd[-1:] = ["-c", functions + driver]
    slept = []
    for _ in range(150):
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)  # fmt: skip
        try:
            assert proc.stdout is not None and proc.stdin is not None
            assert proc.stdout.readline() == "ready\n"
            proc.stdin.write("\n")
            proc.stdin.flush()
            time.sleep(random.uniform(0, 0.004))
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            slept.append(proc.pid)
        finally:
            proc.kill()
            proc.wait()
    assert slept == []


@pytest.mark.tools
@pytest.mark.parametrize("shell", SHELLS)
def test_a_guests_run_folder_comes_home_without_the_loads_it_streamed(shell, busybox_path, tmp_path):
    # the QEMU target's last archive of the run folder, under a board's shells and busybox's tar
    import io
    import shutil
    import tarfile

    from rtlab.targets.qemu.folder import folder_but

    run = tmp_path / "run 1"
    names = ["events", ".agent.pid", "run.json", "loads/idle/cyclictest.json", "loads/cpu+io/load.log",
             "loads/c/trace/1/cpu0", "loads/.x/y", "loads/loads/z"]  # fmt: skip
    for name in names:
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_text(name)
    sh = [shutil.which("dash") or "dash"] if shell == "dash" else [BUSYBOX or "busybox", "ash"]

    def archived(command: str) -> tuple[int, dict[str, str]]:
        done = subprocess.run([*sh, "-c", command], capture_output=True, cwd=tmp_path,
                              env={**os.environ, "PATH": busybox_path})  # fmt: skip
        if done.returncode or not done.stdout:
            return done.returncode, {}
        with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tar:
            files = {m.name.removeprefix("./"): tar.extractfile(m).read().decode() for m in tar if m.isfile()}
        return done.returncode, files

    assert archived(folder_but(str(run), ["idle", "cpu+io"])) == (
        0, {n: n for n in names if not n.startswith(("loads/idle/", "loads/cpu+io/"))}
    )  # fmt: skip
    assert archived(folder_but(str(run), [])) == (0, {n: n for n in names})
    # a folder that is not there: an error, never the shell's own folder archived instead
    status, files = archived(folder_but(str(tmp_path / "gone"), []))
    assert status != 0 and files == {}


@pytest.mark.tools
@pytest.mark.parametrize("shell", SHELLS)
def test_dump_reads_in_one_call_what_read_reads_file_by_file(shell, busybox_path, tmp_path):
    from rtlab.system.files import AgentFiles, Root, exactly

    root = tmp_path / "root"
    texts = {
        "sys/a/cpu0/governor": b"schedutil\n",
        "sys/a/cpu1/governor": b"performance",  # no newline
        "sys/a/cpu2/governor": b"",
        "sys/a/.hidden/governor": b"not matched by a *\n",
        "proc/irq/10/list": b"0-3\nsecond line\n",
        "proc/irq/11/list": bytes(range(256)),  # any bytes: their text as read gives it
        "proc/odd [x]*/list": b"a name with glob characters\n",
    }
    for name, data in texts.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    (root / "proc/irq/12/list").mkdir(parents=True)  # there, not a file: read gives None
    target = _LocalAgent(shell, busybox_path, root)
    files = AgentFiles(target)
    patterns = ["/sys/a/*/governor", "proc/irq/*/list", exactly("/proc/odd [x]*/list"), "/none/*"]
    found = files.read_all(patterns)
    assert target.calls == 1
    here = Root(root).read_all(patterns)  # this machine's own files, read as text (\r\n made \n)
    assert {p: v for p, v in found.items() if p != "/proc/irq/11/list"} == {
        p: v for p, v in here.items() if p != "/proc/irq/11/list"
    }
    expected = {"/" + n for n in texts if ".hidden" not in n} | {"/proc/irq/12/list"}
    assert set(found) == expected
    for path, value in found.items():  # what each read of its own gives (this harness reads text)
        assert value == (
            texts["proc/irq/11/list"].decode(errors="replace") if "/11/" in path else files.read(path)
        )
    assert found["/sys/a/cpu1/governor"] == "performance" and found["/proc/irq/12/list"] is None
    # a call holds CHUNK characters of patterns: more go in more calls, none lost
    target.calls = 0
    many = [exactly(f"/proc/irq/{n}/list") for n in range(10, 13)] * 200
    assert files.read_all(many) == {
        p: found[p] for p in ("/proc/irq/10/list", "/proc/irq/11/list", "/proc/irq/12/list")
    }
    assert 1 < target.calls <= -(-sum(map(len, many)) // AgentFiles.CHUNK) + 1


@pytest.mark.tools
@pytest.mark.parametrize("shell", SHELLS)
def test_tunes_plan_through_the_agent_is_a_few_calls_and_the_same_as_read_file_by_file(
    shell, busybox_path, tmp_path
):
    from rtlab.system import tune
    from rtlab.system.files import AgentFiles, Root
    from test_tune import board

    root = tmp_path / "root"
    board(root, irqs=40)
    target = _LocalAgent(shell, busybox_path, root)
    files = AgentFiles(target)
    cpus = tune.cpu_plan(files, "2-3", None)
    target.calls = 0
    changes, unavailable = tune.plan(files, cpus)
    assert target.calls <= 2, target.calls  # was a call a file: 97 here
    assert (changes, unavailable) == tune.plan(Root(root), cpus)
    assert len([c for c in changes if c.knob == "irq-affinity"]) == 40
    # what the record reads back after a change: one call for every file
    target.calls = 0
    results = tune.apply(files, cpus, changes)
    target.calls = 0
    record = tune.readback(files, results)
    assert target.calls == -(-sum(len(c.path) for c in changes) // AgentFiles.CHUNK)
    assert [r["now"] for r in record] == [Root(root).read(c.path) for c in changes]
    assert all(r["now"] == c.new.strip() for r, c in zip(record, changes, strict=True) if c.knob != "thp")
