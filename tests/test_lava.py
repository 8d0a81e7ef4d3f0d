"""Board farms through LAVA: a job made from a lab's base job, validated by LAVA's own schema
in strict mode, run by LAVA's dispatcher (lava-run, Debian's lava-dispatcher) on this
machine's sshd as the board, its log imported into a run and checked against the same
campaign measured directly; a job that went wrong is imported as failed."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import (
    TARGET_DIR,
    event_seen,
    idle_threads,
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
from rtlab.farm.lava import log_entries

LAVA_RUN = shutil.which("lava-run")
needs_lava = pytest.mark.skipif(LAVA_RUN is None, reason="make test installs lava-dispatcher")

# The lab's job: its own deploy and boot (here LAVA's ssh device type, as a lab with
# SSH-reachable boards writes it); rtlab adds only the test action.
BASE = """
device_type: ssh
job_name: rtlab on the desk board
visibility: public
priority: medium
timeouts:
  job: {minutes: 10}
  action: {minutes: 5}
  connection: {minutes: 2}
metadata: {lab.board: desk-01}
actions:
- deploy: {to: ssh, os: debian, timeout: {minutes: 2}}
- boot:
    method: ssh
    connection: ssh
    prompts: ['root@', '# ']
    timeout: {minutes: 2}
"""

# The constants of every device type (base.jinja2); {results}: where the test shell's files go
CONSTANTS = """
constants:
  posix:
    lava_test_sh_cmd: /bin/sh
    lava_test_results_dir: '{results}/lava-%s'
    lava_test_shell_file: ~/.bashrc
  default-shell-prompt: 'lava-test: # '
  kernel-start-message: Linux version [0-9]
  shutdown-message: The system is going down for reboot NOW
  spawn_maxread: '4092'
  failure_retry: 1
  boot_retry:
"""
# LAVA's ssh device type rendered for a board at 127.0.0.1:PORT (what lava-server renders from
# its ssh.jinja2 and base.jinja2; only what the dispatcher reads for deploy to ssh and boot ssh)
DEVICE = (
    CONSTANTS
    + """
actions:
  deploy:
    connections: {{serial: }}
    methods:
      ssh:
        options: ['-o', 'Compression=yes', '-o', 'PasswordAuthentication=no', '-o', 'LogLevel=FATAL']
        host: 127.0.0.1
        port: {port}
        user: root
        identity_file: {key}
  boot:
    connections: {{serial: }}
    methods: {{ssh: }}
timeouts: {{actions: {{}}, connections: {{}}}}
"""
)


def make_job(folder: Path, *options: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """`rtlab lava job` on the desk board's base job, written into FOLDER."""
    base, job = folder / "base.yaml", folder / "job.yaml"
    base.write_text(BASE)
    return job, rtlab("lava", "job", "--base", str(base), *options, "-o", str(job))


def strict_validation(job: Path) -> subprocess.CompletedProcess[str]:
    """LAVA's own schema (lava_common, Debian's python3), strict as lava-server submits."""
    code = (
        "import sys, yaml; from lava_common.schemas import validate; "
        "validate(yaml.safe_load(open(sys.argv[1])), strict=True)"
    )
    return subprocess.run(["/usr/bin/python3", "-c", code, str(job)], capture_output=True, text=True)


