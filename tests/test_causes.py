"""Spike causes (rtlab run --trace): a known spike injected into a known load is named with its
cause, load and time; where nothing is injected nothing is claimed.

The injection is tests/spin.c: a SCHED_FIFO 99 busy loop pinned to one CPU, as real a thread
as any that blocks cyclictest. Under software emulation the guest's own timer noise reaches
2-16 ms, so the guest tests trace above 100 ms and inject 400 ms; on this host, 30 ms and 60 ms.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from conftest import (
    console_tail,
    event_seen,
    read_json,
    rtlab,
    run_args,
    spin_binary,
    start_rtlab,
    wait_for,
)
from rtlab.analysis import causes
from rtlab.report.views import causes as report_causes
from rtlab.rundir import ftrace
from test_qemu import guests, initrd, needs_x86

pytestmark = pytest.mark.guests

_INJECT = re.compile(r"^@inject t=(\S+) ms=(\d+) cpu=(\d+) pid=(\d+)$", re.MULTILINE)


def injections(text: str) -> list[tuple[float, int, int, int]]:
    """(start, ms, cpu, pid) of each burst the spin program printed."""
    return [(float(t), int(ms), int(cpu), int(pid)) for t, ms, cpu, pid in _INJECT.findall(text)]


def _spans(out: Path) -> list[tuple[float, float]]:
    """(start, end) of each burst, in seconds since the run's start (a spike's t_s)."""
    # (every burst is on CPU 1: the spin program is pinned there)
    origin = read_json(out / "summary.json")["clock"]["uptime_s"]
    return [
        (t - origin, t + ms / 1000 - origin)
        for t, ms, _, _ in injections((out / "loads/cpu/load.log").read_text())
    ]


def _stalled(spike: dict, spans: list[tuple[float, float]]) -> bool:
    """The emulated CPU stopped by a busy host, not a cause in the guest: a nice thread
    "blocking" an rt 99 wake-up for the whole 100 ms threshold or more (which the guest's RT
    kernel would have preempted at once), in a window that overlaps no burst, with the spin
    thread nowhere among its causes (just before a burst began, 771 ms "blocked" by the matrix
    stressor, seen here). Or the CPU idle through the whole threshold or more with the spin thread
    nowhere in the window: a guest's timer that fired 100 ms late while nothing ran (179 ms idle
    just after a burst, seen in CI). A burst blamed on another thread is never excused. The
    nice thread's case is level b's only: rtla names no thread's priority."""
    top = spike.get("top")
    if not top or top["duration_us"] < 100_000:
        return False
    if top["kind"] == "idle":
        return not any(c["name"].startswith("spin:") for c in spike["causes"])
    if top["role"] != "blocking" or "(nice " not in top["name"]:
        return False
    start = spike["t_s"] - (spike.get("window_us") or spike["latency_us"]) / 1e6
    apart = all(spike["t_s"] < begin or start > end for begin, end in spans)  # only CPU 1 is traced
    return apart and not any(c["name"].startswith("spin:") for c in spike["causes"])


def _first_cause(traced: dict, spans: list[tuple[float, float]]) -> dict:
    """The pass's top cause, past any thread blamed only for a stalled host's spikes."""
    read = [s for s in traced["spikes"] if s["problem"] is None and s["top"]]
    stalled = {s["top"]["name"] for s in read if _stalled(s, spans)}
    stalls = stalled - {s["top"]["name"] for s in read if not _stalled(s, spans)}
    first = next((t for t in traced["top"] if t["name"] not in stalls), None)
    assert first is not None, traced["top"]
    return first


