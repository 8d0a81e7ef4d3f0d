"""Results where farms read them: a KCIDB document of real runs, checked with KernelCI's own
schema (kcidb-io) and against each run's summary, number for number."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import kcidb_io
import pytest

from conftest import needs_root, needs_tools, read_json, rtlab, run_args

pytestmark = [needs_root, needs_tools]


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "run"
    done = rtlab(*run_args(out, "idle,cpu", "2s"))
    assert done.returncode == 0, done.stderr
    return out


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


def test_a_bad_origin_is_one_line(measured):
    done = rtlab("export", "kcidb", str(measured), "--origin", "My Lab")
    assert done.returncode == 2 and "lowercase letters, digits and _" in done.stderr
