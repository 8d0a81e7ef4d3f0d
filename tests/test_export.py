"""Results where farms read them: a KCIDB document of real runs, checked with KernelCI's own
schema (kcidb-io) and against each run's summary, number for number."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import kcidb_io
import pytest
import requests

from conftest import measured_run, needs_root, needs_tools, read_json, rtlab, stop_groups, wait_for
from test_ssh import free_port

pytestmark = [pytest.mark.farm, needs_root, needs_tools]


@pytest.fixture(scope="module")
def measured(idle_cpu_run) -> Path:
    return idle_cpu_run


def export(*args: str) -> dict:
    done = rtlab("export", "kcidb", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_kcidb_document_validates_and_holds_the_runs_numbers(measured, tmp_path):
    board = tmp_path / "board"
    shutil.copytree(measured, board)
    info = read_json(board / "sysinfo.json")
    info["board"] = {"model": "StarFive VisionFive 2 v1.3B", "compatible": ["starfive,visionfive-2-v1.3b"]}
    (board / "sysinfo.json").write_text(json.dumps(info))
    manifest = read_json(board / "run.json")
    manifest["uid"] = "board0000001"  # another run of the same kernel, on a board
    (board / "run.json").write_text(json.dumps(manifest))
    same = rtlab("export", "kcidb", str(measured), str(measured))
    assert same.returncode == 2 and "the same run" in same.stderr
    doc = export(str(measured), str(board), "--origin", "rtlab_lab", "--deadline", "1s", "--no-worst")
    jsonschema.validate(doc, kcidb_io.schema.LATEST.json)  # the schema itself, not rtlab's call of it
    assert doc["version"] == {"major": kcidb_io.schema.LATEST.major, "minor": kcidb_io.schema.LATEST.minor}
    # one kernel: one checkout and one build, both runs' tests under it
    assert len(doc["checkouts"]) == 1 and len(doc["builds"]) == 1
    build = doc["builds"][0]
    summary = read_json(measured / "summary.json")
    assert build["architecture"] == summary["system"]["machine"]
    assert build["config_name"] == summary["system"]["preemption"]
    ids = [t["id"] for t in doc["tests"]]
    assert len(ids) == len(set(ids)) and all(i.startswith("rtlab_lab:") for i in ids)
    uid = read_json(measured / "run.json")["uid"]
    tests = {t["id"]: t for t in doc["tests"]}
    for load, entry in summary["loads"].items():
        assert tests[f"rtlab_lab:{uid}.{load}"]["status"] == "PASS"
        assert tests[f"rtlab_lab:{uid}.{load}.all.max"]["number"] == {
            "value": entry["merged"]["max_us"],
            "unit": "us",
        }
        for cpu, stats in entry["cpus"].items():
            assert tests[f"rtlab_lab:{uid}.{load}.cpu{cpu}.max"]["number"]["value"] == stats["max_us"]
            p = tests[f"rtlab_lab:{uid}.{load}.cpu{cpu}.p99_99"]
            if "p99_99_us" in stats["lower_bounds"]:
                assert "number" not in p and p["status"] == "MISS"
            else:
                assert p["number"]["value"] == stats["p99_99_us"]
    compatible = {t["environment"].get("compatible", [None])[0] for t in doc["tests"]}
    assert compatible == {None, "starfive,visionfive-2-v1.3b"}  # the host has no device tree
    # exported again: the same ids, so KCIDB updates its records instead of doubling them
    assert [t["id"] for t in export(str(measured), "--origin", "rtlab_lab", "--no-worst")["tests"]] == [
        i for i in ids if f":{uid}." in i
    ]


def test_a_missed_deadline_fails_and_a_failed_load_is_an_error(measured, tmp_path):
    doc = export(str(measured), "--deadline", "1us", "--no-worst")
    loads = [t for t in doc["tests"] if t["path"].count(".") == 1]
    assert {t["status"] for t in loads} == {"FAIL"}
    broken = tmp_path / "broken"
    shutil.copytree(measured, broken)
    (broken / "loads/cpu/cyclictest.json").write_text("{")
    doc = export(str(broken), "--no-worst")
    cpu = next(t for t in doc["tests"] if t["path"] == "rtlab.cpu")
    assert cpu["status"] == "ERROR" and "damaged cyclictest.json" in cpu["misc"]["reason"]
    assert not any(t["path"].startswith("rtlab.cpu.") for t in doc["tests"])  # no numbers for it


def test_the_worst_case_goes_with_its_refusal(measured):
    doc = export(str(measured))
    worst = [t for t in doc["tests"] if t["path"].endswith(".worst_1e_9")]
    assert worst and all(("number" in t) != ("refused" in t.get("misc", {})) for t in worst)


def test_each_probe_is_a_test_of_its_own_in_kcidb_and_squad(tmp_path_factory):
    """oslat and pi_stress measured beside cyclictest, then pi_stress's verdict turned to a
    failure (its JSON's return code): KCIDB and SQUAD carry each probe's status and maxima."""
    from rtlab.export import squad

    run = measured_run(tmp_path_factory, "probes", loads="idle", more=("--probe", "oslat,pi_stress"))
    document = read_json(run / "loads/idle/pi_stress/probe.json")
    (run / "loads/idle/pi_stress/probe.json").write_text(json.dumps({**document, "return_code": 1}))
    (run / "summary.json").unlink()  # made again from the files
    doc = export(str(run), "--origin", "rtlab_lab", "--no-worst")
    jsonschema.validate(doc, kcidb_io.schema.LATEST.json)
    summary = json.loads(rtlab("report", str(run), "--format", "json").stdout)
    oslat, pi = (summary["loads"]["idle"]["probes"][p] for p in ("oslat", "pi_stress"))
    assert oslat["status"] == "complete" and pi["status"] == "failed", (oslat, pi)
    tests = {t["path"]: t for t in doc["tests"]}
    assert tests["rtlab.idle.oslat"]["status"] == "PASS"
    assert tests["rtlab.idle.oslat.latency.max"]["number"]["value"] == oslat["merged"]["latency"]["max_us"]
    failed = tests["rtlab.idle.pi_stress"]
    assert failed["status"] == "ERROR" and failed["misc"]["reason"] == "pi_stress's JSON says return code 1"
    sent = squad.submission(summary, None, "uid0")
    assert (sent["tests"]["rtlab/idle-oslat"], sent["tests"]["rtlab/idle-pi_stress"]) == ("pass", "fail")
    assert sent["metrics"]["rtlab/idle-oslat-latency-max"]["value"] == oslat["merged"]["latency"]["max_us"]


def test_a_bad_origin_is_one_line(measured):
    done = rtlab("export", "kcidb", str(measured), "--origin", "My Lab")
    assert done.returncode == 2 and "lowercase letters, digits and _" in done.stderr


# --- SQUAD: a real server (pip's squad, its own migrations on SQLite, on loopback) ----------

SQUAD_ADMIN = Path(__file__).resolve().parents[1] / ".cache" / "squad" / "bin" / "squad-admin"
TOKEN = "rtlab0test0token0" + "0" * 23


@dataclass
class Squad:
    url: str

    def get(self, path: str) -> Any:
        answer = requests.get(
            f"{self.url}/api/{path}", headers={"Authorization": f"Token {TOKEN}"}, timeout=30
        )
        answer.raise_for_status()
        return answer.json()


@pytest.fixture(scope="module")
def squad(tmp_path_factory) -> Iterator[Squad]:
    if not SQUAD_ADMIN.exists():
        pytest.skip("make test-setup installs squad into .cache/squad")
    tmp = tmp_path_factory.mktemp("squad")
    env = {**os.environ, "DATABASE": f"ENGINE=django.db.backends.sqlite3:NAME={tmp}/db.sqlite3",
           "SECRET_KEY": "rtlab-test", "SQUAD_HOSTNAME": "127.0.0.1"}  # fmt: skip
    admin = [str(SQUAD_ADMIN)]
    for argv in (["migrate", "-v0"], ["users", "add", "--superuser", "lab", "--passwd", "x"],
                 ["users", "set-token", "lab", TOKEN]):  # fmt: skip
        subprocess.run(admin + argv, env=env, check=True, capture_output=True, timeout=600, cwd=tmp)
    port = free_port()
    server = subprocess.Popen(
        admin + ["runserver", f"127.0.0.1:{port}", "--noreload"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(tmp / "server.log").open("w"),
        start_new_session=True,
        cwd=tmp,
    )  # SQUAD keeps its files in its cwd
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: _answers(url), 60)
        auth = {"Authorization": f"Token {TOKEN}"}
        group = requests.post(
            f"{url}/api/groups/", data={"slug": "rt", "name": "rt"}, headers=auth, timeout=30
        )
        group.raise_for_status()
        project = {"slug": "vf2", "name": "vf2", "group": group.json()["url"], "enabled_plugins_list": []}
        requests.post(f"{url}/api/projects/", json=project, headers=auth, timeout=30).raise_for_status()
        yield Squad(url)
    finally:
        stop_groups([server])


def _answers(url: str) -> bool:
    try:
        return requests.get(f"{url}/api/", timeout=5).ok
    except requests.RequestException:
        return False


def test_runs_sent_to_squad_read_back_through_its_api(measured, squad, tmp_path):
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    where = ("--url", squad.url, "--team", "rt", "--project", "vf2")
    done = rtlab("export", "squad", str(measured), *where, "--build", "6.12-rt", "--environment", "desk",
                 "--token-file", str(token), "--deadline", "1s")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert TOKEN not in done.stdout + done.stderr
    builds = squad.get("builds/")["results"]
    assert [b["version"] for b in builds] == ["6.12-rt"]
    runs = squad.get(f"builds/{builds[0]['id']}/testruns/")["results"]
    assert len(runs) == 1 and runs[0]["job_id"] == read_json(measured / "run.json")["uid"]
    tests = {t["name"]: t["status"] for t in squad.get(f"testruns/{runs[0]['id']}/tests/")["results"]}
    summary = read_json(measured / "summary.json")
    assert tests == {f"rtlab/{load}": "pass" for load in summary["loads"]}
    metrics = {m["name"]: m for m in squad.get(f"testruns/{runs[0]['id']}/metrics/?limit=500")["results"]}
    for load, entry in summary["loads"].items():
        assert metrics[f"rtlab/{load}-max"]["result"] == entry["merged"]["max_us"]
        assert metrics[f"rtlab/{load}-max"]["unit"] == "us"
        for cpu, stats in entry["cpus"].items():
            assert metrics[f"rtlab/{load}-p99-cpu{cpu}"]["result"] == stats["p99_us"]
    assert metrics["rtlab/cpu-ops-per-s"]["result"] == summary["loads"]["cpu"]["throughput"]["ops_per_s"]
    # a wrong token is one line, exit 2
    token.write_text("not-the-token\n")
    refused = rtlab("export", "squad", str(measured), *where, "--token-file", str(token))
    assert refused.returncode == 2 and "refused the submission" in refused.stderr, refused.stderr
