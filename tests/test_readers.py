"""Every reader of outside data (rtlab.boundary.READERS) fed what Hypothesis makes of real
samples: values replaced at any depth, bytes flipped, lines cut and doubled, names from any
script. Each property proves the same three things:

- no exception but the project's own one-line errors (Damaged, InvalidResult, UsageError, ...);
- memory bounded (tracemalloc's peak, far below what a hostile number would cost);
- nothing written outside its folder (the bytes of everything beside it unchanged).

test_every_reader_has_a_property_test fails when a reader is listed without one here.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import shutil
import tarfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtlab.boundary import READERS, unpack, untrusted
from rtlab.errors import RunFailed, UsageError
from rtlab.plan.probes import InvalidProbe
from rtlab.rundir.cyclictest import InvalidResult
from rtlab.rundir.disk import UnreadableFile
from test_kernel_unpack import PACKINGS, bzimage, pvh_elf, sized

# the project's one-line errors: any other exception is a bug
ONE_LINE = (
    untrusted.Damaged,
    unpack.Refused,
    InvalidResult,
    InvalidProbe,
    UnreadableFile,
    UsageError,
    RunFailed,
)
PEAK_BYTES = 64 << 20  # a reader's memory for a sample of a few kB, whatever its numbers say
UNIT = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FOLDER = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

PROPERTIES: dict[str, str] = {}  # reader -> its property test here


def reads(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def mark(test: Callable[..., Any]) -> Callable[..., Any]:
        PROPERTIES[name] = test.__name__
        return test

    return mark


def bounded(call: Callable[[], Any]) -> Any:
    """CALL's value, None when it refused with a one-line error; fails on any other exception
    and on a memory peak above PEAK_BYTES."""
    tracemalloc.start()
    try:
        return call()
    except ONE_LINE as e:
        assert "\n" not in str(e).strip(), str(e)
        return None
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < PEAK_BYTES, f"{peak} bytes at the peak"


# --- what Hypothesis makes --------------------------------------------------------------------

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.sampled_from([0, 1, -1, 2**31, 2**53, 2**63, 2**64, 10**7, 10**11, 10**30])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
    | st.sampled_from(
        ["0-99999999", "../../x", "/etc/passwd", "١٠", "1_0", "\x1b[2J", "9999-12-31T23:59:59Z"]
    )
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _paths(doc: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [here]
    if isinstance(doc, dict):
        for k, v in doc.items():
            found += _paths(v, (*here, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            found += _paths(v, (*here, i))
    return found


def _replace(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copy = dict(doc) if isinstance(doc, dict) else list(doc)
    copy[path[0]] = _replace(doc[path[0]], path[1:], value)
    return copy


@st.composite
def mutated(draw: st.DrawFn, doc: Any, times: int = 3) -> Any:
    """DOC with up to TIMES values (at any depth, keys' values included) replaced by anything."""
    for _ in range(draw(st.integers(1, times))):
        path = draw(st.sampled_from(_paths(doc)))
        doc = _replace(doc, path, draw(VALUES))
    return doc


@st.composite
def mangled(draw: st.DrawFn, text: str) -> str:
    """TEXT with lines cut, doubled, replaced or spliced with anything."""
    lines = text.splitlines()
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, max(len(lines) - 1, 0)))
        what = draw(st.sampled_from(["cut", "double", "replace", "splice"]))
        if what == "cut" and lines:
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        elif what == "double" and lines:
            lines.insert(i, lines[i])
        elif what == "replace" and lines:
            lines[i] = draw(st.text(max_size=80))
        else:
            word = draw(st.sampled_from(["99999999999999999999", "-1", "nan", "1_0", "١٠", "=", "\x00", "²"]))
            at = draw(st.integers(0, len(lines[i]) if lines else 0))
            lines[i:i + 1] = [lines[i][:at] + word + lines[i][at:]] if lines else [word]  # fmt: skip
    return "\n".join(lines) + "\n"


# --- samples as the tools print them ----------------------------------------------------------