@pytest.fixture(scope="module")
def injected(tmp_path_factory) -> dict[str, Path]:
    """The same injected spike traced at level a (rtla) and at level b (tracefs), one run each.
    The cpu load's stress-ng starts the spin program: after 10 s (past the settle and the
    measurement, inside the trace pass) it holds CPU 1 for 400 ms every 1.6 s until the load
    ends (60 bursts would take 96 s), since rtla arms its tracer in an emulated guest under
    the load only seconds into the pass: about 10 s, and once, on a busy host, after the last
    of nine bursts had ended 16 s into a pass that then lasted 51 s. Bursts before it armed go
    unseen, or are seen from the middle on. Only CPU 1, the bursts' CPU, is measured and traced
    (--rt-cpus 1, the load on both): rtla stops at its first hit and takes seconds to arm again,
    and a busy host's stall of CPU 0 hit first once took a level a pass's 24 s whole."""
    if not shutil.which("qemu-system-x86_64"):
        pytest.skip("make test installs qemu-system-x86")
    tmp = tmp_path_factory.mktemp("causes")
    wrapper = (
        '#!/bin/sh\ncase " $* " in *" --matrix "*) /usr/local/bin/spin 1 400 10 60 1.2 & ;; esac\n'
        'exec /usr/bin/stress-ng "$@"\n'
    )
    spin = spin_binary(tmp).read_bytes()
    extra = initrd(tmp, {"usr/local/bin/stress-ng": wrapper, "usr/local/bin/spin": spin})
    runs = {}
    for level in ("a", "b"):
        for attempt in (1, 2):
            out = tmp / f"level-{level}-{attempt}"
            done = rtlab(*run_args(out, "idle,cpu", "2s", "--target", f"qemu:debian-rt,initrd={extra}",
                                   "--trace", "100ms", "--trace-duration", "24s", "--trace-level", level,
                                   "--rt-cpus", "1", "--loads-on", "all", settle="1s"))  # fmt: skip
            assert done.returncode == 0, done.stderr + console_tail(out)
            runs[level] = out
            if attempt == 2 or _named_any(out):
                break
            # Every capture of the pass came back unread (rtla cut off on a busy host, seen
            # once in a whole make test at level a): rtlab rightly claimed nothing, and what
            # the tests check cannot be seen in it. One more pass; a second such pass is judged.
            warnings.warn(f"level {level}: the cpu pass named no cause; measured once more", stacklevel=1)
    return runs


def _named_any(out: Path) -> bool:
    """Whether the cpu load's trace pass read any spike it could name a cause for."""
    spikes = (read_json(out / "summary.json")["loads"]["cpu"].get("causes") or {}).get("spikes", [])
    return any(s["problem"] is None and s["top"] for s in spikes)


