"""A result is either verified or visibly failed, with its reason: cyclictest crashing or
writing damaged JSON, stress-ng failing or ignoring SIGTERM, hangs, signals, a killed host,
concurrent runs, full and read-only disks, damaged run files, edge inputs, hostile names.

Real cyclictest and stress-ng wherever they can misbehave for real; small fakes (fakes.py)
first in PATH where they cannot. Every check of "nothing left running" looks only at the
processes this test session started (conftest.processes_named)."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import xml.etree.ElementTree as ET
from csv import DictReader
from pathlib import Path

import pytest

import fakes
from conftest import (
    TARGET_DIR,
    commands_left,
    event_seen,
    fake_sysfs,
    needs_root,
    needs_tools,
    processes_named,
    read_json,
    rtlab,
    run_args,
    start_rtlab,
    wait_for,
)
from rtlab.rundir.disk import RunDir
from rtlab.targets.local import LocalTarget

pytestmark = [pytest.mark.host, needs_root, needs_tools]
TOOLS = ("cyclictest", "stress-ng")


def events_say(run: Path, kind: str, **fields: str) -> bool:
    return event_seen(run / "events", kind, **fields)


def statuses(run: Path) -> dict[str, tuple[str, str | None]]:
    loads = read_json(run / "summary.json")["loads"]
    return {name: (entry["status"], entry["reason"]) for name, entry in loads.items()}


# --- 1, 2: cyclictest's output is checked before it counts ---------------------------


@pytest.mark.parametrize(
    "mode, reason",
    [
        ("segv", "cyclictest exited with signal 11"),
        ("truncated", "damaged cyclictest.json"),
        ("null", "cyclictest.json holds null"),
        ("nan", "cyclictest.json: no thread measured a sample"),
        ("bad-key", "histogram key 'abc'"),
        ("bad-cpu", 'has cpu "zero", not a count'),
        ("thread-list", "thread 0 is list, not an object"),
    ],
)
def test_bad_cyclictest_output_fails_its_load_and_spares_the_others(mode, reason, tmp_path):
    run = tmp_path / "run"
    env = {**fakes.install(tmp_path / "bin", cyclictest=mode), "FAKE_LOAD": "cpu"}
    done = rtlab(*run_args(run, "idle,cpu", "1s"), env=env)

    assert done.returncode == 3, done.stderr
    got = statuses(run)
    assert got["idle"] == ("complete", None)
    assert got["cpu"][0] == "failed" and reason in got["cpu"][1], got["cpu"]
    summary = read_json(run / "summary.json")
    assert summary["loads"]["cpu"]["merged"] is None  # no number it cannot vouch for
    assert summary["loads"]["idle"]["merged"]["samples"] > 0
    manifest = read_json(run / "run.json")
    assert manifest["status"] == "partial"
    assert manifest["loads"]["cpu"]["status"] == "failed" and reason in manifest["loads"]["cpu"]["reason"]
    assert reason in done.stdout + done.stderr
    # every later report of the run works and says why
    for fmt in ("table", "md", "csv", "json", "html", "junit"):
        again = rtlab("report", str(run), "--format", fmt)
        assert again.returncode == 0, (fmt, again.stderr)
        assert "failed" in again.stdout + again.stderr, fmt
    assert reason in rtlab("report", str(run)).stderr
    assert processes_named(*TOOLS) == set()


def stopped_before_its_first_cycle(path: Path) -> None:
    """Real cyclictest's JSON at PATH from two threads that took no sample."""
    proc = subprocess.Popen(
        ["cyclictest", "-q", "-m", "-t", "2", "-i", "1000000", "-D", "10", f"--json={path}"],
        stdout=subprocess.DEVNULL,
    )
    try:
        # its measurement threads exist: the handler is set, and their first wake-up is 1 s away
        wait_for(lambda: len(os.listdir(f"/proc/{proc.pid}/task")) >= 3, 10)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        proc.kill()