CYCLICTEST = {
    "file_version": 1,
    "num_threads": 2,
    "resolution_in_ns": 0,
    "cmdline": "cyclictest -m -q -p 99 -i 200 -h 400 --json",
    "thread": {
        "0": {
            "histogram": {"3": 120, "4": 70, "9": 10},
            "cycles": 200,
            "min": 3,
            "max": 9,
            "avg": 3.9,
            "cpu": 0,
        },
        "1": {"histogram": {"2": 150, "5": 50}, "cycles": 201, "min": 2, "max": 500, "avg": 5.1, "cpu": 1},
    },
}
OSLAT = {
    "thread": {
        "0": {"cpu": 0, "min": 1, "max": 7, "avg": 1.2, "histogram": {"1": 900, "2": 90, "7": 1, "32": 0}},
        "1": {"cpu": 1, "min": 1, "max": 3, "avg": 1.1, "histogram": {"1": 950, "3": 50, "32": 0}},
    }
}
CYCLICDEADLINE = {"thread": {"0": {"cycles": 100, "min": 2, "max": 40, "avg": 9.5}}}
PMQTEST = {  # as rt-tests 2.4's pmqtest -S --json writes it (the IPC tests share the shape)
    "num_threads": 2,
    "thread": {
        "0": {"sender": {"cpu": 0, "priority": 90, "samples": 971, "interval": 1000},
              "receiver": {"cpu": 0, "priority": 90, "min": 3, "avg": 4.36, "max": 28}},
        "1": {"sender": {"cpu": 1, "priority": 90, "samples": 641, "interval": 1500},
              "receiver": {"cpu": 1, "priority": 90, "timeoutcount": 0, "min": 3, "avg": 5.03, "max": 124}},
    },
}  # fmt: skip
SIGNALTEST = {  # as rt-tests 2.4's signaltest -p 99 -m --json writes it
    "num_threads": 2,
    "thread": {"0": {"cycles": 1297, "min": 25, "max": 5177, "avg": 121.44, "cpu": 0},
               "1": {"cycles": 1297, "min": 25, "max": 13108, "avg": 760.06, "cpu": 0}},
}  # fmt: skip
PI_STRESS = {"file_version": 1, "return_code": 0, "inversion": 197066}  # pi_stress --duration=2 --json
MIGRATE = {  # as rt-tests 2.4's rt-migrate-test -l 5 -c --json writes it (2 CPUs: 3 tasks)
    "num_threads": 3,
    "thread": {"0": {"prio": 2, "min": 20043, "avg": 20057, "max": 20091, "total": 100285},
               "1": {"prio": 3, "min": 34, "avg": 62, "max": 89, "total": 310},
               "2": {"prio": 4, "min": 34, "avg": 55, "max": 77, "total": 277}},
}  # fmt: skip
RTLA = """# RTLA timerlat histogram
# Time unit is microseconds (us)
Index   IRQ-000   Thr-000   IRQ-001   Thr-001
2             5         0         7         0
3             1         4         0         6
9             0         2         0         1
over:         0         0         0         0
count:        6         6         7         7
min:          2         3         2         3
avg:       2.17      5.00      2.00      3.86
max:          3         9         2         9
ALL:        IRQ       Thr       Usr
count:       13        13         0
"""
OSNOISE = """# RTLA osnoise histogram
# Time unit is microseconds (us)
# Duration:   0 00:00:03
Index   CPU-000   CPU-001
5           499       498
6           187       184
7            90        94
8            50        60
9            45        36
over:      4030      4690
count:     4901      5562
min:          5         5
avg:     366.49    324.75
max:      91396     38562
"""  # rtla 6.12 in Debian's RT guest under TCG, -E 10 (its buckets 5 to 9 as printed there)
HWNOISE = """                                          Hardware-related Noise
duration:   0 00:00:03 | time is in us
CPU Period       Runtime        Noise  % CPU Aval   Max Noise   Max Single          HW          NMI
  0 #2           1503447       868823    42.21126      443069        28027        5028            0
  1 #3           2250006      1284527    42.91006      455851        28038        9039            0
"""  # rtla 6.12 hwnoise -q in bookworm-backports' RT kernel under TCG
OSNOISE_TOP = (  # rtla 6.12's osnoise top -q in Debian's RT guest (6.1) under TCG, its columns narrowed
    "                    Operating System Noise\n"
    "duration:   0 00:00:03 | time is in us\n"
    "CPU Period  Runtime   Noise  % CPU Aval  Max Noise  Max Single   HW  NMI   IRQ  Softirq  Thread\n"
    "  0 #2     2082493 1565929  24.80507       841390       82139  403    0  3468        0    3757\n"
    "  1 #3     3011820 2289720  23.97553       766884       69883  507    0  5011        0    5525\n"
)
TIMELINE = (
    "Max CPUs: 2\n0:       5:      12\n1:       5:       9\nT: 0 Spike:     130: TS: 1234567\nspikes = 1\n"
)
FTRACE = (
    "# tracer: nop\n"
    "  cyclictest-1234  [001] d..1.  1001.000100: sched_switch: prev_comm=a prev_pid=1 prev_prio=120 "
    "prev_state=S ==> next_comm=b next_pid=2 next_prio=0\n"
    "  <idle>-0  [001] d.h1.  1001.000200: irq_handler_entry: irq=4 name=ttyS0\n"
)
RTLA_ANALYSIS = """## CPU 1 hit stop tracing, analyzing it ##
  IRQ handler delay:                                        12.00 us (10.00 %)
  IRQ latency:                                              30.00 us
  Timerlat IRQ duration:                                     5.00 us (4.17 %)
  Blocking thread:                                          80.00 us (66.67 %)
                         stress-ng:4242                     80.00 us
------------------------------------------------------------------------
  Thread latency:                                          120.00 us (100%)
"""
EVENTS = (
    "@rtlab clock t=10.5 wall=1764000000\n"
    "@rtlab load-start t=11.0 load=cpu seconds=10\n"
    "@rtlab load-end t=21.0 load=cpu status=failed reason=stress-ng: error x=1\n"
    "@rtlab done t=22.0 status=partial\n"
)
HWLAT = (
    "@rtlab hwlat-file name=hwlat.trace\n# tracer: hwlat\n"
    "@rtlab hwlat-file name=tracefs.before\nx 1\n@rtlab hwlat-end\n"
)


