"""labgrid places as targets: a real labgrid coordinator and exporter (PyPI labgrid, gRPC) on
loopback export this machine's sshd as a place's NetworkService; rtlab acquires the place,
measures over SSH and releases it however the run ends; a place held by someone else is
refused and left held."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import (
    event_seen,
    needs_root,
    needs_tools,
    processes_named,
    read_json,
    rtlab,
    start_rtlab,
    stop_groups,
    wait_for,
)
from test_lava_server import wait_port
from test_ssh import free_port, remote_of

pytestmark = pytest.mark.farm

BIN = Path(sys.executable).parent


@dataclass
class Lab:
    coordinator: str
    env: dict[str, str]  # HOME with the board's key and host key, LG_COORDINATOR unset

    def client(self, *argv: str, user: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {**self.env, **({"LG_USERNAME": user} if user else {})}
        return subprocess.run([str(BIN / "labgrid-client"), "-x", self.coordinator, "-p", "desk", *argv],
                              env=env, capture_output=True, text=True, timeout=60)  # fmt: skip

    def holder(self) -> str:
        shown = self.client("show")
        assert shown.returncode == 0, shown.stderr
        return next(
            line.split(":", 1)[1].strip() for line in shown.stdout.splitlines() if "acquired:" in line
        )


@pytest.fixture(scope="module")
def lab(board, tmp_path_factory) -> Iterator[Lab]:  # noqa: F811
    if not (BIN / "labgrid-coordinator").exists():
        pytest.skip("make setup installs labgrid")
    tmp = tmp_path_factory.mktemp("labgrid")
    port = free_port()
    coordinator = f"127.0.0.1:{port}"
    # the board by the name in the SSH config that holds its key; its host key is known
    (tmp / "exporter.yaml").write_text(
        f"desk:\n  NetworkService:\n    address: board\n    username: root\n    port: {board.port}\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "LG_COORDINATOR"} | board.env
    started = []
    try:
        for name, argv in (
            ("coordinator", ["labgrid-coordinator", "-l", coordinator]),
            ("exporter", ["labgrid-exporter", "-c", coordinator, "-n", "rack", str(tmp / "exporter.yaml")]),
        ):
            log = (tmp / f"{name}.log").open("wb")
            started.append(subprocess.Popen([str(BIN / argv[0]), *argv[1:]], cwd=tmp, env=env,
                                            stdout=log, stderr=log, start_new_session=True))  # fmt: skip
            if name == "coordinator":
                wait_port(port)
        lab = Lab(coordinator, env)
        assert lab.client("create").returncode == 0
        assert lab.client("add-match", "rack/desk/NetworkService").returncode == 0
        wait_for(lambda: "rack/desk/NetworkService" in lab.client("show").stdout, 30)
        yield lab
    finally:
        stop_groups(started)


@needs_root
@needs_tools
def test_a_place_is_acquired_measured_over_ssh_and_released(lab, tmp_path):
    out = tmp_path / "run"
    target = f"labgrid:desk,coordinator={lab.coordinator}"
    done = rtlab("run", "--target", target, "--loads", "idle", "--duration", "2s", "--settle", "0s",
                 "--out", str(out), env=lab.env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    described = read_json(out / "run.json")["target"]
    assert described["kind"] == "labgrid" and described["place"] == "desk" and described["name"] == target
    assert described["host"] == "board"  # measured where the place's NetworkService points
    summary = read_json(out / "summary.json")
    assert summary["status"] == "complete" and summary["loads"]["idle"]["merged"]["samples"] > 0
    assert lab.holder() == "None"  # released
    assert processes_named("cyclictest", "stress-ng") == set()


@needs_root
@needs_tools
def test_an_interrupted_run_releases_the_place(lab, tmp_path):
    out = tmp_path / "run"
    target = f"labgrid:desk,coordinator={lab.coordinator}"
    proc = start_rtlab("run", "--target", target, "--loads", "idle,cpu", "--duration", "30s",
                       "--settle", "0s", "--out", str(out), env=lab.env)  # fmt: skip
    try:
        wait_for(lambda: event_seen(remote_of(out) / "events", "measure-start", load="idle"), 60)
        assert lab.holder() != "None"
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3
    assert read_json(out / "run.json")["status"] in ("partial", "failed")
    assert lab.holder() == "None"
    wait_for(lambda: processes_named("cyclictest", "stress-ng") == set(), 60)


def test_a_place_someone_else_holds_is_refused_and_left_held(lab, tmp_path):
    assert lab.client("acquire", user="colleague").returncode == 0
    try:
        done = rtlab("run", "--target", f"labgrid:desk,coordinator={lab.coordinator}", "--loads", "idle",
                     "--duration", "1s", "--out", str(tmp_path / "run"), env=lab.env)  # fmt: skip
        assert done.returncode == 2
        assert "already acquired by" in done.stderr and "colleague" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
        assert lab.holder().endswith("/colleague")
    finally:
        lab.client("release", user="colleague")
    missing = rtlab("run", "--target", "labgrid:desk,coordinator=127.0.0.1:1", "--duration", "1s",
                    "--out", str(tmp_path / "none"), env=lab.env)  # fmt: skip
    assert missing.returncode == 2 and "no labgrid coordinator answered at 127.0.0.1:1" in missing.stderr