@needs_x86
@pytest.mark.parametrize("level", ["a", "b"])
def test_an_injected_thread_is_named_with_its_load_time_and_duration(injected, level):
    out = injected[level]
    summary = read_json(out / "summary.json")
    bursts = injections((out / "loads/cpu/load.log").read_text())
    assert bursts, "the spin program never ran"
    pid = bursts[0][3]

    traced = summary["loads"]["cpu"]["causes"]
    assert traced["level"] == level
    assert traced["clock"] == {"a": "uptime", "b": "mono"}[level]
    assert traced["spikes"], traced
    # a capture that came back incomplete (rtla cut off on a busy host) claims nothing and says why
    unread = [s for s in traced["spikes"] if s["problem"] is not None]
    assert all(s["top"] is None and s["causes"] == [] for s in unread), unread
    # the spin thread holds CPU 1 in bursts: a spike seconds away from every burst is the
    # emulated guest stalled by a busy host (158 ms "blocked" by the matrix stressor, and a
    # 100 ms "timerlat IRQ" 3.6 s after the last burst, seen here): never spin's. Level b has
    # the kernel's time (within 1 s of a burst's end). Level a has only the moment rtla said it
    # hit, which an emulated guest under the load delays by as much as the host is busy (1.6 s,
    # then 2.4 s after the last burst's end, then 8.6 s, seen here): there spin may be named on
    # CPU 1 from the first burst on, and a spike then that names another is a host's stall.
    spans = _spans(out)
    ends = [end for _, end in spans]
    read = [s for s in traced["spikes"] if s["problem"] is None]
    assert {s["cpu"] for s in read} <= {1}, read  # --rt-cpus 1, and traced so
    if level == "b":
        named = [s for s in read if min(abs(s["t_s"] - end) for end in ends) < 1.0 and not _stalled(s, spans)]
    else:
        spins = [s for s in read if s["top"] and s["top"]["name"].startswith("spin:")]
        named = [s for s in spins if s["t_s"] >= spans[0][0]]
    elsewhere = [s for s in read if s not in named]
    assert not any(s["top"] and s["top"]["name"].startswith("spin:") for s in elsewhere), elsewhere
    assert named, traced["spikes"]
    for spike in named:
        top = spike["top"]
        assert top is not None and top["kind"] == "thread", spike
        assert top["name"].split()[0] == f"spin:{pid}"
        # blocking when it held the CPU at the wake-up, interfering when it took it after
        # (rtla decides by the timer interrupt's moment, so the two levels may differ here)
        assert top["role"] in ("blocking", "interference")
        # never longer than the 400 ms burst (a burst seen from the middle on is shorter)
        assert top["duration_us"] <= 480_000, spike
        # inside the cpu load's trace pass
        phases = summary["loads"]["cpu"]["phases"]
        assert phases["trace_start"] <= spike["t_s"] <= phases["trace_end"]
        assert (out / spike["trace"]).is_file()
    # a burst seen whole: the 400 ms, net of the interrupts nested in it (osnoise's way), which
    # in an emulated guest on a busy host took up to a third of it
    assert max(s["top"]["duration_us"] for s in named) >= 200_000, named
    if level == "b":
        assert all("(rt 99)" in s["top"]["name"] for s in named)
    assert _first_cause(traced, spans)["name"].startswith(f"spin:{pid}")

    # the negative control: the idle load's pass had no injection and names no spin thread
    # (an emulated guest on a busy host can stall past the threshold now and then: what such a
    # stall is blamed on is not the injected thread)
    quiet = summary["loads"]["idle"]["causes"]
    assert quiet["level"] == level
    assert not any(s["top"] and s["top"]["name"].startswith("spin:") for s in quiet["spikes"]), quiet

    # tracefs is left as it was found, file for file; the buffer's size to the page: a kernel
    # sizes it in whole pages of 4080 bytes, so the default 1408 kB comes back as 1410 kB
    for load in ("idle", "cpu"):
        folder = out / "loads" / load / "trace"
        before, after = (
            (folder / f"tracefs.{when}").read_text().splitlines() for when in ("before", "after")
        )
        size = [int(line.split()[1]) for line in (*before, *after) if line.startswith("buffer_size_kb ")]
        assert len(size) == 2 and abs(size[0] - size[1]) < 4
        assert [x for x in before if not x.startswith("buffer_size_kb")] == [
            x for x in after if not x.startswith("buffer_size_kb")
        ]

    # every report says it
    html = rtlab("report", str(out), "--format", "html")
    assert html.returncode == 0, html.stderr
    section = html.stdout[html.stdout.index("Why: spike causes") :]
    assert f"spin:{pid}" in section and "thread" in section
    table = rtlab("report", str(out))
    assert f"spin:{pid}" in table.stdout and f"level {level}" in table.stdout
    assert guests() == set()


@needs_x86
def test_levels_a_and_b_agree_on_the_top_cause(injected):
    def top(level: str) -> tuple[str, str]:
        causes = read_json(injected[level] / "summary.json")["loads"]["cpu"]["causes"]
        first = _first_cause(causes, _spans(injected[level]))
        comm = first["name"].split()[0].rpartition(":")[0]  # the pid may differ: another guest
        return first["kind"], comm

    assert top("a") == top("b") == ("thread", "spin")