@pytest.mark.hostile
def test_every_reader_has_a_property_test():
    assert sorted(READERS) == sorted(PROPERTIES), "a reader of outside data without its property test here"
    for name, (where, _) in READERS.items():
        module, _, attr = where.partition(":")
        found: Any = importlib.import_module(module)
        for part in attr.split("."):
            found = getattr(found, part)  # the reader named in READERS exists
        assert callable(found), name


# --- documents and lines --------------------------------------------------------------------


@pytest.mark.unit
@reads("events")
@given(mangled(EVENTS))
@UNIT
def test_events(text):
    from rtlab.rundir import events

    for line in text.splitlines():
        event = bounded(lambda line=line: events.parse(line))
        if event is not None:
            assert all(untrusted.printable(v, lines=False) == v for v in event.fields.values())
            n = event.number("t")
            assert n is None or 0 <= n < 10**18


@pytest.mark.unit
@reads("cyclictest")
@given(mutated(CYCLICTEST))
@UNIT
def test_cyclictest(doc):
    from rtlab.rundir import cyclictest

    text = json.dumps(doc)
    found = bounded(lambda: cyclictest.threads(untrusted.json_loads(text, "cyclictest.json"), 400))
    for t in found or []:
        assert 0 <= t.cpu < 8192 and t.cycles >= sum(t.counts.values()) >= 0 and t.overflows >= 0


def _probe(name: str, raw: Any, argv: list[str]) -> Any:
    from rtlab.plan import probes

    return probes.parse(probes.PROBES[name], raw, argv)


def _counts_sane(result: Any) -> None:
    for threads in result.measures.values() if result else []:
        cpus = [t.cpu for t in threads if t.cpu >= 0]
        assert len(cpus) == len(set(cpus))  # no CPU hidden behind another
        assert 0 <= sum(t.cycles for t in threads) < 1 << 53  # no wrap into a negative count


@pytest.mark.unit
@reads("oslat")
@given(mutated(OSLAT))
@UNIT
def test_oslat(doc):
    text = json.dumps(doc)
    _counts_sane(bounded(lambda: _probe("oslat", untrusted.json_loads(text, "probe.json"), ["oslat"])))


@pytest.mark.unit
@reads("cyclicdeadline")
@given(mutated(CYCLICDEADLINE))
@UNIT
def test_cyclicdeadline(doc):
    text = json.dumps(doc)
    _counts_sane(
        bounded(lambda: _probe("cyclicdeadline", untrusted.json_loads(text, "p"), ["cyclicdeadline"]))
    )


@pytest.mark.unit
@reads("rt-tests-ipc")
@given(mutated(PMQTEST), st.sampled_from(["pmqtest", "ptsematest", "sigwaittest", "svsematest"]))
@UNIT
def test_rt_tests_ipc(doc, name):
    text = json.dumps(doc)
    found = bounded(lambda: _probe(name, untrusted.json_loads(text, "probe.json"), [name]))
    _counts_sane(found)
    for t in found.measures["latency"] if found else []:
        assert t.min_us <= t.avg_us <= t.max_us and t.cycles > 0


@pytest.mark.unit
@reads("rt-tests-signal-migrate")
@given(st.one_of(mutated(SIGNALTEST).map(lambda d: ("signaltest", d)),
                 mutated(MIGRATE).map(lambda d: ("rt-migrate-test", d)),
                 mutated(PI_STRESS).map(lambda d: ("pi_stress", d))))  # fmt: skip
@UNIT
def test_signaltest_and_rt_migrate_test(case):
    name, doc = case
    argv = [name, "-l", "5"]
    found = bounded(lambda: _probe(name, untrusted.json_loads(json.dumps(doc), "probe.json"), argv))
    _counts_sane(found)
    for t in found.measures.get("latency", []) if found else []:
        assert t.min_us <= t.avg_us <= t.max_us and t.cycles > 0
    if name == "pi_stress" and found:  # no latency: its count of inversions, one it really forced
        assert found.measures == {} and 0 < found.counts["inversions"] < 1 << 53
    if name == "rt-migrate-test" and found:  # the lowest priority waits by design: left out
        assert len(found.measures["latency"]) == len(doc["thread"]) - 1