def test_a_load_whose_every_segment_had_a_starved_thread_says_so(tmp_path):
    """A board whose CPU is kept from cyclictest's thread for whole segments (an emulated
    riscv64 board on a busy host did, for every segment of a load): the load is failed, and
    its reason names each segment and thread, not a missing file: the files are there."""
    from rtlab.analysis.status import verify
    from rtlab.rundir import cyclictest, layout

    run = tmp_path / "run"
    folder = run / "loads" / "idle" / layout.SEGMENTS
    for n in ("001", "002"):
        (folder / n).mkdir(parents=True)
        stopped_before_its_first_cycle(folder / n / cyclictest.FILE)
    raw = RunDir(run).raw_load("idle")
    assert raw.segments_lost == ("001", "002") and raw.cyclictest is None
    each = "threads 0, 1 measured no samples"
    said = f"no segment left a whole result (001: {each}; 002: {each})"
    assert raw.problem == said
    assert verify("idle", raw, "complete", None) == ("failed", said)


def test_cyclictest_stopped_before_its_first_cycle_is_told_as_such_not_as_damaged(tmp_path):
    """Real cyclictest, stopped by SIGTERM after it set up its handler but before any thread's
    first wake-up (1 s away), writes its file with "avg": -nan for every thread. That is what an
    early Ctrl-C on a slow guest leaves: the load says it was stopped, not that a file was damaged."""
    from rtlab.analysis.status import verify
    from rtlab.rundir import cyclictest
    from rtlab.rundir.disk import RawLoad

    path = tmp_path / cyclictest.FILE
    stopped_before_its_first_cycle(path)
    assert path.read_text().count('"avg": -nan') == 2  # cyclictest's own spelling, not JSON
    data = cyclictest.read(path)
    assert cyclictest.idle_threads(data) == ["0", "1"]
    with pytest.raises(cyclictest.InvalidResult, match=cyclictest.NOTHING_MEASURED):
        cyclictest.threads(data, 400)
    raw = RawLoad(data, cyclictest.NOTHING_MEASURED)
    assert verify("idle", raw, "partial", None) == (
        "failed",
        "stopped before cyclictest had measured anything",
    )
    # not stopped: a run that measured nothing at all says that
    assert verify("idle", raw, "complete", None) == ("failed", cyclictest.NOTHING_MEASURED)
    # stopped a moment after one thread's first wake-up, before the other's (a slow guest): the
    # load is failed, and says it was stopped before every CPU was measured
    one = RawLoad(data, f"{cyclictest.FILE}: thread 1 (CPU 1) {cyclictest.NO_SAMPLES}")
    assert verify("idle", one, "partial", None) == (
        "failed",
        f"stopped before every CPU was measured: {cyclictest.FILE}: thread 1 (CPU 1) measured no samples",
    )
    assert verify("idle", one, "complete", None) == ("failed", one.problem)


def test_a_crashed_cyclictest_keeps_its_partial_file_apart(tmp_path):
    run = tmp_path / "run"
    env = {**fakes.install(tmp_path / "bin", cyclictest="segv"), "FAKE_LOAD": "idle"}
    assert rtlab(*run_args(run, "idle", "1s"), env=env).returncode == 3
    assert not (run / "loads/idle/cyclictest.json").exists()
    assert (run / "loads/idle/cyclictest.json.part").read_text().startswith('{"file_version"')
    assert "@rtlab cyclictest exit=139" in (run / "loads/idle/cyclictest.log").read_text()


# --- 3: a load whose stressor did not run is never complete ----------------------------


def test_stress_ng_refusing_its_arguments_fails_the_load_with_its_message(tmp_path):
    # an option stress-ng refuses (rtlab's own bounds stop a worker count stress-ng would)
    run = tmp_path / "run"
    loads = tmp_path / "loads.toml"
    loads.write_text(
        '[loads.badmatrix]\nstress-ng = ["--matrix", "{workers}", "--matrix-method", "nonexistent"]\n'
    )
    done = rtlab(*run_args(run, "badmatrix", "5s", "--loads-file", str(loads)))
    assert done.returncode == 3
    status, reason = statuses(run)["badmatrix"]
    assert status == "failed"
    assert "matrix-method must be one of" in reason  # stress-ng's own words
    assert read_json(run / "summary.json")["loads"]["badmatrix"]["merged"] is None
    # caught while measuring: the 5 s measurement was stopped at once
    assert "stress-ng ended after" in reason or "before measuring" in reason
    assert processes_named(*TOOLS) == set()


