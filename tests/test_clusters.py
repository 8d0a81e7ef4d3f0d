"""Heterogeneous CPUs: the clusters of an 8-core big.LITTLE board (the Linaro talk's RB5:
4x A55, 3x A77, 1x A77 on a clock of its own) from a fake /proc and /sys read by the real
agent, and each load's statistics per cluster in every report format."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import xml.etree.ElementTree as ET

import pytest

from rtlab.analysis.summary import summarize
from rtlab.plan import Plan
from rtlab.report.formats import csv_format, html, junit, markdown, table
from rtlab.rundir.disk import RawLoad
from rtlab.rundir.events import parse
from rtlab.system.clusters import clusters
from test_agent import SHELLS, agent_cmd

pytestmark = pytest.mark.host

# CPU: (capacity, the CPUs of its cpufreq policy, cpuinfo part)
RB5 = {cpu: (448, "0 1 2 3", "0xd05") for cpu in range(4)}
RB5 |= {cpu: (1024, "4 5 6", "0xd0d") for cpu in range(4, 7)}
RB5[7] = (1024, "7", "0xd0d")


def rb5_root(root):
    blocks = []
    for cpu, (capacity, policy, part) in RB5.items():
        d = root / f"sys/devices/system/cpu/cpu{cpu}"
        (d / "cpufreq").mkdir(parents=True)
        (d / "cpu_capacity").write_text(f"{capacity}\n")
        (d / "cpufreq/related_cpus").write_text(f"{policy}\n")
        (d / "cpufreq/scaling_governor").write_text("schedutil\n")
        blocks.append(
            f"processor\t: {cpu}\nBogoMIPS\t: 38.40\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\n"
            f"CPU architecture: 8\nCPU variant\t: 0x1\nCPU part\t: {part}\nCPU revision\t: 0\n"
        )
    (root / "proc").mkdir(parents=True)
    (root / "proc/cpuinfo").write_text("\n".join(blocks))
    (root / "sys/devices/system/cpu/online").write_text("0-7\n")


@pytest.mark.parametrize("shell", SHELLS)
def test_an_8_core_big_little_board_has_its_three_clusters(shell, busybox_path, tmp_path):
    rb5_root(tmp_path)
    cmd, env = agent_cmd(shell, busybox_path, "sysinfo")
    done = subprocess.run(cmd, capture_output=True, text=True, env={**env, "RTLAB_ROOT": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    cpus = json.loads(done.stdout)["cpus"]
    assert cpus["cores"]["7"] == {"capacity": "1024", "clock_domain": "7", "type": "0x41:0xd0d"}
    found = clusters(cpus)
    assert [(c.name, c.cpus) for c in found] == [
        ("Cortex-A55 0-3", (0, 1, 2, 3)),
        ("Cortex-A77 4-6", (4, 5, 6)),
        ("Cortex-A77 7", (7,)),
    ]
    assert {c.basis for c in found} == {"capacity, clock domain, type"}


def test_what_tells_no_cluster_apart_makes_none():
    same = {str(cpu): {"capacity": "1024", "clock_domain": str(cpu)} for cpu in range(4)}
    assert clusters({"cores": same}) == []  # one policy per CPU, as on x86 servers
    assert clusters({"cores": {}}) == []
    hybrid = {"cores": {str(c): {} for c in range(6)}, "hybrid_core": "0-1", "hybrid_atom": "2-5"}
    assert [c.name for c in clusters(hybrid)] == ["P-core 0-1", "E-core 2-5"]
    # a VisionFive 2's four U74 harts alike, whatever the kernel gives
    u74 = {str(c): {"type": "sifive,u74-mc", "capacity": "1024"} for c in range(4)}
    assert clusters({"cores": u74}) == []


def _thread(cpu: int, samples: dict[int, int]) -> dict:
    cycles = sum(samples.values())
    avg = sum(v * n for v, n in samples.items()) / cycles
    histogram = {str(v): n for v, n in samples.items()}
    return {
        "cpu": cpu,
        "cycles": cycles,
        "min": min(samples),
        "max": max(samples),
        "avg": avg,
        "histogram": histogram,
    }


def test_each_load_is_reported_per_cluster_with_its_cpus_merged(busybox_path, tmp_path):
    rb5_root(tmp_path)
    cmd, env = agent_cmd("dash", busybox_path, "sysinfo")
    info = json.loads(
        subprocess.run(cmd, capture_output=True, text=True, env={**env, "RTLAB_ROOT": str(tmp_path)}).stdout
    )
    # the little cores slow, the prime one fastest: each CPU its own latencies
    samples = {cpu: {10 + cpu: 100, 40 + 5 * cpu: 10} for cpu in RB5}
    samples[5][300] = 1
    data = {"num_threads": 8, "thread": {str(cpu): _thread(cpu, s) for cpu, s in samples.items()}}
    plan = Plan(loads=("cpu",)).for_target("0-7", 8)
    manifest = {"id": "rb5", "plan": plan.to_json(), "loads": {"cpu": {"status": "complete"}}}
    lines = [
        "@rtlab clock t=1.00 wall=1700000000",
        "@rtlab load-start t=1.00 load=cpu seconds=60",
        "@rtlab measure-start t=6.00 load=cpu",
        "@rtlab measure-end t=66.00 load=cpu",
        "@rtlab load-end t=67.00 load=cpu status=complete",
        "@rtlab done t=67.00 status=complete",
    ]
    raw = {"cpu": RawLoad(cyclictest=data)}  # idle-like: the check of a load process is not what is tested
    summary = summarize(manifest, info, raw, [parse(line) for line in lines])
    groups = summary["loads"]["cpu"]["clusters"]
    assert list(groups) == ["Cortex-A55 0-3", "Cortex-A77 4-6", "Cortex-A77 7"]
    for name, members in (
        ("Cortex-A55 0-3", range(4)),
        ("Cortex-A77 4-6", range(4, 7)),
        ("Cortex-A77 7", [7]),
    ):
        values = [v for cpu in members for v, n in samples[cpu].items() for _ in range(n)]
        assert groups[name]["samples"] == len(values)
        assert groups[name]["min_us"] == min(values) and groups[name]["max_us"] == max(values)
        assert groups[name]["avg_us"] == pytest.approx(sum(values) / len(values), abs=0.01)
    assert summary["system"]["clusters"][2] == {
        "name": "Cortex-A77 7",
        "cpus": "7",
        "basis": "capacity, clock domain, type",
    }
    # every format shows the rows
    grouped = table.by_cluster([summary], ["rb5"])
    assert grouped is not None and [str(c) for c in grouped.columns[1].cells] == list(groups)
    assert "| cpu | Cortex-A77 4-6 | " in markdown.render([summary], ["rb5"])
    assert "rb5,rb5,cpu,complete,cluster:Cortex-A77 4-6," in csv_format.render([summary], ["rb5"])
    assert "cluster Cortex-A55 0-3" in html.render([summary], ["rb5"])


def smt_root(root):
    """4 CPUs as x86 numbers SMT: cores (0, 2) and (1, 3)."""
    for cpu in range(4):
        d = root / f"sys/devices/system/cpu/cpu{cpu}/topology"
        d.mkdir(parents=True)
        (d / "thread_siblings_list").write_text(f"{cpu % 2},{cpu % 2 + 2}\n")
    (root / "proc").mkdir(parents=True)
    (root / "proc/cpuinfo").write_text("".join(f"processor\t: {c}\n\n" for c in range(4)))
    (root / "sys/devices/system/cpu/online").write_text("0-3\n")


@pytest.mark.parametrize(("rt_cpus", "warned"), [("0-1", True), ("0,2", False)])
def test_a_load_on_smt_siblings_of_the_measuring_cpus_is_warned_of_in_every_format(
    busybox_path, tmp_path, rt_cpus, warned
):
    """rteval's care for placement: --rt-cpus 0-1 keeps the loads on 2-3, which are the SMT
    siblings of 0 and 1 (a core's threads share its pipelines and caches); whole cores (0,2)
    are fine. The placement table says what ran where."""
    smt_root(tmp_path)
    cmd, env = agent_cmd("dash", busybox_path, "sysinfo")
    done = subprocess.run(cmd, capture_output=True, text=True, env={**env, "RTLAB_ROOT": str(tmp_path)})
    info = json.loads(done.stdout)
    assert info["cpus"]["cores"]["1"] == {"siblings": "1,3"}
    plan = Plan(loads=("idle", "cpu"), rt_cpus=rt_cpus).for_target("0-3", 4)
    manifest = {"id": "smt", "plan": plan.to_json(), "loads": {}}
    summary = summarize(manifest, info, {}, [])
    house = "2-3" if warned else "1,3"
    assert summary["placement"]["measured_on"] == ("0-1" if warned else "0,2")
    assert summary["placement"]["loads"]["cpu"] == {
        "on": house, "shares_cpus": [], "shares_cores": [[0, 2], [1, 3]] if warned else []
    }  # fmt: skip
    assert summary["placement"]["loads"]["idle"]["on"] == "none"
    said = [w["message"] for w in summary["warnings"] if w["code"] == "placement"]
    expected = (
        "cpu: the load runs on SMT siblings of measuring CPUs (CPU 0 with 2, CPU 1 with 3): a core's "
        "threads share its pipelines and caches; give --rt-cpus whole cores (every sibling)"
    )
    assert said == ([expected] if warned else [])
    value = house + (", SMT siblings of CPU 0 (2), CPU 1 (3)" if warned else "")
    assert f"load cpu on {value}" in " ".join(table.render([summary], ["smt"]).split())  # wrapped anywhere
    page, text = html.render([summary], ["smt"]), markdown.render([summary], ["smt"])
    assert f"load cpu on {value}" in text and f"<dt>load cpu on</dt><dd>{value}</dd>" in page
    assert ("SMT siblings of measuring CPUs" in text and "SMT siblings of measuring CPUs" in page) is warned
    rows = {r["load"]: r for r in csv.DictReader(io.StringIO(csv_format.render([summary], ["smt"])))}
    assert rows["cpu"]["placement"] == f"measured on: {'0-1' if warned else '0,2'}; load cpu on: {value}"
    suite = ET.fromstring(junit.render([summary], ["smt"])).find("testsuite")
    assert suite is not None and suite.find("properties/property[@name='load cpu on']").get("value") == value