@pytest.mark.unit
def test_signaltest_is_its_first_thread_and_rt_migrate_test_its_highest_tasks():
    from rtlab.plan import probes

    found = _probe("signaltest", SIGNALTEST, ["signaltest"]).measures["latency"]
    assert [(t.cycles, t.min_us, t.max_us, t.avg_us) for t in found] == [(1297, 25, 5177, 121.44)]
    tasks = _probe("rt-migrate-test", MIGRATE, ["rt-migrate-test", "-l", "5"]).measures["latency"]
    assert [(t.cycles, t.min_us, t.max_us, t.avg_us) for t in tasks] == [(5, 34, 89, 62.0), (5, 34, 77, 55.4)]
    # a total that is not its loops' (another count of loops, or an edited avg) is refused
    with pytest.raises(probes.InvalidProbe, match="not 6 loops' own"):
        _probe("rt-migrate-test", MIGRATE, ["rt-migrate-test", "-l", "6"])
    with pytest.raises(probes.InvalidProbe, match="count of loops"):
        _probe("rt-migrate-test", MIGRATE, ["rt-migrate-test"])


@pytest.mark.unit
@reads("placement")
@given(
    st.dictionaries(st.one_of(st.text(max_size=8), st.sampled_from(["0", "1", "2", "99999999999"])),
                    st.one_of(VALUES, st.fixed_dictionaries({"siblings": st.one_of(
                        st.text(max_size=12), st.sampled_from(["0,2", "1-3", "0-99999999", "9" * 40])
                    )})), max_size=6),
    st.sampled_from(["0-1", "0,2", None, "7-5"]),
)  # fmt: skip
@UNIT
def test_placement(cores, rt_cpus):
    """A board's sysinfo says which CPUs share a core: anything it says is a placement or
    nothing, never a crash or a list of a hundred million CPUs."""
    from rtlab.analysis import placement

    plan = {"loads": ["cpu"], "rt_cpus": rt_cpus, "housekeeping_cpus": "2-3", "loads_on": "housekeeping",
            "load_definitions": {"cpu": {"stress-ng": ["--matrix", "{workers}"], "on": None}}}  # fmt: skip
    found = bounded(lambda: placement.of(plan, cores, 4))
    for where in found["loads"].values() if found else []:
        assert all(0 <= m < 8192 and 0 <= s < 8192 for m, s in where["shares_cores"])
    assert all("\n" not in line for line in placement.warnings(found or {}, plan))


@pytest.mark.unit
@reads("history-lists")
@given(st.one_of(
    st.lists(st.one_of(st.integers(-(10**40) + 1, 10**40 - 1), st.none()), max_size=50).map(json.dumps),
    st.recursive(st.one_of(st.integers(), st.floats(), st.text(max_size=5), st.none()),
                 lambda inner: st.lists(inner, max_size=4), max_leaves=12).map(json.dumps),
    st.text(max_size=60),
))  # fmt: skip
@UNIT
def test_history_lists(text):
    """What the history store gives back for a histogram or a time axis (a shared PostgreSQL
    is written by others too): a flat list of bounded whole numbers, or one line."""
    found = bounded(lambda: untrusted.whole_numbers(text, "a list"))
    if found is not None:
        assert found == json.loads(text) and all(v is None or type(v) is int for v in found)
        assert all(v is None or abs(v) < 10**40 for v in found)


@pytest.mark.unit
@reads("history-histograms")
@given(st.one_of(
    st.lists(st.integers(-(10**18) + 1, 10**18 - 1), max_size=50).map(json.dumps),
    st.lists(st.integers(0, 10**6), max_size=20).map(lambda v: "[" + ",".join(map(str, v)) + "]"),
    st.text(alphabet="0123456789,- []nul", max_size=40),
    st.text(max_size=40),
))  # fmt: skip
@UNIT
def test_history_histograms(text):
    """A histogram's list from the store read as an array: exactly what JSON says, or one
    line; never a short read, two numbers taken for one, or an overflow."""
    found = bounded(lambda: untrusted.whole_number_array(text, "a list"))
    try:
        said = json.loads(text)
    except ValueError:  # a leading zero ("[01]"): not JSON, but the number is plain
        said = [int(v) for v in text[1:-1].split(",")] if found is not None else None
    if found is not None:
        assert found.dtype == np.int64 and found.tolist() == said
    else:
        ok = isinstance(said, list) and all(type(v) is int and abs(v) < 10**18 for v in said)
        assert not ok, text