@pytest.mark.spikes
def test_level_c_on_this_host_places_the_spike_and_claims_no_cause(tmp_path):
    # Level c, as on a board without tracefs: spike times and interrupt suspects only.
    out = tmp_path / "run"
    proc = start_rtlab(
        *run_args(out, "idle", "3s", "--trace", "30ms", "--trace-duration", "6s", "--trace-level", "c")
    )
    try:
        wait_for(lambda: event_seen(out / "events", "trace-start", load="idle"), 60)
        burst = subprocess.run(
            [sys.executable, "-c", _HOST_SPIN], capture_output=True, text=True, check=True, timeout=60
        )
    finally:
        stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    start, ms, cpu, _ = injections(burst.stdout)[0]
    summary = read_json(out / "summary.json")
    traced = summary["loads"]["idle"]["causes"]
    assert traced["level"] == "c" and traced["clock"] == "uptime"
    assert "CONFIG_FTRACE" in traced["note"]
    end = start + ms / 1000 - summary["clock"]["uptime_s"]
    mine = [s for s in traced["spikes"] if s["cpu"] == cpu and abs(s["t_s"] - end) < 1.0]
    assert mine, (end, traced["spikes"])
    assert mine[0]["latency_us"] >= 0.8 * ms * 1000
    assert all(s["top"] is None and s["causes"] == [] for s in traced["spikes"])
    assert traced["top"] == []
    assert "suspects only" in stdout
    # the pass is said as it starts and ends, with the spikes it counted
    assert "idle: tracing spikes above 30 ms for 6 s (level c)" in stderr
    assert re.search(r"^idle: [1-9]\d* spike\(s\) traced$", stderr, re.MULTILINE), stderr


# A second into the trace pass: trace-start is said before its cyclictest has started, which on
# a busy host takes longer than the burst.
_HOST_SPIN = """
import os, time
time.sleep(1)
os.sched_setaffinity(0, {1})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(99))
start = time.monotonic()
while time.monotonic() - start < 0.06:
    pass
print(f"@inject t={start:.6f} ms=60 cpu=1 pid={os.getpid()}")
"""


# A spike traced in a Debian RT guest under emulation (tracefs per_cpu/cpu0/trace, its end):
# the measured thread's timer interrupt came 2.4 ms late while its CPU was idle.
IDLE_LATE = """\
# tracer: nop
     migration/0-20      [000] d...2..     2.709167: sched_switch: prev_comm=migration/0 prev_pid=20 prev_prio=0 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
          <idle>-0       [000] d..h1..     2.711994: local_timer_entry: vector=236
          <idle>-0       [000] d..h3..     2.712019: sched_waking: comm=cyclictest pid=122 prio=0 target_cpu=000
          <idle>-0       [000] dn.h1..     2.712143: local_timer_exit: vector=236
          <idle>-0       [000] dn..3..     2.712152: sched_waking: comm=ksoftirqd/0 pid=14 prio=120 target_cpu=000
          <idle>-0       [000] d...2..     2.712213: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=cyclictest next_pid=122 next_prio=0
      cyclictest-122     [000] .......     2.713322: tracing_mark_write: hit latency threshold (3699 > 3000)
"""  # noqa: E501


def test_a_late_timer_on_an_idle_cpu_is_idle_not_a_thread():
    spike = causes.explain(ftrace.parse(IDLE_LATE))
    assert spike["cpu"] == 0 and spike["latency_us"] == 3699 and spike["problem"] is None
    # due at 2.713322 - 3699 µs = 2.709623, back on its CPU at 2.712213
    assert spike["window_us"] == pytest.approx(2590, abs=1)
    by_kind = {c["kind"]: c for c in spike["causes"]}
    assert spike["top"]["kind"] == "idle"
    # idle until the switch, the timer interrupt inside it (the union never counts twice)
    assert by_kind["idle"]["duration_us"] == pytest.approx(2590, abs=1)
    assert by_kind["timer-irq"]["duration_us"] == pytest.approx(149, abs=1)
    assert "thread" not in by_kind  # migration/0 ran before the window, not in it
    assert spike["unattributed_us"] == pytest.approx(0, abs=1)


def test_a_trace_without_the_mark_explains_nothing():
    spike = causes.explain(ftrace.parse(IDLE_LATE.rsplit("\n", 2)[0]))
    assert spike["top"] is None and "no cyclictest mark" in spike["problem"]


