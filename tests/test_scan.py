"""rtlab scan: real stress-ng stressors of two classes under real cyclictest, ranked; a
stressor this stress-ng lacks and one that cannot run are listed, not fatal; an interrupted
scan goes on where it stopped."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from conftest import needs_root, needs_tools, processes_named, read_json, rtlab, start_rtlab, wait_for
from rtlab.campaigns.scan import Choice, choose, rank
from rtlab.plan.loads import read_file

pytestmark = pytest.mark.host

CLASSES = "security,pipe"
PIPE = ["fifo", "pipe", "pipeherd", "ring-pipe", "sendfile", "splice", "tee", "vm-splice"]


def test_choose_keeps_order_and_names_what_is_missing():
    lists = {"all": ["a", "b", "c", "d"], "x": ["b", "a"], "y": ["d"]}
    assert choose(lists, ["x", "y"], ["a", "zz"]) == Choice(("b", "a", "d"), ("zz",))
    assert choose(lists, [], []) == Choice(("a", "b", "c", "d"), ())
    results = {
        "a": {"status": "complete", "max_us": 90, "p99_99_us": 10},
        "b": {"status": "complete", "max_us": 90, "p99_99_us": 30},
        "c": {"status": "failed", "reason": "no"},
        "d": {"status": "complete", "max_us": 400, "p99_99_us": 5},
    }
    assert rank(results) == ["d", "b", "a"]


def test_a_ctrl_c_between_two_steps_keeps_what_stood_and_says_to_go_on(tmp_path):
    # the signal comes as the second step is said done, before the index is saved (seen: a
    # scan ended with typer's silent exit 130 instead of "run the same scan again")
    from rtlab.campaigns import loop
    from rtlab.errors import Stopped

    entries: dict = {}
    saved: list[set[str]] = []
    steps = [loop.Step(key, f"runs/{key}", key) for key in ("a", "b", "c")]

    def measure(step: loop.Step, folder: Path) -> tuple[dict, bool]:
        folder.mkdir(parents=True)
        return {"status": "complete"}, False

    def say(line: str) -> None:
        if line == "[2/3] b: complete":
            raise KeyboardInterrupt

    campaign = loop.Campaign(tmp_path, "scan", steps, lambda e: e["status"] == "complete",
                             lambda: saved.append(set(entries)))  # fmt: skip
    said = r"interrupted between two stressors; 2 of 3 kept in .+: run the same scan again to go on"
    with pytest.raises(Stopped, match=said):
        loop.run(campaign, entries, measure, say)
    assert saved[-1] == {"a", "b"}  # the second step's entry saved on the way out
    assert not (tmp_path / "runs" / "c").exists()


def _scan(out: Path) -> list[str]:
    return ["scan", "--class", CLASSES, "--stressors", "rtlab-no-such-stressor", "--per-stressor", "1s",
            "--top", "3", "--out", str(out)]  # fmt: skip


@needs_root
@needs_tools
def test_a_scan_of_two_classes_interrupted_then_resumed(tmp_path):
    out = tmp_path / "scan"
    proc = start_rtlab(*_scan(out))
    wait_for(lambda: (out / "scan.json").is_file() and len(read_json(out / "scan.json")["results"]) >= 2, 180)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 3, stderr
    kept = read_json(out / "scan.json")["results"]
    before = {name: (out / r["run"] / "run.json").read_bytes() for name, r in kept.items()}
    assert processes_named("stress-ng", "cyclictest") == set()

    done = rtlab(*_scan(out), timeout=600)
    assert done.returncode == 0, done.stderr
    assert f"resuming: {len(kept)} of 9 stressors already measured" in done.stderr
    doc = read_json(out / "scan.json")
    assert doc["order"] == ["apparmor", *PIPE] and doc["missing"] == ["rtlab-no-such-stressor"]
    assert set(doc["results"]) == set(doc["order"])
    # what was measured before the interruption is kept as it was, never measured again
    assert {name: (out / kept[name]["run"] / "run.json").read_bytes() for name in kept} == before
    # apparmor cannot run without AppArmor: listed with stress-ng's own words, not ranked
    assert doc["results"]["apparmor"]["status"] == "failed"
    assert "apparmor" not in doc["ranking"] and "apparmor: failed:" in done.stderr
    assert "not in this target's stress-ng: rtlab-no-such-stressor" in done.stderr
    # the ranking, recomputed from each stressor's own run: worst maximum first
    maxima = {}
    for name, r in doc["results"].items():
        summary = read_json(out / r["run"] / "summary.json")
        entry = summary["loads"][name]
        assert entry["status"] == r["status"]
        if entry["status"] == "complete":
            maxima[name] = (entry["merged"]["max_us"], entry["merged"]["p99_99_us"])
            assert (out / r["run"] / f"loads/{name}/load.argv").read_text().splitlines()[:2] == [
                "stress-ng",
                f"--{name}",
            ]
    assert doc["ranking"] == sorted(maxima, key=lambda n: (-maxima[n][0], -maxima[n][1]))
    top = read_file(out / "top-loads.toml")
    assert [load.name for load in top] == doc["ranking"][:3]
    assert top[0].stress_ng == (f"--{doc['ranking'][0]}", "{workers}")
    assert processes_named("stress-ng", "cyclictest") == set()


def test_an_unknown_class_is_one_line(tmp_path):
    done = rtlab("scan", "--class", "pipe,rtlab-nope", "--out", str(tmp_path / "s"))
    assert done.returncode == 2
    assert "knows no class rtlab-nope" in done.stderr and not (tmp_path / "s").exists()


def test_a_stressor_named_as_a_built_in_load_comes_out_usable(tmp_path):
    # stress-ng's `cpu` stressor is not rtlab's `cpu` load: the loads file names it apart,
    # and `rtlab run --loads-file` takes what `rtlab scan` wrote
    out = tmp_path / "scan"
    done = rtlab("scan", "--stressors", "cpu", "--per-stressor", "1s", "--settle", "0s", "--out", str(out))
    assert done.returncode == 0, done.stderr
    top = read_file(out / "top-loads.toml")
    assert [load.name for load in top] == ["stress-ng-cpu"] and top[0].stress_ng == ("--cpu", "{workers}")
    run = tmp_path / "run"
    again = rtlab("run", "--loads-file", str(out / "top-loads.toml"), "--loads", "stress-ng-cpu",
                  "--duration", "1s", "--settle", "0s", "--out", str(run))  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert read_json(run / "summary.json")["loads"]["stress-ng-cpu"]["status"] == "complete"