@pytest.mark.unit
@reads("rtla")
@given(st.one_of(mangled(RTLA).map(lambda t: ("timerlat", t)), mangled(OSNOISE).map(lambda t: ("osnoise", t)),
                 mangled(HWNOISE).map(lambda t: ("hwnoise", t)),
                 mangled(OSNOISE_TOP).map(lambda t: ("osnoise-top", t))))  # fmt: skip
@UNIT
def test_rtla(case):
    name, text = case
    _counts_sane(bounded(lambda: _probe(name, text, ["rtla", name, "hist", "-E", "400"])))


@pytest.mark.unit
def test_osnoise_is_read_per_cpu_and_a_timerlat_table_is_not_osnoise():
    from rtlab.plan import probes

    found = _probe("osnoise", OSNOISE, ["rtla", "osnoise", "hist", "-b", "1", "-E", "10"])
    assert found.limit_us == 10 and list(found.measures) == ["noise"]
    cpu0, cpu1 = found.measures["noise"]
    assert (cpu0.cpu, cpu0.cycles, cpu0.overflows, cpu0.min_us, cpu0.max_us) == (0, 4901, 4030, 5, 91396)
    assert cpu1.counts == {5: 498, 6: 184, 7: 94, 8: 60, 9: 36} and cpu1.avg_us == 324.75
    with pytest.raises(probes.InvalidProbe, match="unknown columns"):
        _probe("osnoise", RTLA, ["rtla", "osnoise", "hist"])
    with pytest.raises(probes.InvalidProbe, match="unknown columns"):
        _probe("timerlat", OSNOISE, ["rtla", "timerlat", "hist"])


@pytest.mark.unit
def test_hwnoise_is_each_cpus_gaps_and_a_row_that_does_not_add_up_is_refused():
    from rtlab.plan import probes

    found = _probe("hwnoise", HWNOISE, ["rtla", "hwnoise", "-q"])
    cpu0, cpu1 = found.measures["noise"]
    assert (cpu0.cpu, cpu0.cycles, cpu0.max_us) == (0, 5028, 28027) and cpu0.avg_us == 868823 / 5028
    assert (cpu1.cycles, cpu1.max_us) == (9039, 28038) and found.counts == {"hardware gaps": 14067, "NMIs": 0}
    # the longest single gap above the period's total: not rtla's own
    with pytest.raises(probes.InvalidProbe, match="does not add up"):
        _probe("hwnoise", HWNOISE.replace("28027", "999999"), [])
    top = _probe("osnoise-top", OSNOISE_TOP, [])
    assert top.counts == {"hardware gaps": 910, "NMIs": 0, "IRQs": 8479, "softirqs": 0, "threads": 9282}
    cpu1 = top.measures["noise"][1]
    assert (cpu1.cycles, cpu1.max_us) == (507 + 5011 + 5525, 69883) and cpu1.avg_us == 2289720 / 11043
    with pytest.raises(probes.InvalidProbe, match="no summary table"):
        _probe("osnoise-top", HWNOISE, [])  # hwnoise's table is not osnoise top's
    clean = HWNOISE.replace("868823", "0").replace("443069", "0").replace("28027", "0").replace("5028", "0")
    assert _probe("hwnoise", clean, []).measures["noise"][0].cycles == 0  # a clean CPU is a result


@pytest.mark.unit
@reads("timeline")
@given(mangled(TIMELINE))
@UNIT
def test_timeline(text):
    from rtlab.rundir import timeline

    found = bounded(lambda: timeline.parse(text))
    assert found is not None and found.garbled >= 0


@pytest.mark.unit
@reads("ftrace")
@given(mangled(FTRACE))
@UNIT
def test_ftrace(text):
    from rtlab.rundir import ftrace

    bounded(lambda: ftrace.parse(text))


@pytest.mark.unit
@reads("rtla-analysis")
@given(mangled(RTLA_ANALYSIS))
@UNIT
def test_rtla_analysis(text):
    from rtlab.rundir import ftrace

    bounded(lambda: ftrace.parse_auto_analysis(text))


@pytest.mark.unit
@reads("hwlat")
@given(mangled(HWLAT))
@UNIT
def test_hwlat(text):
    from rtlab.runner import hwlat

    files = bounded(lambda: hwlat._files(text)) or {}
    assert set(files) <= set(hwlat.FILES)  # only the names the agent prints become files


@pytest.mark.unit
@reads("server-answer")
@given(st.binary(max_size=2000) | mangled(json.dumps({"job_ids": [7], "detail": "x"})).map(str.encode))
@UNIT
def test_server_answer(body):
    from rtlab.boundary import web

    answer = web.Answer(500, "\x1b[2Jboom", body)
    bounded(answer.json)
    said = bounded(answer.message)
    assert said is None or ("\x1b" not in said and len(said) <= 300)