def test_stress_ng_dying_during_the_measurement_stops_it(tmp_path):
    run = tmp_path / "run"
    env = {**fakes.install(tmp_path / "bin", stress="die-after-2s"), "FAKE_LOAD": "memory"}
    started = time.monotonic()
    done = rtlab(*run_args(run, "memory", "30s"), env=env)
    assert done.returncode == 3
    assert time.monotonic() - started < 25  # not the whole 30 s of a load that was not there
    status, reason = statuses(run)["memory"]
    assert status == "failed" and "stress-ng ended after" in reason and "worker died" in reason


# --- 6: nothing hangs: watchdogs on every target ---------------------------------------


def test_a_cyclictest_that_never_ends_is_killed_and_the_next_load_goes_on(tmp_path):
    run = tmp_path / "run"
    env = {**fakes.install(tmp_path / "bin", cyclictest="hang"), "FAKE_LOAD": "idle"}
    done = rtlab(*run_args(run, "idle,cpu", "1s"), env=env, timeout=180)
    assert done.returncode == 3
    got = statuses(run)
    assert got["idle"][0] == "failed" and "no result 30 s after its planned end" in got["idle"][1]
    assert got["cpu"] == ("complete", None)
    assert processes_named(*TOOLS) == set()


def test_ctrl_c_reaches_a_run_whose_tools_ignore_sigterm(tmp_path):
    run = tmp_path / "run"
    env = {
        **fakes.install(tmp_path / "bin", cyclictest="hang", stress="ignore-term"),
        "FAKE_LOAD": "cpu",
    }
    proc = start_rtlab(*run_args(run, "cpu,idle", "60s"), env=env)
    wait_for(lambda: events_say(run, "measure-start", load="cpu"))
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)  # SIGTERM ignored: SIGKILL after 10 s each
    assert proc.returncode == 3 and "interrupted" in stderr
    assert read_json(run / "run.json")["status"] in ("partial", "failed")
    assert statuses(run)["cpu"][0] == "failed"
    assert statuses(run)["idle"][0] == "not-run"
    assert processes_named(*TOOLS) == set()


# --- 7, 8: every exit path leaves a run directory that says how it ended ----------------


def test_sigkill_of_rtlab_ends_the_measurement_and_report_says_so(tmp_path):
    run = tmp_path / "run"
    proc = start_rtlab(*run_args(run, "cpu,idle", "60s"))
    wait_for(lambda: events_say(run, "measure-start", load="cpu"))
    time.sleep(1.5)
    proc.kill()
    proc.communicate(timeout=10)
    # the agent is told by the kernel (parent-death signal) and stops in order
    wait_for(lambda: events_say(run, "done"), 30)
    wait_for(lambda: not _agents_of(run) and not processes_named(*TOOLS), 30)
    assert read_json(run / "run.json")["status"] == "running"  # nobody was left to write it
    report = rtlab("report", str(run))
    assert report.returncode == 0
    assert "the host process ended without finishing this run" in report.stderr
    assert "cpu" in report.stdout and "partial" in report.stdout


def _agents_of(run: Path) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(run) in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.add(int(entry.name))
            except OSError:
                pass
    return found