def lava_run(job: Path, device: Path, out: Path) -> tuple[int, str]:
    job_id = str(random.randrange(10**6, 10**7))  # the dispatcher's tmp folder is per job id
    done = subprocess.run(
        [LAVA_RUN, "--job-id", job_id, "--output-dir", str(out), "--device", str(device), str(job)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


@pytest.fixture(scope="module")
def device(board, tmp_path_factory) -> Path:  # noqa: F811
    folder = tmp_path_factory.mktemp("lava")
    # the test shell's files on the board (this machine) in the test's folder, not in /
    path = folder / "device.yaml"
    path.write_text(DEVICE.format(port=board.port, key=board.keys / "user_key", results=folder))
    return path


@pytest.mark.farm
@needs_root
@needs_tools
@needs_lava
def test_a_campaign_through_lava_comes_back_as_the_same_run(tmp_path, device):
    job, made = make_job(tmp_path, "--loads", "idle,cpu", "--duration", "2s", "--settle", "1s",
                         "--deadline", "100ms", "--name", "farm", "--probe", "oslat")  # fmt: skip
    assert made.returncode == 0, made.stderr
    document = yaml.safe_load(job.read_text())
    checked = strict_validation(job)
    assert checked.returncode == 0, checked.stderr
    # the lab's actions untouched, rtlab's test after them, with the run's name in metadata
    assert document["actions"][:2] == yaml.safe_load(BASE)["actions"]
    test = document["actions"][2]["test"]
    assert test["timeout"]["seconds"] >= 2 * (2 + 1)
    assert document["metadata"]["lab.board"] == "desk-01" and document["metadata"]["rtlab.run"] == "farm"
    assert "lava-signal" not in test["definitions"][0]  # an SSH test shell reads signals on stdout
    assert document["timeouts"]["job"]["seconds"] >= test["timeout"]["seconds"]

    status, log = lava_run(job, device, tmp_path / "dispatcher")
    assert status == 0, log[-3000:]
    (tmp_path / "job.log").write_text(log)
    # LAVA's own results: each load a test set, its CPUs' latencies as measurements in µs
    results = [
        e for e in map(yaml.safe_load, log.splitlines()) if isinstance(e, dict) and e.get("lvl") == "results"
    ]
    cases = {r["msg"]["case"]: r["msg"] for r in results}
    assert cases["job"]["result"] == "pass"
    assert cases["idle"]["result"] == cases["cpu"]["result"] == "pass"
    assert cases["cpu.cpu0-max-latency"]["units"] == "us" and cases["cpu.cpu0-max-latency"]["set"] == "cpu"
    assert cases["idle.oslat"]["result"] == cases["cpu.oslat"]["result"] == "pass"  # the other probe's own
    assert cases["cpu.oslat"]["set"] == "cpu"

    run = tmp_path / "imported"
    store = tmp_path / "history.db"
    imported = rtlab("lava", "import", "--log", str(tmp_path / "job.log"), "-o", str(run), "--history",
                     env={"RTLAB_HISTORY_DB": str(store)})  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    # and into the history store, as the run it is
    listed = rtlab("history", "list", "--db", str(store), "--format", "json")
    assert [r["uid"] for r in json.loads(listed.stdout)["runs"]] == [read_json(run / "run.json")["uid"]]
    summary = read_json(run / "summary.json")
    assert summary["status"] == "complete" and summary["run"] == "farm"
    assert read_json(run / "run.json")["target"]["kind"] == "lava"
    for load in ("idle", "cpu"):
        entry = summary["loads"][load]
        assert entry["status"] == "complete" and entry["merged"]["samples"] > 0
        for cpu, stats in entry["cpus"].items():
            # what LAVA shows is what rtlab computed from the same cyclictest output
            assert float(cases[f"{load}.cpu{cpu}-max-latency"]["measurement"]) == stats["max_us"]
            assert float(cases[f"{load}.cpu{cpu}-min-latency"]["measurement"]) == stats["min_us"]
            tail = cases[f"{load}.cpu{cpu}-p99.99-latency"]
            assert float(tail["measurement"]) == stats["p99_99_us"]
            assert tail["result"] == ("unknown" if "p99_99_us" in stats["lower_bounds"] else "pass")
    assert summary["loads"]["cpu"]["throughput"]["ops_per_s"] > 0
    assert read_json(run / "sysinfo.json")["hostname"]
    # the other probe measured on the board too, its JSON home with the run
    oslat = summary["loads"]["cpu"]["probes"]["oslat"]
    assert oslat["status"] == "complete" and oslat["merged"]["latency"]["max_us"] == max(
        t["max"] for t in read_json(run / "loads/cpu/oslat/probe.json")["thread"].values()
    )

    # the same campaign measured directly: the same layout and the same shape of result
    direct = tmp_path / "direct"
    done = rtlab("run", "--loads", "idle,cpu", "--duration", "2s", "--settle", "1s", "--out", str(direct))
    assert done.returncode == 0, done.stderr
    mine = read_json(direct / "summary.json")
    assert set(summary) == set(mine) and summary["plan"]["loads"] == mine["plan"]["loads"]
    assert {p.relative_to(run).as_posix() for p in (run / "loads").rglob("*") if p.is_file()} >= {
        p.relative_to(direct).as_posix() for p in (direct / "loads").rglob("*") if p.is_file()
    }
    compared = rtlab("compare", str(direct), str(run), "--labels", "direct,lava", "--format", "md")
    assert compared.returncode == 0 and "| idle |" in compared.stdout
    assert processes_named("cyclictest", "stress-ng") == set()


def lava_results(log: str) -> dict[str, dict[str, object]]:
    """LAVA's results in a job's log, by test case."""
    return {e["msg"]["case"]: e["msg"] for e in log_entries(log) if e.get("lvl") == "results"}


def hung_after_firmware(log: str) -> bool:
    """Whether a job's guest ran its firmware (OpenSBI's banner) and then its kernel printed
    nothing: a farm's kernel is not quiet, and its console, once up, prints its buffer from
    the first line ("Linux version ...") on."""
    said = [str(e.get("msg")) for e in log_entries(log) if e.get("lvl") == "target"]
    return any("OpenSBI" in line for line in said) and not any("Linux version" in line for line in said)


@pytest.mark.farm
@needs_root
@needs_tools
@needs_lava
def test_a_busy_board_says_why_in_the_jobs_results_and_in_the_import(tmp_path, device):
    # another rtlab measures on the board (this test's own, in the tests' target folder)
    holder = start_rtlab(*run_args(tmp_path / "holder", "idle", "300s"))
    try:
        owner = TARGET_DIR / "lock" / "owner"
        wait_for(owner.exists, 60)
        pid = owner.read_text().split()[0]
        job, made = make_job(tmp_path, "--loads", "idle,cpu", "--duration", "2s", "--name", "second")
        assert made.returncode == 0, made.stderr
        status, log = lava_run(job, device, tmp_path / "dispatcher")
    finally:
        holder.send_signal(signal.SIGINT)
        holder.communicate(timeout=120)
    # the dispatcher ran the job to its end, Incomplete (a test error)
    assert status == 1 and "TestError" in log, log[-3000:]
    cases = lava_results(log)
    # a test case says the board was busy, each load failed, and the job's own error says who
    # holds the board
    assert cases["board-busy"]["result"] == "fail"
    assert cases["idle"]["result"] == cases["cpu"]["result"] == "fail"
    error = str(cases["job"].get("error_msg"))
    assert cases["job"]["result"] == "fail" and "board is busy" in error and f"pid={pid}" in error, cases[
        "job"
    ]
    (tmp_path / "job.log").write_text(log)
    run = tmp_path / "imported"
    imported = rtlab("lava", "import", "--log", str(tmp_path / "job.log"), "-o", str(run))
    assert imported.returncode == 3, imported.stderr
    assert "board is busy" in imported.stderr and f"pid={pid}" in imported.stderr
    manifest = read_json(run / "run.json")
    assert manifest["status"] == "failed" and f"pid={pid}" in json.dumps(manifest)
    # the job left nothing on the board, and the holder's run was never disturbed
    assert list((TARGET_DIR / "lava").iterdir()) == []
    assert read_json(tmp_path / "holder" / "run.json")["loads"]["idle"]["status"] != "failed"


@pytest.mark.farm
@needs_lava
def test_a_job_that_went_wrong_is_imported_as_failed(tmp_path):
    # the board's bundle is there, but LAVA's own verdict on the job is not a pass
    log = tmp_path / "job.log"
    entries = [
        {"lvl": "target", "msg": "nothing of rtlab here"},
        {"lvl": "results", "msg": {"case": "idle", "definition": "0_rtlab", "result": "pass", "set": "idle"}},
        {
            "lvl": "results",
            "msg": {"case": "job", "definition": "lava", "result": "fail", "error_type": "Infra"},
        },
    ]
    log.write_text("".join(json.dumps({"dt": "x", **e}) + "\n" for e in entries))
    run = tmp_path / "run"
    done = rtlab("lava", "import", "--log", str(log), "-o", str(run))
    assert done.returncode == 3
    assert read_json(run / "run.json")["status"] == "failed"
    assert read_json(run / "summary.json")["loads"]["idle"]["status"] == "failed"
    assert "holds no run from the board" in done.stderr + (run / "run.json").read_text()


# The board's side of a job's steps where it cannot exist here: the agent (`sh ./agent.sh`,
# each call noted; lava-report refuses with a reason holding quotes and a command), dmesg (the
# console's log level is the host's) and LAVA's lava-test-raise (its argument noted).
STUB_SH = """#!/bin/dash
for a in "$@"; do printf '[%s]' "$a"; done >> "$CALLS"; echo >> "$CALLS"
[ "$2" != lava-report ] || printf '%s' "held by 'x' \\$(touch $SUBSTITUTED)" > "$5"
"""
STUB_RAISE = """#!/bin/dash
printf '%s\\n' "$#:$1" >> "$RAISED"
"""


@pytest.mark.unit
@pytest.mark.skipif(shutil.which("dash") is None, reason="dash is Debian's /bin/sh")
def test_a_target_folder_with_a_space_quotes_and_a_command_stays_one_word_in_the_jobs_steps(tmp_path):
    # `rm -rf $R` unquoted, with R = ".../board/rt lab'...": removes .../board/rt, not rtlab's
    desk = tmp_path / "board"
    (desk / "rt").mkdir(parents=True)
    (desk / "rt" / "keep").write_text("the board's own files\n")
    substituted = tmp_path / "substituted"
    folder = f"{desk}/rt lab'$(touch {substituted})"
    (tmp_path / "base.yaml").write_text(BASE)
    job = tmp_path / "job.yaml"
    made = rtlab("lava", "job", "--base", str(tmp_path / "base.yaml"), "-o", str(job),
                 env={"RTLAB_TARGET_DIR": folder})  # fmt: skip
    assert made.returncode == 0, made.stderr
    document = yaml.safe_load(job.read_text())
    remote = f"{folder}/lava/{document['metadata']['rtlab.uid']}"
    steps = document["actions"][-1]["test"]["definitions"][0]["repository"]["run"]["steps"]
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for name, text in (("sh", STUB_SH), ("dmesg", "#!/bin/dash\n"), ("lava-test-raise", STUB_RAISE)):
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    calls, raised, cwd = tmp_path / "calls", tmp_path / "raised", tmp_path / "cwd"
    cwd.mkdir()
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "CALLS": str(calls),
           "RAISED": str(raised), "SUBSTITUTED": str(substituted)}  # fmt: skip
    script = "set -e\n" + "\n".join(steps) + "\n"  # as LAVA's test shell runs them
    done = subprocess.run(
        ["dash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert (desk / "rt" / "keep").read_text() == "the board's own files\n"
    assert not substituted.exists()  # nothing ran by substitution
    agent = calls.read_text().splitlines()
    assert f"[./agent.sh][run][{remote}/run]" in "".join(agent)
    assert any(c.startswith(f"[./agent.sh][lava-report][{remote}/run][0][{remote}/refused]") for c in agent)
    assert raised.read_text() == f"1:held by 'x' $(touch {substituted})\n"
    assert not Path(remote).exists() and Path(folder).is_dir()  # its own folder removed, only it


def lava_calls(run: Path) -> list[list[str]]:
    """The LAVA calls the agent makes for RUN, printed as they are outside LAVA's test shell, in
    busybox's sh as on a board, each as its words."""
    from rtlab.agent import script_path

    shell = shutil.which("busybox")
    argv = [shell, "sh"] if shell else ["sh"]
    report = subprocess.run([*argv, str(script_path()), "lava-report", str(run), "1000000"],
                            capture_output=True, text=True, check=True)  # fmt: skip
    return [line.split() for line in report.stdout.splitlines()]


def lava_cases(run: Path) -> dict[str, tuple[str, float]]:
    """The LAVA test cases with a measurement the agent reports for RUN: {name: (result, measurement)}."""
    cases = {}
    for words in lava_calls(run):
        if words[0] == "lava-test-case" and "--measurement" in words:
            result, measured = (words[words.index(flag) + 1] for flag in ("--result", "--measurement"))
            cases[words[1]] = (result, float(measured))
    return cases


# Holds each CPU at cyclictest's own priority for 3 ms in every 10: hundreds of wake-ups a
# second late by more than a 1 ms histogram's range, so p99.99 lies beyond it.
_BLOCKER = """
import os, sys, time
cpu = int(sys.argv[1])
os.sched_setaffinity(0, {cpu})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(99))
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    spin = time.monotonic() + 0.003
    while time.monotonic() < spin:
        pass
    time.sleep(0.007)
"""


@pytest.mark.farm
@needs_root
@needs_tools
# the blockers are SCHED_FIFO 99 on every CPU of this machine: beside them any other test's
# runs are 3 ms late hundreds of times a second (a sweep's base run then looked as bad as its
# planted 5 ms spin, and the option to blame went unconfirmed), so that case runs alone
@pytest.mark.parametrize("blocked", [False, pytest.param(True, marks=pytest.mark.alone)])
def test_the_lava_report_of_a_soak_run_takes_its_segments_together(tmp_path, blocked):
    # A soak run keeps one cyclictest JSON per segment; LAVA gets one figure per CPU for the
    # load, the same as rtlab's summary of all segments together. Beyond the histogram's range
    # p99.99 is only a lower bound: LAVA then says unknown, never pass.
    run = tmp_path / "run"
    blockers = [
        subprocess.Popen([sys.executable, "-c", _BLOCKER, str(cpu), "30"]) for cpu in os.sched_getaffinity(0)
    ] if blocked else []  # fmt: skip
    try:
        done = rtlab("run", "--loads", "idle", "--duration", "4s", "--segment", "2s", "--settle", "0s",
                     "--histogram-range", "1ms" if blocked else "100ms", "--out", str(run))  # fmt: skip
    finally:
        for blocker in blockers:
            blocker.kill()
            blocker.wait()
    assert done.returncode == 0, done.stderr
    assert len(list(run.glob("loads/idle/segments/*/cyclictest.json"))) == 2
    cases = lava_cases(run)
    cpus = read_json(run / "summary.json")["loads"]["idle"]["cpus"]
    assert cpus
    for cpu, stats in cpus.items():
        assert cases[f"idle.cpu{cpu}-max-latency"] == ("pass", stats["max_us"])
        assert cases[f"idle.cpu{cpu}-min-latency"][1] == stats["min_us"]
        assert ("p99_99_us" in stats["lower_bounds"]) is blocked
        tail = cases[f"idle.cpu{cpu}-p99.99-latency"]
        assert tail == ("unknown" if blocked else "pass", stats["p99_99_us"])


# Holds one CPU at SCHED_FIFO 99 from before cyclictest starts, for COUNT of the run's
# measurements (the load's, or a soak run's first segments): cyclictest's thread there never
# runs, not even to start, so it takes no sample (what QEMU's emulation did to a riscv64
# guest's CPU 1 on a busy host). Past a measurement's planned SECONDS the CPU is let go until
# its end event is written (cyclictest waits for its thread to end), then held again before
# the next one's cyclictest has started.
_STARVER = """
import os, sys, time
cpu, events, start, end, seconds, count = sys.argv[1:]
os.sched_setaffinity(0, {int(cpu)})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(99))
give_up = time.monotonic() + 60  # never longer, whatever the run does
begun = []  # when each measurement was seen to start
ended = 0
while time.monotonic() < give_up and ended < int(count):
    try:
        text = open(events, "rb").read()
    except OSError:
        text = b""
    if text.count(f" {start} ".encode()) > len(begun):
        begun.append(time.monotonic())
    ended = text.count(f" {end} ".encode())
    let_go = len(begun) > ended and time.monotonic() > begun[ended] + float(seconds) + 0.5
    pause = time.monotonic() + 0.005
    while time.monotonic() < pause and not let_go:
        pass
    if let_go:
        time.sleep(0.005)
"""


@pytest.mark.farm
@pytest.mark.alone  # a CPU held at SCHED_FIFO 99: any other test's thread there would starve too
@needs_root
@needs_tools
@pytest.mark.skipif(
    Path("/proc/sys/kernel/sched_rt_runtime_us").read_text().strip() == "-1",
    reason="no limit on real-time tasks: the held CPU's kernel workers never run, cyclictest waits on them",
)
@pytest.mark.parametrize("starved", ["load", "every segment", "first segment"])
def test_a_cpu_never_measured_is_judged_in_lavas_results_as_in_rtlabs(tmp_path, starved):
    # The agent's own word for the load (its load-end event, which LAVA's result is) is the
    # host's: a load whose CPU was never measured fails, naming the thread, and so does a soak
    # run's whose every segment was; LAVA then gets no figures, as rtlab's report has none. A
    # soak run with one segment starved is whole, that segment set aside by both.
    run = tmp_path / "run"
    cpu = max(os.sched_getaffinity(0))
    soak = starved != "load"
    marks = ("segment-start", "segment-end") if soak else ("measure-start", "measure-end")
    count = 1 if starved != "every segment" else 2
    starver = subprocess.Popen([sys.executable, "-c", _STARVER, str(cpu), str(run / "events"), *marks, "1",
                                str(count)])  # fmt: skip
    try:
        done = rtlab(*run_args(run, "idle", "2s" if soak else "1s", *(["--segment", "1s"] if soak else [])))
    finally:
        starver.kill()
        starver.wait()
    files = (
        sorted(run.glob("loads/idle/segments/*/cyclictest.json"))
        if soak
        else [run / "loads/idle/cyclictest.json"]
    )
    idle = {}  # the threads that took no sample, by file
    for f in files:
        threads = idle_threads(f)
        idle[f.parent.name] = list(threads)
        assert all(t["cpu"] == cpu for t in threads.values()), threads
    assert [bool(names) for names in idle.values()] == [True] * count + [False] * (len(files) - count), idle
    entry = read_json(run / "summary.json")["loads"]["idle"]
    cases = [words for words in lava_calls(run) if words[0] == "lava-test-case"]
    if starved == "first segment":
        assert done.returncode == 0, done.stderr
        assert entry["status"] == "complete" and event_seen(
            run / "events", "load-end", load="idle", status="complete"
        )
        # LAVA's figures are rtlab's: the starved segment left out of both
        figures = lava_cases(run)
        for each, stats in entry["cpus"].items():
            assert figures[f"idle.cpu{each}-max-latency"] == ("pass", stats["max_us"])
            assert figures[f"idle.cpu{each}-min-latency"][1] == stats["min_us"]
        assert entry["merged"]["samples"] == sum(
            t["cycles"] for t in json.loads(files[1].read_text())["thread"].values()
        )
    else:
        if soak:
            lost = "; ".join(f"{seg}: thread {names[0]} measured no samples" for seg, names in idle.items())
            why = f"no segment left a whole result ({lost})"
        else:
            why = f"cyclictest.json: thread {idle['idle'][0]} (CPU {cpu}) measured no samples"
        assert done.returncode == 3, done.stderr
        assert event_seen(run / "events", "load-end", load="idle", status="failed", reason=why)
        assert (entry["status"], entry["reason"]) == ("failed", why)
        assert cases == [["lava-test-case", "idle", "--result", "fail"]], cases
    assert not processes_in(run)


# LAVA's qemu device type as lava-server renders it from qemu.jinja2 for this machine (what the
# dispatcher reads for deploy to tmpfs and boot qemu): the emulator and its machine options
QEMU_DEVICE = (
    CONSTANTS
    + """
available_architectures: [{arch}]
actions:
  deploy:
    connections: {{serial: }}
    methods:
      image:
        parameters:
          guest: {{size: 512, interface: virtio}}
  boot:
    connections: {{serial: }}
    methods:
      qemu:
        parameters:
          command: {qemu}
          boot_options: {{}}
          options: {options}
timeouts: {{actions: {{}}, connections: {{}}}}
"""
)


def _whole_or_starved(done: subprocess.CompletedProcess[str], run: Path) -> None:
    """A riscv64 guest's run whole (exit 0), or partial only because the emulation starved a
    thread for a whole load (exit 3, that load failed saying so): QEMU's riscv64 SMP on a busy
    host does that (test_board says more), and a farm's test judges the farm, not the guest."""
    if done.returncode == 0:
        return
    # a guest that failed says so here (its words have the test run again, conftest)
    assert done.returncode == 3 and (run / "summary.json").is_file(), done.stderr
    loads = read_json(run / "summary.json")["loads"]
    lost = {name: entry.get("reason") or "" for name, entry in loads.items() if entry["status"] != "complete"}
    # starved while the agent said the load was complete, not stopped
    starved = [why for why in lost.values() if "measured no samples" in why and not why.startswith("stopped")]
    assert lost and len(starved) == len(lost), (lost, done.stderr)
    assert len(lost) < len(loads), done.stderr


@pytest.mark.farm
@pytest.mark.boots
@needs_lava
@pytest.mark.skipif(not shutil.which("qemu-system-riscv64"), reason="make test installs qemu-system-misc")
def test_lavas_qemu_device_boots_rtlabs_riscv64_guest_and_the_run_comes_back(tmp_path):
    from rtlab.targets.qemu import machines

    arch = machines.arch("riscv64")
    job = tmp_path / "job" / "job.yaml"
    made = rtlab("lava", "job", "--qemu", "riscv64:debian", "--loads", "idle,cpu", "--duration", "2s",
                 "--settle", "1s", "--name", "qemu-farm", "-o", str(job))  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert strict_validation(job).returncode == 0
    document = yaml.safe_load(job.read_text())
    deploy, boot = (action for action in document["actions"][:2])
    images = deploy["deploy"]["images"]
    # the guest's kernel and one initramfs archive beside the job, LAVA's test shell files added
    assert images["rootfs"]["format"] == "cpio.newc" and images["rootfs"]["overlays"] == {"lava": True}
    for image in images.values():
        assert Path(image["url"].removeprefix("file://")).parent == job.parent
    assert boot["boot"]["method"] == "qemu" and document["context"] == {"arch": "riscv64"}
    options = [" ".join(arch.machine), "-m 1024", "-smp 2", "-accel tcg", "-display none",
               "-serial stdio", "-monitor none", "-no-reboot"]  # fmt: skip
    device = tmp_path / "qemu.yaml"
    device.write_text(
        QEMU_DEVICE.format(results="", arch="riscv64", qemu=arch.qemu, options=json.dumps(options))
    )

    status, log = lava_run(job, device, tmp_path / "dispatcher")
    (tmp_path / "job.log").write_text(log)
    # An emulated riscv64 guest on a busy host now and then prints nothing after OpenSBI (LAVA
    # then waits out its boot's 5 minutes): said in rtlab's words for a guest that failed by
    # itself, the test runs once more (conftest's GUEST_FAILED); any other failure is the farm's.
    assert status == 0 or not hung_after_firmware(log), (
        f"the guest did not start in LAVA's QEMU device: {log[-1500:]}"
    )
    assert status == 0, log[-3000:]
    cases = lava_results(log)
    assert cases["job"]["result"] == "pass"
    run = tmp_path / "imported"
    imported = rtlab("lava", "import", "--log", str(tmp_path / "job.log"), "-o", str(run))
    _whole_or_starved(imported, run)
    summary = read_json(run / "summary.json")
    info = read_json(run / "sysinfo.json")
    assert info["kernel"]["machine"] == "riscv64" and summary["run"] == "qemu-farm"
    for load in ("idle", "cpu"):
        entry = summary["loads"][load]
        # the board's word for a load in LAVA is rtlab's reading of the same files
        assert cases[load]["result"] == ("pass" if entry["status"] == "complete" else "fail"), (load, entry)
        if entry["status"] != "complete":
            continue  # starved (above): no figures to hold LAVA's against
        for cpu, stats in entry["cpus"].items():  # LAVA's figures are rtlab's, from the same JSON
            assert float(cases[f"{load}.cpu{cpu}-max-latency"]["measurement"]) == stats["max_us"]
            assert float(cases[f"{load}.cpu{cpu}-min-latency"]["measurement"]) == stats["min_us"]

    # the same campaign in the same guest, booted by rtlab itself: the same run, other numbers
    direct = tmp_path / "direct"
    done = rtlab("run", "--loads", "idle,cpu", "--duration", "2s", "--settle", "1s", "--out", str(direct),
                 "--target", "qemu:riscv64:debian")  # fmt: skip
    _whole_or_starved(done, direct)
    mine = read_json(direct / "summary.json")
    assert info["kernel"]["release"] == read_json(direct / "sysinfo.json")["kernel"]["release"]
    assert set(summary) == set(mine) and summary["plan"]["loads"] == mine["plan"]["loads"]
    compared = rtlab("compare", str(direct), str(run), "--labels", "rtlab,lava", "--format", "md")
    assert compared.returncode == 0 and "| cpu |" in compared.stdout