# a kernel that unpacks and is read as an ELF to its note, in each way the build packs it
KERNEL_IMAGES = [bzimage(sized(packing(pvh_elf()), pvh_elf())) for packing in PACKINGS.values()]


@pytest.mark.unit
@reads("kernel-image")
@given(st.sampled_from(KERNEL_IMAGES), st.data())
@UNIT
def test_kernel_image(image, data):
    from rtlab.targets.qemu import pvh

    assert pvh.unpack(image) == pvh_elf()  # each sample is read to its note before it is mangled
    raw = bytearray(image)
    for _ in range(data.draw(st.integers(1, 4))):
        how = data.draw(st.sampled_from(["flip", "cut", "field"]))
        if how == "flip" and raw:
            raw[data.draw(st.integers(0, len(raw) - 1))] ^= data.draw(st.integers(1, 255))
        elif how == "cut":
            del raw[data.draw(st.integers(0, len(raw))) :]
        elif len(raw) >= 0x250:  # the header's numbers: sectors, protocol, payload's offset and length
            at = data.draw(st.sampled_from([0x1F1, 0x206, 0x248, 0x24C]))
            raw[at : at + 4] = data.draw(st.integers(0, 2**32 - 1)).to_bytes(4, "little")
    elf = bounded(lambda: pvh.unpack(bytes(raw)))
    assert elf is None or (elf.startswith(b"\x7fELF") and len(elf) <= pvh.ELF_BYTES)


@pytest.mark.unit
@reads("lava-log")
@given(st.data())
@UNIT
def test_lava_log(data):
    from rtlab.farm import lava

    bundle = io.BytesIO()
    with tarfile.open(fileobj=bundle, mode="w:gz") as tar:
        info = tarfile.TarInfo("run/events")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    import base64

    text = base64.b64encode(bundle.getvalue()).decode()
    lines = [json.dumps({"lvl": "target", "msg": "@rtlab-bundle-begin aaaaaaaaaaaa"})]
    lines += [json.dumps({"lvl": "target", "msg": text[i : i + 76]}) for i in range(0, len(text), 76)]
    lines += [json.dumps({"lvl": "target", "msg": "@rtlab-bundle-end aaaaaaaaaaaa"})]
    lines += [json.dumps({"lvl": "results", "msg": {"case": "job", "definition": "lava", "result": "pass"}})]
    log = data.draw(mangled("\n".join(lines)))
    uid = data.draw(st.none() | st.just("aaaaaaaaaaaa") | st.text(max_size=12))
    found = bounded(lambda: lava.bundle(lava.log_entries(log), uid))
    if found is not None:
        assert found.noise >= 0 and (found.uid is None or uid is None or found.uid == uid)


# --- folders: what a copied run, a board's archive or the store reads ---------------------------