# rtla 6.12's auto-analysis of the injected spin thread, as an emulated guest on a busy host
# printed it (stack trace and per-IRQ lines cut): an IRQ handler delay of 13394 % of the latency
RTLA_IMPOSSIBLE = """rtla timerlat hit stop tracing
## CPU 1 hit stop tracing, analyzing it ##
  IRQ handler delay:                                    53854380.22 us (13393.93 %)
  IRQ latency:                                               0.00 us
  Timerlat IRQ duration:                                    42.93 us (0.01 %)
  Blocking thread:                                           0.00 us (0.00 %)
                                :0                           0.00 us
  IRQ interference                                        3612.96 us (0.90 %)
  Thread interference                                   396418.47 us (98.59 %)
                      spin:2146                         396418.47 us
------------------------------------------------------------------------
  Thread latency:                                       402080.58 us (100%)
"""


def test_a_part_of_rtlas_breakdown_longer_than_the_latency_is_refused_not_blamed():
    spike = causes.explain_auto_analysis(ftrace.parse_auto_analysis(RTLA_IMPOSSIBLE))
    assert spike["problem"] is None and spike["latency_us"] == 402081
    assert spike["top"] == {
        "kind": "thread",
        "name": "spin:2146",
        "duration_us": 396418.5,
        "role": "interference",
    }
    assert "IRQ handler delay" not in [c["name"] for c in spike["causes"]]
    assert spike["refused"] == [
        "rtla's IRQ handler delay of 53854380 µs is longer than the latency it is part of (402081 µs)"
    ]
    assert "refused: rtla's IRQ handler delay" in report_causes.spike(spike)


def test_interrupt_counters_name_the_source_that_jumped():
    def sample(t: float, ttys: int) -> str:
        return (
            f"@ t={t}\n           CPU0       CPU1\n"
            f"  4:          0       {ttys}   IO-APIC   4-edge      ttyS0\n"
            f"LOC:      {int(t * 250)}      {int(t * 250)}   Local timer interrupts\n"
            f"@ softirqs\n                    CPU0       CPU1\n       TIMER:  {int(t * 10)}  {int(t * 10)}\n"
        )

    text = "".join(sample(t, n) for t, n in ((10.0, 100), (11.0, 110), (12.0, 5110), (13.0, 5120)))
    samples = ftrace.parse_counters(text)
    assert [s.t for s in samples] == [10.0, 11.0, 12.0, 13.0]
    assert samples[0].counts["irq 4 ttyS0"] == [0, 100]
    found = causes.suspects(samples, 11.5, cpu=1)
    assert [s["source"] for s in found] == ["irq 4 ttyS0"]
    assert found[0]["count"] == 5000 and found[0]["typical"] == 10
    assert causes.suspects(samples, 11.5, cpu=0) == []  # nothing jumped on CPU 0


@needs_x86
def test_hwlat_runs_alone_in_the_guest_and_is_flagged_as_a_vm(tmp_path):
    out = tmp_path / "hwlat"
    done = rtlab("trace", "--hwlat", "--target", "qemu:debian-rt", "--duration", "3s", "--out", str(out))
    assert done.returncode == 0, done.stderr
    doc = read_json(out / "hwlat.json")
    assert doc["virtual_machine"] is True and "virtual machine" in done.stderr
    # every sample the kernel printed, read again here
    printed = [line for line in (out / "hwlat.trace").read_text().splitlines() if "inner/outer(us):" in line]
    assert len(doc["samples"]) == len(printed)
    for sample, line in zip(doc["samples"], printed, strict=True):
        inner, outer = re.search(r"inner/outer\(us\):\s*(\d+)/(\d+)", line).groups()
        assert (sample["inner_us"], sample["outer_us"]) == (int(inner), int(outer))
    if printed:
        assert doc["max_us"] == max(max(s["inner_us"], s["outer_us"]) for s in doc["samples"])
    before, after = ((out / f"tracefs.{when}").read_text() for when in ("before", "after"))
    assert doc["tracefs_changes"] == [] == ftrace.tracefs_changes(before, after)
    assert guests() == set()


