"""A real LAVA server on this machine: Debian's lava-server 2023.01 (its code unpacked by
`make test-setup`: the package depends on systemd-sysv and configures a system database in
its postinst), on a private PostgreSQL, with gunicorn, lava-scheduler and lava-worker started
by hand. `rtlab lava submit --wait` sends a job through its REST API, the worker runs it on
this machine's sshd as the board, and the run comes back as rtlab's; the token never shows."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from conftest import (
    PG_BIN,
    needs_root,
    needs_tools,
    postgres,
    processes_named,
    read_json,
    rtlab,
    start_rtlab,
    stop_groups,
)
from test_lava import make_job
from test_ssh import free_port

pytestmark = pytest.mark.farm

ROOT = Path(__file__).resolve().parents[1] / ".cache" / "lava-server"
LAVA_SERVER = ROOT / "usr/bin/lava-server"
needs_server = pytest.mark.skipif(
    not (LAVA_SERVER.exists() and PG_BIN is not None),
    reason="make test-setup unpacks lava-server and installs PostgreSQL",
)

DEVICE = """{{% extends 'ssh.jinja2' %}}
{{% set ssh_host = '127.0.0.1' %}}
{{% set ssh_port = {port} %}}
{{% set ssh_user = 'root' %}}
{{% set ssh_identity_file = '{key}' %}}
"""


@dataclass
class Lab:
    url: str
    token: str  # the API token of the lab's user


def wait_port(port: int, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on {port}"
            time.sleep(0.2)


@pytest.fixture(scope="module")
def lab(board, tmp_path_factory) -> Iterator[Lab]:  # noqa: F811
    tmp = tmp_path_factory.mktemp("lava-server")
    web_port = free_port()
    started: list[subprocess.Popen[bytes]] = []
    with postgres("lavaserver", "lavaserver") as pg_port:
        try:
            for folder in ("devices", "media", "dispatcher.d", "health-checks", "worker"):
                (tmp / folder).mkdir()
            env = {
                **os.environ,
                "PYTHONPATH": str(ROOT / "usr/lib/python3/dist-packages"),
                "DJANGO_SETTINGS_MODULE": "lava_server.settings.prod",
                "DATABASE_URL": f"postgres://lavaserver@127.0.0.1:{pg_port}/lavaserver",
                "SECRET_KEY": "rtlab-test",
                "ALLOWED_HOSTS": "127.0.0.1",
                "LAVA_SETTINGS_DJANGO_LOGFILE": str(tmp / "django.log"),
                "LAVA_SETTINGS_DEVICES_PATH": str(tmp / "devices"),
                "LAVA_SETTINGS_MEDIA_ROOT": str(tmp / "media"),
                "LAVA_SETTINGS_DISPATCHER_CONFIG_PATH": str(tmp / "dispatcher.d"),
                "LAVA_SETTINGS_HEALTH_CHECKS_PATH": str(tmp / "health-checks"),
                "LAVA_YAML_SETTINGS_DEVICE_TYPES_PATHS": f'["{ROOT}/usr/share/lava-server/device-types"]',
            }

            def manage(*argv: str) -> str:
                done = subprocess.run(["/usr/bin/python3", str(LAVA_SERVER), "manage", *argv],
                                      env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
                assert done.returncode == 0, done.stdout + done.stderr
                return done.stdout

            def start(name: str, *argv: str) -> None:
                log = (tmp / f"{name}.out").open("wb")
                started.append(
                    subprocess.Popen(argv, env=env, stdout=log, stderr=log, start_new_session=True)
                )

            manage("migrate")
            manage("users", "add", "--superuser", "--staff", "--passwd", "lab", "lab")
            token = manage("tokens", "add", "--user", "lab").strip().splitlines()[-1]
            manage("device-types", "add", "ssh")
            worker_token = re.findall(r"Token: (\S+)", manage("workers", "add", "w1"))[0]
            manage("devices", "add", "--device-type", "ssh", "--worker", "w1", "desk-01")
            (tmp / "devices/desk-01.jinja2").write_text(
                DEVICE.format(port=board.port, key=board.keys / "user_key")
            )
            start("gunicorn", "gunicorn3", "lava_server.wsgi", "--workers", "2", "--timeout", "120",
                  "--bind", f"127.0.0.1:{web_port}")  # fmt: skip
            wait_port(web_port)
            start("scheduler", "/usr/bin/python3", str(LAVA_SERVER), "manage", "lava-scheduler",
                  "--log-file", str(tmp / "scheduler.log"), "--user", "root", "--group", "root")  # fmt: skip
            start("worker", "lava-worker", "--name", "w1", "--url", f"http://127.0.0.1:{web_port}/",
                  "--token", worker_token, "--worker-dir", str(tmp / "worker"),
                  "--log-file", str(tmp / "worker.log"))  # fmt: skip
            yield Lab(f"http://127.0.0.1:{web_port}", token)
        finally:
            stop_groups(started)


@needs_root
@needs_tools
@needs_server
def test_a_job_submitted_to_a_lava_server_comes_back_as_a_run(lab, tmp_path):
    job, made = make_job(
        tmp_path, "--loads", "idle,cpu", "--duration", "2s", "--settle", "1s", "--name", "served"
    )
    assert made.returncode == 0, made.stderr
    token = tmp_path / "token"
    token.write_text(lab.token + "\n")

    run = tmp_path / "run"
    done = rtlab("lava", "submit", str(job), "--url", lab.url, "--token-file", str(token),
                 "--wait", "-o", str(run), timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    job_id = int(done.stdout.split()[0])
    assert f"job {job_id}: Finished" in done.stderr

    # what the server says of the job, read here independently
    api = f"{lab.url}/api/v0.2/jobs/{job_id}"
    headers = {"Authorization": f"Token {lab.token}"}
    record = requests.get(f"{api}/", headers=headers, timeout=30).json()
    assert record["health"] == "Complete" and record["state"] == "Finished"
    tests = requests.get(f"{api}/tests/?limit=1000", headers=headers, timeout=30).json()["results"]
    cases = {t["name"]: t for t in tests}

    summary = read_json(run / "summary.json")
    assert summary["status"] == "complete" and summary["run"] == "served"
    for load in ("idle", "cpu"):
        assert cases[load]["result"] == "pass"
        for cpu, stats in summary["loads"][load]["cpus"].items():
            assert float(cases[f"{load}.cpu{cpu}-max-latency"]["measurement"]) == stats["max_us"]
            assert float(cases[f"{load}.cpu{cpu}-p99.99-latency"]["measurement"]) == stats["p99_99_us"]

    # import by id gives the same run again
    again = tmp_path / "again"
    imported = rtlab(
        "lava", "import", str(job_id), "--url", lab.url, "--token-file", str(token), "-o", str(again)
    )
    assert imported.returncode == 0, imported.stderr
    assert read_json(again / "summary.json")["loads"] == summary["loads"]

    # the token is in no file of the run and no output
    for path in (*run.rglob("*"), *again.rglob("*")):
        if path.is_file():
            assert lab.token.encode() not in path.read_bytes(), path
    assert lab.token not in done.stdout + done.stderr + imported.stdout + imported.stderr
    assert processes_named("cyclictest", "stress-ng") == set()


@needs_root
@needs_tools
@needs_server
def test_a_wait_stopped_with_ctrl_c_leaves_the_job_to_the_server(lab, tmp_path):
    """Ctrl-C while --wait follows a job stops the wait, not the job (the farm's): rtlab says
    where the job goes on and how to import it once it has finished (as the test above does),
    and the server still has the job in hand. The test cancels it then, its own."""
    job, made = make_job(tmp_path, "--loads", "idle", "--duration", "1s", "--settle", "0s", "--name", "left")
    assert made.returncode == 0, made.stderr
    token = tmp_path / "token"
    token.write_text(lab.token + "\n")
    proc = start_rtlab("lava", "submit", str(job), "--url", lab.url, "--token-file", str(token), "--wait")
    try:
        assert proc.stderr is not None
        told = ""
        while not re.match(r"job \d+: ", told):  # the first state it follows: the job is the server's
            told = proc.stderr.readline()
            assert told, "rtlab ended before following the job"
        proc.send_signal(signal.SIGINT)
        out, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    job_id = int(out.split()[0])
    assert proc.returncode == 3, stderr
    assert f"job {job_id} goes on on the server ({lab.url}/scheduler/job/{job_id})" in stderr, stderr
    assert f"import it with rtlab lava import {job_id} --url {lab.url} --token-file {token}" in stderr, stderr
    api = f"{lab.url}/api/v0.2/jobs/{job_id}/"
    headers = {"Authorization": f"Token {lab.token}"}
    record = requests.get(api, headers=headers, timeout=30).json()
    assert record["health"] != "Canceled", record
    requests.get(f"{api}cancel/", headers=headers, timeout=30)
    deadline = time.monotonic() + 300
    while requests.get(api, headers=headers, timeout=30).json()["state"] != "Finished":
        assert time.monotonic() < deadline, f"job {job_id} was never canceled"
        time.sleep(1)
    assert processes_named("cyclictest", "stress-ng") == set()


@needs_server
def test_a_lava_server_refuses_a_bad_token_in_one_line(lab, tmp_path):
    job, made = make_job(tmp_path, "--loads", "idle")
    assert made.returncode == 0, made.stderr
    token = tmp_path / "token"
    token.write_text("not-a-token")
    done = rtlab("lava", "submit", str(job), "--url", lab.url, "--token-file", str(token))
    assert done.returncode == 2
    assert "give a valid --token-file" in done.stderr and "not-a-token" not in done.stderr
    # a job id the server does not have
    missing = rtlab("lava", "import", "999999", "--url", lab.url, "-o", str(tmp_path / "none"))
    assert missing.returncode == 2 and "HTTP 404" in missing.stderr