def _tree(root: Path) -> dict[str, str]:
    """Every file under ROOT with its bytes' digest (links as their target)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = "-> " + str(path.readlink())
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _outside(tmp_path: Path, run: Path) -> dict[str, str]:
    return {k: v for k, v in _tree(tmp_path).items() if not k.startswith(run.name + "/")}


def _fresh(good_run: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    if run.exists():
        shutil.rmtree(run)
    shutil.copytree(good_run, run)
    return run


@pytest.mark.hostile
@reads("sysinfo")
@given(data=st.data())
@FOLDER
def test_sysinfo(good_run, tmp_path, data):
    from rtlab.rundir.disk import RunDir

    run = _fresh(good_run, tmp_path)
    doc = data.draw(mutated(json.loads((run / "sysinfo.json").read_text())))
    (run / "sysinfo.json").write_text(json.dumps(doc))
    before = _outside(tmp_path, run)
    bounded(RunDir(run).sysinfo)
    assert _outside(tmp_path, run) == before


@pytest.mark.hostile
@reads("run.json")
@given(data=st.data())
@FOLDER
def test_run_json(good_run, tmp_path, data):
    from rtlab.rundir.disk import RunDir

    run = _fresh(good_run, tmp_path)
    doc = data.draw(mutated(json.loads((run / "run.json").read_text())))
    (run / "run.json").write_text(json.dumps(doc))
    before = _outside(tmp_path, run)
    bounded(RunDir(run).manifest)
    assert _outside(tmp_path, run) == before


_STARVED = {"histogram": {}, "cycles": 0, "min": 1000000, "max": 0, "avg": None, "cpu": 0, "node": -1}


@pytest.mark.hostile
@given(
    names=st.lists(st.text(max_size=300), min_size=1, max_size=40, unique=True), segments=st.integers(1, 9)
)
@FOLDER
def test_a_load_whose_every_segment_starved_says_so_in_one_bounded_line(tmp_path, names, segments):
    # the reason a load failed is made of the segments' own thread names (a board's file):
    # whatever they are, it stays one line of bounded length, and every segment is counted lost
    from rtlab.rundir.disk import RunDir

    run = tmp_path / "run"
    shutil.rmtree(run, ignore_errors=True)
    doc = {"thread": {name: dict(_STARVED, cpu=cpu) for cpu, name in enumerate(names)}}
    for n in range(1, segments + 1):
        folder = run / "loads/idle/segments" / f"{n:03d}"
        folder.mkdir(parents=True)
        (folder / "cyclictest.json").write_text(json.dumps(doc))
    raw = bounded(lambda: RunDir(run).raw_load("idle"))
    assert raw.cyclictest is None and raw.segments_lost == tuple(f"{n:03d}" for n in range(1, segments + 1))
    assert raw.problem.startswith("no segment left a whole result (001: thread"), raw.problem
    assert raw.problem.splitlines() == [raw.problem] and untrusted.printable(raw.problem) == raw.problem
    assert len(raw.problem) < 600, len(raw.problem)


def _json_or_none(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except ValueError:
        return None


def _damage(data: st.DataObject, run: Path, outside: Path) -> None:
    """One of the things a copied or unpacked run folder can hold instead of what rtlab wrote."""
    files = sorted(
        p for p in run.rglob("*") if p.is_file() and not any(q.is_symlink() for q in (p, *p.parents))
    )
    path = data.draw(st.sampled_from(files))
    how = data.draw(st.sampled_from(["json", "bytes", "link", "dirlink", "numbered", "empty"]))
    doc = _json_or_none(path) if how == "json" else None
    if doc is not None:
        path.write_text(json.dumps(data.draw(mutated(doc))))
    elif how in ("bytes", "json"):  # a file no longer JSON (damaged before) gets its bytes flipped
        raw = bytearray(path.read_bytes()) or bytearray(b"x")
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
        path.write_bytes(bytes(raw))
    elif how == "link":
        path.unlink()
        path.symlink_to(outside)
    elif how == "dirlink" and path.parent != run:
        shutil.rmtree(path.parent)
        path.parent.symlink_to(outside.parent)
    elif how == "numbered":
        (path.parent / data.draw(st.sampled_from(["1x", "²", "0" * 9, "01"]))).mkdir(exist_ok=True)
    else:
        path.write_bytes(b"")


@pytest.mark.hostile
@reads("run-folder")
@given(data=st.data())
@FOLDER
def test_run_folder(good_run, tmp_path, data):
    from rtlab.rundir import readback

    outside = tmp_path / "victim" / "secret.json"
    outside.parent.mkdir(exist_ok=True)
    outside.write_text('{"secret": "s3cr3t-of-the-host"}')
    run = _fresh(good_run, tmp_path)
    for _ in range(data.draw(st.integers(1, 3))):
        _damage(data, run, outside)
    before = _outside(tmp_path, run)
    summary = bounded(lambda: readback.summary(run))
    assert "s3cr3t" not in json.dumps(summary or {})  # nothing of the host's file read in
    assert _outside(tmp_path, run) == before


@pytest.mark.hostile
@reads("archive")
@given(data=st.data())
@FOLDER
def test_archive(good_run, tmp_path, data):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(good_run, arcname=".")
    raw = bytearray(buffer.getvalue())
    for _ in range(data.draw(st.integers(0, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    into = tmp_path / "into"
    if into.exists():
        shutil.rmtree(into)
    before = _tree(tmp_path)
    bounded(lambda: unpack.unpack(bytes(raw), into, unpack.Limits.for_plan(None), "the archive"))
    after = {k: v for k, v in _tree(tmp_path).items() if not k.startswith("into/")}
    assert after == before
    assert not any(p.is_symlink() for p in into.rglob("*")) if into.exists() else True


@pytest.mark.hostile
@reads("history-index")
@given(data=st.data())
@FOLDER
def test_history_index(good_run, tmp_path, data):
    from rtlab.history.db import Store

    outside = tmp_path / "victim" / "secret.json"
    outside.parent.mkdir(exist_ok=True)
    outside.write_text('{"secret": "s3cr3t-of-the-host"}')
    run = _fresh(good_run, tmp_path)
    _damage(data, run, outside)
    db = tmp_path / "history.db"
    db.unlink(missing_ok=True)
    store = Store(str(db))
    try:
        before = {k: v for k, v in _outside(tmp_path, run).items() if not k.startswith("history.db")}
        added = bounded(lambda: store.add(run))
        after = {k: v for k, v in _outside(tmp_path, run).items() if not k.startswith("history.db")}
        assert after == before
        for a in added or []:
            assert a.outcome in ("added", "known", "damaged") and "\n" not in a.why
    finally:
        store.close()


# --- no way around the boundary ------------------------------------------------------------------

SRC = Path(__file__).resolve().parents[1] / "src" / "rtlab"
# Modules that read the host's own files, never a target's or a run folder's: each with why.
HOST_FILES = {
    "agent/__init__.py": "the agent's own parts, shipped with rtlab",
    "bisect/builds.py": "the kernel build's log, which it writes itself",
    "boot/image.py": "the user's kernel image (a link such as /boot/vmlinuz is the user's own)",
    "boot/machine.py": "the user's kernel image and initrd, copied to the board",
    "bisect/measured.py": "the prepare command's log, which it writes itself",
    "bisect/variants.py": "the user's Kconfig fragments",
    "children.py": "the host's own /proc",
    "cli/kernel.py": "the user's kernel config fragments",
    "cli/lava.py": "the user's job file",
    "cli/system.py": "the user's kernel config",
    "debian.py": "apt's own lists on the host",
    "kernel/fragments.py": "the user's kernel tree",
    "kernel/patches.py": "the user's patch series and the build's log",
    "kernel/recipe.py": "the build folder rtlab made",
    "farm/lava.py": "the lab's job and the user's log file (read with a cap)",
    "plan/loads.py": "the user's loads file",
    "rundir/liveness.py": "the host's own /proc",
    "campaigns/study.py": "the user's study file",
    "system/files.py": "the target's /proc and /sys on this host (local target, RTLAB_ROOT)",
    "targets/qemu/__init__.py": "the kernel and initramfs images on the host",
    "targets/qemu/elfdeps.py": "the host's programs and libraries, for the guest's initramfs",
    "targets/qemu/initramfs.py": "the host's programs and libraries, for the guest's initramfs",
    "targets/qemu/kernels.py": "Debian's kernel packages on the host",
    "targets/ssh_config.py": "the user's known_hosts",
    "boot/carry.py": "rtlab's own cache of the kexec-tools it carries to a board",
    "boot/package.py": "the image taken from the user's kernel package, unpacked with a size bound",
}
_PARSERS = ("json", "yaml", "tomllib", "pickle")


def _file_read(node: Any) -> str | None:
    """The call NODE as 'owner.name' when it reads a file (or parses one) by itself."""
    import ast

    if not isinstance(node, ast.Call):
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    owner = func.value if isinstance(func, ast.Attribute) else None
    whose = getattr(owner, "id", None) or getattr(owner, "attr", "") if owner is not None else ""
    reads = (name in ("read_text", "read_bytes") and whose != "untrusted") or (
        name == "open" and whose in ("", "io", "gzip")
    )
    parses = name in ("load", "loads") and whose in _PARSERS
    return f"{whose + '.' if whose else ''}{name}" if reads or parses else None


@pytest.mark.hostile
def test_no_module_reads_a_file_around_the_boundary():
    """Every read of a file in rtlab goes through rtlab.boundary, except modules that read only
    the host's own files (HOST_FILES, each with its reason): a new reader of a run folder or a
    target's output that opens a file another way fails here."""
    import ast

    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("boundary/") or rel in HOST_FILES:
            continue
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            call = _file_read(node)
            if call:
                found.append(f"{rel}:{node.lineno} {call}")
    assert found == [], "files read around rtlab.boundary: " + ", ".join(found)