def test_hwlat_where_the_kernel_has_none_says_what_it_needs():
    done = rtlab("trace", "--hwlat", "--duration", "1s", "--out", "/nonexistent-never-made")
    if "tracefs" in Path("/proc/mounts").read_text():
        pytest.skip("this host has tracefs mounted")
    assert done.returncode == 2
    assert "CONFIG_HWLAT_TRACER" in done.stderr and len(done.stderr.strip().splitlines()) == 1


@needs_x86
def test_the_hwlat_gate_measures_nothing_when_the_hardware_already_steals_more(tmp_path):
    # An emulated guest's CPUs vanish for tens of µs and more (the emulator is preempted): a
    # 1 µs gate closes, a 1 s gate lets the run measure; both keep the pass in RUN/hwlat.
    closed, opened = tmp_path / "closed", tmp_path / "opened"
    gate = ("--target", "qemu:debian-rt", "--hwlat-duration", "3s")
    done = rtlab(*run_args(closed, "idle", "1s", *gate, "--hwlat-gate", "1us"))
    assert done.returncode == 1, done.stderr
    assert "hwlat gate" in done.stderr and "nothing was measured" in done.stderr
    manifest = read_json(closed / "run.json")
    doc = read_json(closed / "hwlat/hwlat.json")
    assert manifest["status"] == "failed" and "hwlat gate" in manifest["reason"]
    assert manifest["hwlat_gate"]["passed"] is False and manifest["hwlat_gate"]["max_us"] == doc["max_us"] > 1
    assert (
        manifest["loads"]["idle"]["status"] == "not-run"
        and not (closed / "loads/idle/cyclictest.json").exists()
    )
    done = rtlab(*run_args(opened, "idle", "1s", *gate, "--hwlat-gate", "1s"))
    assert done.returncode == 0, done.stderr
    manifest = read_json(opened / "run.json")
    assert manifest["status"] == "complete" and manifest["hwlat_gate"]["passed"] is True
    assert manifest["hwlat_gate"]["max_us"] == read_json(opened / "hwlat/hwlat.json")["max_us"]
    assert guests() == set()


def test_a_hwlat_gate_where_the_kernel_has_no_tracer_is_one_line_and_leaves_nothing(tmp_path):
    if "tracefs" in Path("/proc/mounts").read_text():
        pytest.skip("this host has tracefs mounted")
    done = rtlab(*run_args(tmp_path / "run", "idle", "1s", "--hwlat-gate", "20us"))
    assert done.returncode == 2 and "CONFIG_HWLAT_TRACER" in done.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "run").exists()
    lone = rtlab(*run_args(tmp_path / "run", "idle", "1s", "--hwlat-duration", "5s"))
    assert lone.returncode == 2 and "--hwlat-duration goes with --hwlat-gate" in lone.stderr


def test_hwlat_never_overwrites_an_earlier_pass(tmp_path):
    earlier = tmp_path / "hwlat.json"
    earlier.write_text('{"samples": []}\n')
    done = rtlab("trace", "--hwlat", "--duration", "1s", "--out", str(tmp_path))
    assert done.returncode == 2 and "already holds an hwlat pass" in done.stderr
    assert earlier.read_text() == '{"samples": []}\n'


def test_check_says_which_cause_levels_this_host_has():
    done = rtlab("check", "--format", "json")
    rows = {f["item"]: f for f in json.loads(done.stdout)["findings"] if f["area"] == "tracing"}
    assert set(rows) == {"level a (rtla timerlat auto-analysis)", "level b (tracefs events)"}
    mounted = "tracefs" in Path("/proc/mounts").read_text()
    assert (rows["level b (tracefs events)"]["status"] == "ok") == mounted
    if not mounted:  # the kernel has it (this host's does) or it has not: either way the fix is named
        assert (
            "tracefs"
            in rows["level b (tracefs events)"]["advice"] + rows["level b (tracefs events)"]["found"]
        )