def test_sigkill_of_the_agent_leaves_no_tool_running(tmp_path):
    run = tmp_path / "run"
    proc = start_rtlab(*run_args(run, "cpu,idle", "60s"))
    wait_for(lambda: events_say(run, "measure-start", load="cpu"))
    agent = int((run / "agent.pid").read_text().split()[0])
    os.kill(agent, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 3, stderr
    assert processes_named(*TOOLS) == set()
    assert read_json(run / "run.json")["status"] != "running"


def test_sighup_is_treated_like_sigterm(tmp_path):
    run = tmp_path / "run"
    proc = start_rtlab(*run_args(run, "idle", "60s"))
    wait_for(lambda: events_say(run, "measure-start", load="idle"))
    time.sleep(1)
    proc.send_signal(signal.SIGHUP)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 3 and "interrupted" in stderr
    assert read_json(run / "run.json")["status"] == "partial"
    assert statuses(run)["idle"][0] == "partial"
    assert processes_named(*TOOLS) == set()


def test_sigint_before_the_agent_starts_says_so(tmp_path):
    slow = tmp_path / "bin"
    slow.mkdir()
    real = shutil.which("cyclictest")
    # the preflight asks cyclictest its version: make that slow enough to interrupt
    (slow / "cyclictest").write_text(
        f'#!/bin/sh\ncase "$*" in *--help*) sleep 30 ;; esac\nexec {real} "$@"\n'
    )
    (slow / "cyclictest").chmod(0o755)
    run = tmp_path / "run"
    proc = start_rtlab(*run_args(run, "idle", "5s"), env={"PATH": f"{slow}:{os.environ['PATH']}"})
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 3
    said = [line for line in stderr.splitlines() if line.startswith("rtlab:")]
    assert said == ["rtlab: interrupted before measuring began: nothing was measured"], stderr
    assert not (run / "run.json").exists() or read_json(run / "run.json")["status"] != "running"


# --- 9: one run measures at a time -------------------------------------------------------


def test_a_second_run_is_refused_while_one_measures(tmp_path):
    first = tmp_path / "first"
    proc = start_rtlab(*run_args(first, "idle", "6s"))
    wait_for(lambda: events_say(first, "measure-start"))
    second = rtlab(*run_args(tmp_path / "second", "idle", "1s"))
    assert second.returncode == 2
    agent = (first / "agent.pid").read_text().split()[0]
    assert f"another rtlab run (first, pid {agent})" in second.stderr
    assert not (tmp_path / "second").exists()
    proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert not (TARGET_DIR / "lock").exists()  # released


def test_two_runs_started_at_the_same_instant_one_measures_the_other_is_refused(tmp_path):
    # both may pass preflight before either takes the lock: the one that loses is refused as
    # a run started later is (exit 2, the other run and its PID named), and leaves no folder
    outs = [tmp_path / "left", tmp_path / "right"]
    procs = [start_rtlab(*run_args(out, "idle", "2s")) for out in outs]
    done = [(proc, *proc.communicate(timeout=120)) for proc in procs]
    codes = sorted(proc.returncode for proc, _, _ in done)
    assert codes == [0, 2], [stderr for _, _, stderr in done]
    loser = next(i for i, (proc, _, _) in enumerate(done) if proc.returncode == 2)
    winner = outs[1 - loser]
    said = done[loser][2]
    assert re.search(rf"another rtlab run \({winner.name}, pid \d+\) is measuring", said), said
    assert said.strip().splitlines()[-1].startswith("rtlab: another rtlab run") and "Traceback" not in said
    assert not outs[loser].exists()
    assert read_json(winner / "run.json")["status"] == "complete"


def test_a_stale_lock_is_not_busy(tmp_path):
    lock = TARGET_DIR / "lock"
    lock.mkdir()
    try:
        # a PID that is alive (this test) but started at another time than recorded: reused
        (lock / "owner").write_text(f"{os.getpid()} 1 /somewhere/old-run\n")
        done = rtlab(*run_args(tmp_path / "run", "idle", "1s"))
        assert done.returncode == 0, done.stderr
        # and one whose PID is gone
        lock.mkdir()
        (lock / "owner").write_text("999999999 1 /somewhere/older-run\n")
        done = rtlab(*run_args(tmp_path / "run2", "idle", "1s"))
        assert done.returncode == 0, done.stderr
    finally:
        shutil.rmtree(lock, ignore_errors=True)


def test_default_run_folders_started_in_the_same_second_do_not_collide(tmp_path):
    base = tmp_path / "results" / "20261122-101010-host-6.1.0"
    made: list[Path] = []
    threads = [threading.Thread(target=lambda: made.append(RunDir.create_new(base).path)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(made)) == 8
    assert sorted(p.name for p in made)[0] == base.name


# --- 10: disks that are full, read-only or not folders -----------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A 6 MiB tmpfs of the test's own."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "rtlab-test", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_too_little_space_is_refused_before_measuring(small_disk):
    (small_disk / "filler").write_bytes(b"\0" * (4 * 1024 * 1024))
    done = rtlab(*run_args(small_disk / "run", "idle", "1s"))
    assert done.returncode == 2
    assert "KiB free" in done.stderr and "free some space" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (small_disk / "run").exists()


def test_disk_full_mid_run_fails_with_what_was_measured_kept(small_disk):
    run = small_disk / "run"
    proc = start_rtlab(*run_args(run, "idle,cpu", "3s"))
    try:
        wait_for(lambda: events_say(run, "load-end", load="idle"))
        # unbuffered: a buffered file would fail again when it is closed on the full disk
        with (small_disk / "filler").open("wb", buffering=0) as f:  # fill the disk to the last byte
            try:
                while True:
                    f.write(b"\0" * 65536)
            except OSError:
                pass
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # never leave the run holding the lock for the tests after this one
            proc.kill()
            proc.wait()
    assert proc.returncode == 3, stderr
    assert "Traceback" not in stderr
    assert "No space left on device" in stderr or "failed" in stderr
    (small_disk / "filler").unlink()
    # what was measured before the disk filled is still reportable
    report = rtlab("report", str(run), "--format", "json")
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["loads"]["idle"]["merged"]["samples"] > 0


def test_read_only_folder_and_out_under_a_file(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "rtlab-test", str(ro)], check=True)
    try:
        done = rtlab(*run_args(ro / "run", "idle", "1s"))
        assert done.returncode == 2 and "Read-only file system" in done.stderr and "--out" in done.stderr
    finally:
        subprocess.run(["umount", "-l", str(ro)], check=False)
    (tmp_path / "file").write_text("x")
    done = rtlab(*run_args(tmp_path / "file" / "run", "idle", "1s"))
    assert done.returncode == 2 and "is a file, not a folder" in done.stderr
    assert "Traceback" not in done.stderr


# --- a finished run, for the report cases ------------------------------------------------


@pytest.fixture(scope="module")
def finished(idle_cpu_run) -> Path:
    return idle_cpu_run


def test_report_into_a_missing_folder_is_one_line(finished, tmp_path):
    done = rtlab("report", str(finished), "--format", "html", "-o", str(tmp_path / "nope" / "r.html"))
    assert done.returncode == 2
    assert "create its folder first" in done.stderr and "Traceback" not in done.stderr


# --- 11: damaged run files ---------------------------------------------------------------


@pytest.mark.parametrize(
    "damage, named",
    [
        ("run.json", "copy/run.json: "),
        ("sysinfo.json", "copy/sysinfo.json: "),
        ("events", None),
    ],
)
def test_a_damaged_file_is_named_and_the_loads_still_reported(finished, tmp_path, damage, named):
    run = tmp_path / "copy"
    shutil.copytree(finished, run)
    text = (run / damage).read_text()
    (run / damage).write_text(text[: len(text) // 2])  # cut off in the middle
    done = rtlab("report", str(run), "--format", "json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["loads"]["idle"]["merged"]["samples"] > 0
    assert summary["loads"]["cpu"]["merged"]["samples"] > 0
    if named:
        assert any(f"damaged {tmp_path}/{named}" in w["message"] for w in summary["warnings"])
    else:  # a cut-off events file: no load is "comp"lete; the cut one is partial, and says why
        assert {e["status"] for e in summary["loads"].values()} <= {"complete", "partial"}
        assert all(e["status"] in ("complete", "partial", "failed") for e in summary["loads"].values())
    table = rtlab("report", str(run))
    assert table.returncode == 0 and "Traceback" not in table.stderr


# --- 12: edge inputs ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        (["--duration", "99999999999999999999h"], "bad duration"),
        (["--duration", "4294967297s"], "it must be at most 366d"),
        (["--interval", "5s"], "too long"),
        (["--duration", "1s", "--interval", "2s"], "too long"),
        (["--histogram-range", "100s"], "it must be at most 60s"),
        (["--out", ""], "--out is empty"),
    ],
)
def test_edge_inputs_are_refused_with_the_fix(args, message, tmp_path):
    done = rtlab("run", "--loads", "idle", *args, cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_too_few_samples_are_warned_about(finished):
    summary = read_json(finished / "summary.json")
    samples = summary["loads"]["idle"]["merged"]["samples"]
    codes = {w["code"] for w in summary["warnings"] if w["load"] == "idle"}
    assert ("few-samples" in codes) == (samples < 10_000)
    slow = finished.parent / "slow"
    done = rtlab(*run_args(slow, "idle", "2s", "--interval", "100ms"))
    assert done.returncode == 0
    # at most 20 wake-ups a CPU, one fewer where a busy host cut the first short (39 seen): the
    # warning gives the run's own count
    said = re.search(r"only (\d+) samples", done.stderr)
    samples = read_json(slow / "summary.json")["loads"]["idle"]["merged"]["samples"]
    assert said is not None and int(said.group(1)) == samples, done.stderr
    assert 0 < samples <= 20 * (os.cpu_count() or 1)


# --- 13: every string is data ---------------------------------------------------------------


def test_hostile_names_are_shown_as_written(tmp_path):
    root = tmp_path / "root"
    fake_sysfs(root, {0: "[/x]", 1: "[red]gov"})
    run = tmp_path / "[red]runs" / "r"
    name = "[/x] $\\foo$ <script>alert(1)</script>"
    done = rtlab(*run_args(run, "idle", "1s", "--name", name), env={"RTLAB_ROOT": str(root)})
    assert done.returncode == 0, done.stderr
    assert f"run saved in {run}" in done.stderr
    # an escape cannot come from --name (refused: test_boundary), but a run folder from
    # elsewhere can carry one in its id
    manifest = read_json(run / "run.json")
    manifest["id"] = name + " \x1b[31m"
    (run / "run.json").write_text(json.dumps(manifest))
    assert read_json(run / "sysinfo.json")["cpus"]["governors"]["0"] == "[/x]"
    for fmt in ("table", "md", "html", "junit", "csv", "json"):
        out = tmp_path / f"report.{fmt}"
        shown = rtlab("report", str(run), "--format", fmt, "-o", str(out))
        assert shown.returncode == 0, (fmt, shown.stderr)
    assert "[/x]" in rtlab("report", str(run)).stdout
    md = (tmp_path / "report.md").read_text()
    assert "<script>" not in md and "&lt;script&gt;" in md
    html = (tmp_path / "report.html").read_text()
    assert "<script>alert" not in html and "\\foo" in html
    junit = ET.parse(tmp_path / "report.junit")  # well-formed despite the ESC character
    assert junit.getroot().find("testsuite").get("name").startswith("rtlab [/x]")


def test_terminal_compare_warns_about_different_loads(finished, tmp_path):
    other = tmp_path / "other"
    assert rtlab(*run_args(other, "idle", "1s")).returncode == 0
    done = rtlab("compare", str(finished), str(other))
    assert done.returncode == 0
    assert "runs measured different loads" in done.stderr


# --- a load that daemonises -----------------------------------------------------------------

DAEMON_LOADS = """
[loads.daemon]
command = ["sh", "-c", "setsid sleep 3001 & setsid sh -c 'sleep 3002 & exit'; sleep 3003"]
about = "a command that daemonises twice (setsid, a double fork), then waits"
"""


@pytest.mark.parametrize("track", ["cgroup", "mark"])
def test_a_daemonising_load_is_stopped_with_its_load_and_named(tmp_path, track):
    # its own cgroup where the target has one; else the mark in its processes' environment
    loads = tmp_path / "loads.toml"
    loads.write_text(DAEMON_LOADS)
    env = {"RTLAB_LOAD_CGROUPS": ""} if track == "mark" else {}
    out = tmp_path / "run"
    done = rtlab(*run_args(out, "daemon", "2s", "--loads-file", str(loads)), env=env)
    assert done.returncode == 0, done.stderr
    assert processes_named("sleep", "sh") == set()
    summary = read_json(out / "summary.json")
    assert summary["loads"]["daemon"]["status"] == "complete"
    said = [w["message"] for w in summary["warnings"] if w["code"] == "load-left-behind"]
    assert said and "sleep,sleep" in said[0], summary["warnings"]
    assert (
        not (out / "loads/daemon/load.cgroup").exists()
        or not Path((out / "loads/daemon/load.cgroup").read_text().strip()).exists()
    )  # the cgroup went with the load


def test_ctrl_c_and_a_killed_agent_leave_no_daemon_of_a_load(tmp_path):
    loads = tmp_path / "loads.toml"
    loads.write_text(DAEMON_LOADS)
    for stop in (signal.SIGINT, signal.SIGKILL):
        out = tmp_path / f"run-{stop.name}"
        proc = start_rtlab(*run_args(out, "daemon", "60s", "--loads-file", str(loads)))
        wait_for(lambda out=out: events_say(out, "measure-start"))
        wait_for(lambda: len(processes_named("sleep")) >= 3)
        if stop == signal.SIGKILL:  # the agent killed hard: `agent.sh stop` finds what it left
            os.kill(int((out / "agent.pid").read_text().split()[0]), signal.SIGKILL)
        else:
            proc.send_signal(stop)
        proc.communicate(timeout=120)
        wait_for(lambda: processes_named("sleep", "sh") == set(), 30)


def test_a_load_ignoring_sigterm_at_its_end_is_complete_with_a_warning(tmp_path):
    # it ran the whole measurement: the numbers stand; that it had to be killed is said
    run = tmp_path / "run"
    env = {**fakes.install(tmp_path / "bin", stress="ignore-term"), "FAKE_LOAD": "cpu"}
    done = rtlab(*run_args(run, "cpu", "2s"), env=env)
    assert done.returncode == 0, done.stderr
    summary = read_json(run / "summary.json")
    assert summary["loads"]["cpu"]["status"] == "complete"
    assert any(w["code"] == "load-ignored-sigterm" for w in summary["warnings"]), summary["warnings"]
    assert processes_named(*TOOLS) == set()


def test_a_failed_load_shows_no_throughput(tmp_path):
    run = tmp_path / "run"
    env = {**fakes.install(tmp_path / "bin", stress="die-after-2s"), "FAKE_LOAD": "cpu"}
    done = rtlab(*run_args(run, "cpu", "4s"), env=env)
    assert done.returncode == 3
    entry = read_json(run / "summary.json")["loads"]["cpu"]
    assert entry["status"] == "failed" and entry["throughput"]["ops_per_s"] is None
    csv = rtlab("report", str(run), "--format", "csv").stdout
    row = next(r for r in DictReader(io.StringIO(csv)) if r["load"] == "cpu" and r["cpu"] == "all")
    assert row["status"] == "failed" and row["ops_per_s"] == ""


class _CtrlC(BaseException):
    pass


def test_ctrl_c_at_any_instant_of_an_agent_call_leaves_nothing_of_it_running():
    """Ctrl-C raises wherever rtlab is: also in the instant between the agent's fork and Popen's
    return, which once left an interrupted preflight's cyclictest running after rtlab had ended."""
    target = LocalTarget()

    def ctrl_c(_signum, _frame):
        raise _CtrlC

    previous = signal.signal(signal.SIGINT, ctrl_c)
    interrupted = 0
    try:
        for step in range(60):  # from before the fork to well into the preflight's own commands
            timer = threading.Timer(step * 0.0005, os.kill, (os.getpid(), signal.SIGINT))
            try:
                timer.start()
                target.agent(["preflight", "1", "-"])
                timer.join()
            except _CtrlC:
                interrupted += 1
                timer.join()
                left = commands_left()
                assert left == [], f"SIGINT {step * 0.5} ms after the start left {left}"
    finally:
        signal.signal(signal.SIGINT, previous)
    assert interrupted > 0