@pytest.mark.unit
@pytest.mark.parametrize("avg", ["-nan", "inf"])
def test_a_thread_stopped_before_it_counted_a_sample_measured_nothing(tmp_path, avg):
    # cyclictest's average over no cycles: -nan, or inf where the thread stopped between taking
    # a sample and counting it (a starved riscv64 board's, min and max set): no samples, not damage
    from rtlab.rundir import cyclictest

    thread = '{"histogram": {}, "cycles": 0, "min": 1276, "max": 1276, "avg": AVG, "cpu": 1, "node": -1}'
    thread = thread.replace("AVG", avg)
    measured = '{"histogram": {"3": 5}, "cycles": 5, "min": 3, "max": 3, "avg": 3.00, "cpu": 0, "node": -1}'
    path = tmp_path / "cyclictest.json"
    path.write_text('{"file_version": 1, "thread": {"0": ' + measured + ', "1": ' + thread + "}}\n")
    data = cyclictest.read(path)
    assert cyclictest.idle_threads(data) == ["1"] and data["thread"]["1"]["avg"] is None
    with pytest.raises(InvalidResult, match=r"thread 1 \(CPU 1\) measured no samples"):
        cyclictest.threads(data, 100_000)
    path.write_text(path.read_text().replace('"cycles": 0', '"cycles": 1'))  # inf over a cycle is damage
    with pytest.raises(InvalidResult, match="thread 1 has avg null, not a number"):
        cyclictest.threads(cyclictest.read(path), 100_000)
