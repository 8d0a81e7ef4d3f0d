"""The SSH target against Debian's sshd on a loopback port, with a throwaway host key
and user key: a full campaign, a dropped connection and `rtlab collect`, host keys
unknown and changed, hostile names, a busy board, boards in parallel."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import (
    SSHD,
    TARGET_DIR,
    event_seen,
    free_port,
    keygen,
    needs_root,
    needs_tools,
    processes_in,
    read_json,
    rtlab,
    run_args,
    start_rtlab,
    start_time,
    wait_for,
)

pytestmark = [
    pytest.mark.host,
    needs_root,
    needs_tools,
    pytest.mark.skipif(not Path(SSHD).exists(), reason="make test installs openssh-server"),
]
RUNS = TARGET_DIR / "runs"  # the session's own folder on the loopback "board"


def remote_of(out: Path) -> Path:
    """The run's folder on the board, once run.json names it."""
    wait_for(lambda: (out / "run.json").exists() and "remote" in (out / "run.json").read_text())
    return Path(read_json(out / "run.json")["remote"])


def descendants(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    found, frontier = [], [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def layout(run: Path) -> set[str]:
    keep = {
        "run.json",
        "sysinfo.json",
        "events",
        "summary.json",
        "plan.loads",
        "cyclictest.json",
        "load.log",
    }
    return {p.relative_to(run).as_posix() for p in run.rglob("*") if p.name in keep}


def test_full_campaign_over_ssh_has_the_local_layout(board, tmp_path):
    out = tmp_path / "board-run"
    done = rtlab(*run_args(out, "idle,cpu", "2s", "--target", "ssh://board", settle="1s"), env=board.env)
    assert done.returncode == 0, done.stderr
    local = tmp_path / "local-run"
    assert rtlab(*run_args(local, "idle,cpu", "1s")).returncode == 0
    assert layout(out) == layout(local)
    manifest = read_json(out / "run.json")
    assert manifest["target"]["kind"] == "ssh" and manifest["status"] == "complete"
    # progress streamed live: cpu started after idle had measured its 2 s
    started = [datetime.fromisoformat(manifest["loads"][load]["started"]) for load in ("idle", "cpu")]
    assert (started[1] - started[0]).total_seconds() >= 2
    summary = read_json(out / "summary.json")
    assert summary["clock"] is not None and (out / "loads/idle/cyclictest.out").exists()
    for load in ("idle", "cpu"):
        data = read_json(out / "loads" / load / "cyclictest.json")
        threads = data["thread"].values()
        assert summary["loads"][load]["merged"]["samples"] == sum(t["cycles"] for t in threads)
        assert summary["loads"][load]["merged"]["max_us"] == max(t["max"] for t in threads)
    remote = Path(manifest["remote"])
    assert remote.parent == RUNS and remote.name == manifest["uid"]
    assert processes_in(remote) == [] and not remote.exists()


def test_a_connection_cut_mid_run_is_made_again_and_the_run_completes(board, tmp_path):
    """sshd's processes serving rtlab's connection killed mid-measurement (a network that
    dropped, an sshd restarted): the detached agent measures on, rtlab connects again, reads
    the events from where it stopped, and the run comes home whole."""
    out = tmp_path / "cut"
    proc = start_rtlab(*run_args(out, "idle,cpu", "4s", "--target", "ssh://board"), env=board.env)
    remote = remote_of(out)
    wait_for(lambda: event_seen(remote / "events", "measure-start", load="idle"))
    # kill every process serving it (the listener stays, and the detached agent is no
    # longer among sshd's descendants)
    serving = descendants(board.sshd.pid)
    assert serving, "no sshd process serves rtlab's connection"
    for pid in serving:
        with contextlib.suppress(ProcessLookupError):  # one that ended meanwhile is gone already
            os.kill(pid, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=90)
    assert proc.returncode == 0, stderr
    assert stderr.count("reconnected: the connection was lost") == 1, stderr
    manifest = read_json(out / "run.json")
    assert manifest["status"] == "complete"
    assert {v["status"] for v in manifest["loads"].values()} == {"complete"}
    summary = read_json(out / "summary.json")
    for load in ("idle", "cpu"):
        threads = read_json(out / "loads" / load / "cyclictest.json")["thread"].values()
        assert summary["loads"][load]["merged"]["samples"] == sum(t["cycles"] for t in threads) > 0
    # each event as it came, once: none handed on twice across the two connections (the run's
    # events file is the board's own copy once home, with the host's word about the gap)
    assert stderr.count("idle: measured") == 1 and stderr.count("cpu: measured") == 1, stderr
    events = (out / "events").read_text().splitlines()
    assert sum(line.startswith("@rtlab reconnected ") for line in events) == 1
    assert processes_in(remote) == [] and not remote.exists()


def test_a_board_that_stops_answering_is_given_up_then_collected(board, tmp_path):
    """A board that stops answering mid-run but keeps its TCP connection open (its real-time
    threads own every CPU; here a relay that passes nothing more) is found by SSH keepalives
    (ServerAliveInterval from the user's ssh config), tried once more for as long, then given
    up while it still measures: the run says so, nothing is fetched half-written, and once the
    board answers again `rtlab collect` brings the whole run home."""
    out = tmp_path / "silent"
    run = run_args(out, "idle,cpu", "15s", "--target", "ssh://silent")
    with _through_relay(board, tmp_path / "home", (1, 2), run) as (relay, env, proc):
        remote = remote_of(out)
        wait_for(lambda: event_seen(remote / "events", "measure-start", load="idle"))
        time.sleep(6)  # silence: twice the 3 s the board may say nothing, bridged by keepalives
        relay.passing.clear()  # new connections hang before SSH's first word
        relay.freeze()  # and the live one passes nothing more
        _, stderr = proc.communicate(timeout=120)
        given_up_done = event_seen(remote / "events", "done")
        relay.passing.set()  # the board answers again: connections made from now on pass
        assert proc.returncode == 3, stderr
        assert "reconnected" not in stderr, stderr  # no keepalive went unanswered before the freeze
        assert "connection-lost: " in stderr and "; no new connection within 3 s" in stderr, stderr
        assert not given_up_done, "rtlab waited for the board's plan to end"  # 30 s of it
        manifest = read_json(out / "run.json")
        assert manifest["status"] != "complete" and "rtlab collect" in manifest.get("reason", ""), manifest
        assert not (out / "loads/cpu/cyclictest.json").exists()  # nothing fetched while it measured
        # the board finishes on its own
        wait_for(lambda: event_seen(remote / "events", "done", status="complete"), 60)
        # another run with the same --out basename gets a folder of its own on the board and
        # leaves the uncollected one alone
        twin = tmp_path / "elsewhere" / "silent"
        again = rtlab(*run_args(twin, "idle", "1s", "--target", "ssh://board"), env=board.env)
        assert again.returncode == 0, again.stderr
        assert read_json(twin / "run.json")["remote"] != str(remote)
        assert (remote / "loads/cpu/cyclictest.json").exists()
        done = rtlab("collect", str(out), env=env)
        assert done.returncode == 0, done.stderr
    manifest = read_json(out / "run.json")
    assert manifest["status"] == "complete" and "collected" in manifest
    assert {v["status"] for v in manifest["loads"].values()} == {"complete"}
    assert read_json(out / "loads/cpu/cyclictest.json")["thread"]
    assert processes_in(remote) == [] and not remote.exists()
    # the board's own events came home, and the host's word on the lost connection after them, once
    events = (out / "events").read_text().splitlines()
    lost = [i for i, line in enumerate(events) if line.startswith("@rtlab connection-lost ")]
    board_done = [i for i, line in enumerate(events) if line.startswith("@rtlab done ")]
    assert len(lost) == 1 and board_done and lost[0] > board_done[-1], events
    assert "no new connection within 3 s" in events[lost[0]]


def test_a_second_ctrl_c_while_no_new_connection_comes_stops_the_wait(board, tmp_path):
    """A Ctrl-C while a lost connection is being made again waits to be sent on the new one;
    a second ends the wait: the run ends as a lost connection does, the board measuring on,
    and `rtlab collect` brings the run home once it has ended."""
    out = tmp_path / "stopped"
    run = run_args(out, "idle", "30s", "--target", "ssh://silent")
    # 8 s of silence, then as long again
    with _through_relay(board, tmp_path / "home", (2, 3), run) as (relay, env, proc):
        remote = remote_of(out)
        wait_for(lambda: event_seen(remote / "events", "measure-start", load="idle"))
        tried = len(relay.gates)
        relay.passing.clear()  # new connections hang before SSH's first word
        relay.freeze()  # and the live one passes nothing more
        wait_for(lambda: len(relay.gates) > tried, 60)  # the connection was given up: a new one is tried
        proc.send_signal(signal.SIGINT)
        time.sleep(1)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
        stopped_done = event_seen(remote / "events", "done")
        relay.passing.set()
        assert proc.returncode != 0, stderr
        assert "; stopped again while no new connection had come" in stderr, stderr
        assert "no new connection within" not in stderr, stderr
        assert not stopped_done, "the stop reached the board, which had no connection to take it"
        assert "rtlab collect" in read_json(out / "run.json").get("reason", "")
        wait_for(lambda: event_seen(remote / "events", "done", status="complete"), 60)
        done = rtlab("collect", str(out), env=env)
        assert done.returncode == 0, done.stderr
    assert read_json(out / "run.json")["status"] == "complete"
    assert processes_in(remote) == [] and not remote.exists()


def test_a_board_past_its_plan_is_stopped_before_its_folder_is_fetched(board, tmp_path):
    """Past its plan's time and the host's margin (the margin cut here, so that a 60-s plan is
    given up about 7 s in) the host stops waiting: it stops the agent on the board as a Ctrl-C
    would, then fetches the folder. What was measured comes home, nothing measures on, and the
    board keeps nothing."""
    out = tmp_path / "late"
    late = "import rtlab.targets.ssh as s; s.HOST_MARGIN_S = -70.0; from rtlab.cli import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", late, *run_args(out, "idle", "60s", "--target", "ssh://board")],
        env={**os.environ, **board.env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr
    assert "host-timeout: no end after 7 s" in done.stderr, done.stderr
    manifest = read_json(out / "run.json")
    assert manifest["loads"]["idle"]["status"] == "partial", manifest
    threads = read_json(out / "loads/idle/cyclictest.json")["thread"].values()
    assert (
        read_json(out / "summary.json")["loads"]["idle"]["merged"]["samples"]
        == sum(t["cycles"] for t in threads)
        > 0
    )
    events = (out / "events").read_text().splitlines()
    assert sum(line.startswith("@rtlab host-timeout ") for line in events) == 1
    remote = Path(manifest["remote"])
    assert processes_in(remote) == [] and not remote.exists()


def test_collect_while_the_board_still_measures(board, tmp_path):
    out = tmp_path / "busy"
    # 18 s: after its first segment, the refused run and the early collect have 15 s between
    # them (each a Python start and an SSH connection: 6 s were once too few beside a booting board)
    proc = start_rtlab(
        *run_args(out, "idle", "18s", "--target", "ssh://board", "--segment", "3s"), env=board.env
    )
    remote = remote_of(out)
    wait_for(lambda: event_seen(remote / "events", "segment-end", n="1", status="complete"))
    # another run on the same board is refused while this one measures
    other = rtlab(
        "run",
        "--target",
        "ssh://board",
        "--loads",
        "idle",
        "--duration",
        "1s",
        "--out",
        str(tmp_path / "other"),
        env=board.env,
    )
    uid = read_json(out / "run.json")["uid"]
    assert other.returncode == 2 and f"another rtlab run ({uid}" in other.stderr, other.stderr
    early = rtlab("collect", str(out), env=board.env)
    assert early.returncode == 3 and "still measuring" in early.stderr and "segments done" in early.stderr
    # what is done so far came home: the report shows the first segment's samples
    report = rtlab("report", str(out), "--format", "json")
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["loads"]["idle"]["merged"]["samples"] > 0
    assert (remote / "loads/idle/segments/001/cyclictest.json").exists()  # the board keeps it
    proc.communicate(timeout=60)
    assert proc.returncode == 0


def test_a_process_that_took_the_agents_pid_is_not_a_run_still_measuring(board, tmp_path, monkeypatch):
    """`rtlab collect` asks the board whether the run's agent still measures: by the PID and
    start time in agent.pid, so a process that took the PID since (the agent died hard, the
    board rebooted) never keeps a run from coming home."""
    from rtlab.targets import ssh

    for name, value in board.env.items():
        monkeypatch.setenv(name, value)
    remote = tmp_path / "run"
    remote.mkdir()
    other = subprocess.Popen(["sleep", "300"], start_new_session=True)
    target = ssh.SshTarget("ssh://board")
    try:
        assert target.still_running(str(remote)) is False  # no agent.pid: none ever started
        (remote / "agent.pid").write_text(f"{other.pid} {int(start_time(other.pid)) + 1}\n")
        assert target.still_running(str(remote)) is False
        (remote / "agent.pid").write_text(f"{other.pid} {start_time(other.pid)}\n")
        assert target.still_running(str(remote)) is True
        other.kill()
        other.wait()
        assert target.still_running(str(remote)) is False
    finally:
        target.close()
        other.kill()
        other.wait()


def test_a_follow_never_waits_for_a_process_that_took_the_agents_pid(board, tmp_path, monkeypatch):
    """A new connection's follow reads a run's events while its agent runs, the agent named by
    its PID and start time: on a board that rebooted meanwhile, a process that took the PID is
    not waited for; the events there are read, and the follow ends without a `done`."""
    from rtlab.targets import follow, ssh

    for name, value in board.env.items():
        monkeypatch.setenv(name, value)
    remote = tmp_path / "run"
    remote.mkdir()
    (remote / "events").write_text("@rtlab clock wall=1\n@rtlab load-start load=idle\n")
    other = subprocess.Popen(["sleep", "300"], start_new_session=True)
    target = ssh.SshTarget("ssh://board")
    try:
        loop, conn = target._conn_ready()
        said: list[str] = []
        folder, own = shlex.quote(str(remote)), (str(other.pid), start_time(other.pid))
        taken = (own[0], str(int(own[1]) + 1))
        assert loop.run(follow.events(conn, folder, taken, 1, said.append), 30) is False
        assert said == ["@rtlab load-start load=idle\n"]  # after the first, as a new connection's
        with pytest.raises(TimeoutError):  # the process it names is waited for
            loop.run(follow.events(conn, folder, own, 0, said.append), 4)
    finally:
        target.close()
        other.kill()
        other.wait()


def test_unknown_host_key_is_refused_with_its_fingerprint_then_accepted(board, tmp_path):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    shutil.copy(board.home / ".ssh/config", home / ".ssh/config")
    env = {"HOME": str(home), "SSH_AUTH_SOCK": ""}
    refused = rtlab("check", "--target", "ssh://board", env=env)
    assert refused.returncode == 2
    assert "unknown" in refused.stderr and board.fingerprint() in refused.stderr
    assert "--accept-new-host-key" in refused.stderr
    accepted = rtlab("check", "--target", "ssh://board", "--accept-new-host-key", "--format", "json", env=env)
    assert accepted.returncode in (0, 1), accepted.stderr  # the audit's verdict on this kernel
    line = (home / ".ssh/known_hosts").read_text().split()
    assert (
        line[0] == f"[127.0.0.1]:{board.port}"
        and line[2] == (board.keys / "host_key.pub").read_text().split()[1]
    )
    again = rtlab("check", "--target", "ssh://board", env=env)
    assert again.returncode in (0, 1)


def test_changed_host_key_is_refused_even_with_accept(board, tmp_path):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    shutil.copy(board.home / ".ssh/config", home / ".ssh/config")
    keygen(tmp_path / "impostor")
    algorithm, blob = (tmp_path / "impostor.pub").read_text().split()[:2]
    (home / ".ssh/known_hosts").write_text(f"[127.0.0.1]:{board.port} {algorithm} {blob}\n")
    done = rtlab("check", "--target", "ssh://board", "--accept-new-host-key", env={"HOME": str(home)})
    assert done.returncode == 2 and "CHANGED" in done.stderr and board.fingerprint() in done.stderr


def test_user_known_hosts_file_from_ssh_config_is_honoured(board, tmp_path):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    config = (board.home / ".ssh/config").read_text() + "  UserKnownHostsFile ~/boards/known\n"
    (home / ".ssh/config").write_text(config)
    env = {"HOME": str(home), "SSH_AUTH_SOCK": ""}
    # the key sits in ~/.ssh/known_hosts only: the config points elsewhere, so it is unknown
    shutil.copy(board.home / ".ssh/known_hosts", home / ".ssh/known_hosts")
    refused = rtlab("check", "--target", "ssh://board", env=env)
    assert refused.returncode == 2 and "unknown" in refused.stderr
    accepted = rtlab("check", "--target", "ssh://board", "--accept-new-host-key", env=env)
    assert accepted.returncode in (0, 1), accepted.stderr
    assert (home / "boards/known").read_text().split()[0] == f"[127.0.0.1]:{board.port}"
    assert (home / ".ssh/known_hosts").read_text() == (board.home / ".ssh/known_hosts").read_text()
    assert rtlab("check", "--target", "ssh://board", env=env).returncode in (0, 1)


def test_hostile_names_are_quoted_not_run(board, tmp_path):
    name = "run $(touch PWNED1); 'q' `touch PWNED2` ;touch PWNED3"
    out = tmp_path / name
    done = rtlab(
        *run_args(out, "idle", "1s", "--target", "ssh://board", "--storage-dir", str(tmp_path)),
        env=board.env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert (out / "loads/idle/cyclictest.json").exists()
    assert not Path(read_json(out / "run.json")["remote"]).exists()  # removed from the board once home
    for folder in (tmp_path, TARGET_DIR, RUNS, Path.home(), board.home):
        assert not list(folder.glob("PWNED*"))


def test_boards_in_parallel_one_failing(board, tmp_path):
    dead = free_port()  # nothing listens there
    done = rtlab(
        *run_args(
            tmp_path / "fleet",
            "idle",
            "1s",
            "--target",
            "ssh://board",
            "--target",
            f"ssh://root@127.0.0.1:{dead}",
        ),
        env=board.env,
    )
    assert done.returncode == 3
    assert "ssh://board: complete" in done.stderr
    assert f"ssh://root@127.0.0.1:{dead}: failed: cannot connect" in done.stderr
    assert read_json(tmp_path / "fleet/ssh_board/run.json")["status"] == "complete"


def test_no_rtlab_agent_left_on_the_board():
    leftovers = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _is_agent(p)]
    assert leftovers == []


def _is_agent(proc: Path) -> bool:
    try:
        return f"{TARGET_DIR}/agent.sh" in (proc / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def test_out_dot_never_touches_other_runs_on_the_board(board, tmp_path):
    others = RUNS / "someone-elses-run"
    others.mkdir(parents=True, exist_ok=True)
    (others / "events").write_text("@rtlab load-start load=idle seconds=600\n")
    here = tmp_path / "empty"
    here.mkdir()
    done = rtlab(*run_args(Path("."), "idle", "1s", "--target", "ssh://board"), env=board.env, cwd=here)
    assert done.returncode == 0, done.stderr
    assert (here / "loads/idle/cyclictest.json").exists()
    assert (others / "events").read_text() == "@rtlab load-start load=idle seconds=600\n"


def test_collect_of_a_whole_run_says_so_and_of_a_cut_one_what_is_missing(board, tmp_path):
    out = tmp_path / "home-already"
    assert rtlab(*run_args(out, "idle,cpu", "1s", "--target", "ssh://board"), env=board.env).returncode == 0
    remote = read_json(out / "run.json")["remote"]
    before = (out / "run.json").read_bytes()
    done = rtlab("collect", str(out), env=board.env)
    assert done.returncode == 0, done.stderr
    assert "is whole: its results came home already" in done.stderr and "gone" not in done.stderr
    assert (out / "run.json").read_bytes() == before  # nothing rewritten
    # a load's results lost here since: the board has nothing left, and collect says what is missing
    (out / "loads/cpu/cyclictest.json").unlink()
    done = rtlab("collect", str(out), env=board.env)
    assert done.returncode == 3
    assert f"has no {remote}" in done.stderr and "this run holds idle of idle, cpu" in done.stderr
    assert "tar" not in done.stderr and "again later" not in done.stderr


def test_a_run_whose_files_cannot_come_home_says_why_and_where_they_stay(board, tmp_path):
    """A run measured whole whose folder the board then sends past the run's cap ends in exit 3
    saying so and where the folder stays; `rtlab collect` fetches it once it fits."""
    out = tmp_path / "too-big"
    proc = start_rtlab(*run_args(out, "idle", "5s", "--target", "ssh://board"), env=board.env)
    remote = None
    try:
        remote = remote_of(out)
        wait_for(lambda: event_seen(remote / "events", "measure-start", load="idle"))
        with (remote / "junk").open("wb") as f:  # sparse: no disk used, a stream of zeros in tar
            f.truncate(1 << 30)
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 3, stderr
        said = stderr.splitlines()[-1]
        assert said.startswith("rtlab: the run is failed (ssh://board sent more than ")
        assert f"this run's cap; it stays on ssh://board in {remote}): see {out}/events" in said, said
        assert read_json(out / "run.json")["reason"] in said
        assert (remote / "loads/idle/cyclictest.json").is_file()  # on the board still
        # its summary says so, as a report of it does
        reasons = [w for w in read_json(out / "summary.json")["warnings"] if w["code"] == "run-reason"]
        assert [w["message"] for w in reasons] == [f"the run: {read_json(out / 'run.json')['reason']}"]
        shown = rtlab("report", str(out))
        assert "warning: the run: ssh://board sent more than " in shown.stderr, shown.stderr
        # Markdown escapes its own characters: the colon after ssh always, and an underscore in
        # the board's folder, which tempfile's random names hold one time in five
        md = rtlab("report", str(out), "--format", "md").stdout.replace("\\_", "_")
        assert f"it stays on ssh\\://board in {remote}" in md, md
        # what made it too big gone, collect brings the run home, and its reason goes with it
        (remote / "junk").unlink()
        done = rtlab("collect", str(out), env=board.env)
        assert done.returncode == 0, done.stderr
        manifest = read_json(out / "run.json")
        assert manifest["status"] == "complete" and "reason" not in manifest, manifest
        assert [v.get("reason") for v in manifest["loads"].values()] == [None], manifest
        assert not remote.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
        if remote is not None:
            shutil.rmtree(remote, ignore_errors=True)


def test_ctrl_c_over_ssh_stops_the_board_cleanly(board, tmp_path):
    out = tmp_path / "stopped"
    proc = start_rtlab(*run_args(out, "idle,cpu", "30s", "--target", "ssh://board"), env=board.env)
    remote = remote_of(out)
    wait_for(lambda: event_seen(remote / "events", "measure-start"))
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=90)
    assert proc.returncode == 3, stderr
    assert "Task was destroyed" not in stderr and "Traceback" not in stderr
    manifest = read_json(out / "run.json")
    assert (
        manifest["loads"]["idle"]["status"] == "partial" and manifest["loads"]["cpu"]["status"] == "not-run"
    )
    assert read_json(out / "loads/idle/cyclictest.json")["thread"]


class _Relay:
    """A TCP relay to sshd whose connections can be frozen: from then on no byte passes either
    way and the sockets stay open, as with a board that rebooted under a command and never
    answers again (its TCP state gone, its network down). Connections made later pass.
    Held, it passes nothing until released (a board slow to answer), losing nothing."""

    def __init__(self, port: int, held: bool = False) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.server.getsockname()[1])
        self.sockets: list[socket.socket] = [self.server]
        self.gates: list[threading.Event] = []
        self.passing = threading.Event()
        if not held:
            self.passing.set()
        threading.Thread(target=self._accept, args=(port,), daemon=True).start()

    def home(self, board: Any, home: Path, alias: str) -> dict[str, str]:
        """A HOME whose ssh config names this relay ALIAS, its host key known: the env for it."""
        (home / ".ssh").mkdir(parents=True)
        (home / ".ssh/config").write_text(
            f"Host {alias}\n  HostName 127.0.0.1\n  Port {self.port}\n  User root\n"
            f"  IdentityFile {board.keys}/user_key\n"
        )
        algorithm, blob = (board.keys / "host_key.pub").read_text().split()[:2]
        (home / ".ssh/known_hosts").write_text(f"[127.0.0.1]:{self.port} {algorithm} {blob}\n")
        return {"HOME": str(home), "SSH_AUTH_SOCK": ""}

    def _accept(self, port: int) -> None:
        while True:
            try:
                near, _ = self.server.accept()
            except OSError:
                return
            far, gate = socket.create_connection(("127.0.0.1", port)), threading.Event()
            self.sockets += [near, far]
            self.gates.append(gate)
            for a, b in ((near, far), (far, near)):
                threading.Thread(target=self._pump, args=(a, b, gate), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket, frozen: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := a.recv(1 << 16):
                self.passing.wait()
                if not frozen.is_set():
                    b.sendall(data)

    def freeze(self) -> None:
        for gate in self.gates:
            gate.set()

    def close(self) -> None:
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


@contextlib.contextmanager
def _through_relay(
    board: Any, home: Path, keepalive: tuple[int, int], run: list[str]
) -> Iterator[tuple[_Relay, dict[str, str], subprocess.Popen[str]]]:
    """`rtlab RUN` started on the board through a _Relay named `silent` in HOME, whose ssh
    config sends a keepalive after each KEEPALIVE[0] s of silence and gives up when KEEPALIVE[1]
    in a row went unanswered; at the end the relay passes again and closes, and an rtlab still
    running is killed."""
    relay = _Relay(board.port)
    env = relay.home(board, home, "silent")
    with (home / ".ssh/config").open("a") as f:
        f.write(f"  ServerAliveInterval {keepalive[0]}\n  ServerAliveCountMax {keepalive[1]}\n")
    proc = start_rtlab(*run, env=env)
    try:
        yield relay, env, proc
    finally:
        relay.passing.set()
        relay.close()
        if proc.poll() is None:
            proc.kill()


def _sleeps(seconds: str) -> list[int]:
    """Live processes whose command line is `sleep SECONDS`."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and (entry / "cmdline").read_bytes() == f"sleep\0{seconds}\0".encode():
                found.append(int(entry.name))
    return found


def test_a_board_silent_mid_command_ends_the_command_at_its_timeout(board, tmp_path, monkeypatch):
    """A command to a board that went silent under it (rtlab boot's poll of a rebooting board)
    fails at its timeout, and the next command connects anew: the wait for the channel's close
    no longer lasts until TCP gives up (a boot's wait took 566 s for a 45 s --boot-timeout)."""
    from rtlab.errors import RunFailed
    from rtlab.targets import ssh

    relay = _Relay(board.port)
    for name, value in relay.home(board, tmp_path / "home", "silent").items():
        monkeypatch.setenv(name, value)
    seconds = f"{600 + os.getpid() % 1000}.5"  # this test's own sleep, found by its command line
    target = ssh.SshTarget("ssh://silent")
    said: list[str] = []

    def call() -> None:
        try:
            target.shell(f"sleep {seconds}", timeout=3)
        except RunFailed as e:
            said.append(str(e))

    try:
        assert target.shell("echo up") == (0, b"up\n")
        waiting = threading.Thread(target=call, daemon=True)
        waiting.start()
        wait_for(lambda: _sleeps(seconds), 20)
        relay.freeze()
        waiting.join(60)
        assert not waiting.is_alive(), "the command outlived its 3 s timeout by a minute"
        assert len(said) == 1 and "no answer within 3 s" in said[0], said
        assert target.shell("echo again") == (0, b"again\n")  # a new connection
    finally:
        target.close()
        relay.close()
        for pid in _sleeps(seconds):  # a command without a terminal outlives its session
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not _sleeps(seconds), 10)


def test_a_run_folder_comes_home_while_its_bytes_come_and_not_after_they_stop(board, monkeypatch):
    """A run folder's download waits for as long as its bytes keep coming (a long soak's folder
    over a slow link is not cut at a fixed wait), gives up after IDLE_S in which nothing came,
    and ends at its whole's bound however slowly they trickle; each says how far it got."""
    from rtlab.targets import download, ssh

    monkeypatch.setattr(download, "IDLE_S", 5.0)
    for name, value in board.env.items():
        monkeypatch.setenv(name, value)
    seconds = f"{700 + os.getpid() % 1000}.5"  # this test's own sleep, found by its command line
    target = ssh.SshTarget("ssh://board")

    def fetch(command: str, into: Any, cap: int, whole: float) -> tuple[int, bytes]:
        # on the target's connection, made anew once a silent board's was dropped
        loop, conn = target._conn_ready()
        got = download.stream(
            conn, command, into, cap, whole, sender=target.name, drop=lambda: target._drop(conn)
        )
        return loop.run(got, 120)

    try:
        # a slow link: a byte a second for 8 s, longer in all than the idle wait
        into = io.BytesIO()
        slow = "for i in 1 2 3 4 5 6 7 8; do printf x; sleep 1; done"
        assert fetch(slow, into, 1 << 20, 600) == (0, b"")
        assert into.getvalue() == b"x" * 8
        # three bytes, then a board that says nothing
        into = io.BytesIO()
        with pytest.raises(TimeoutError, match=r"^3 bytes came, then nothing for 5 s$"):
            fetch(f"printf abc; sleep {seconds}", into, 1 << 20, 600)
        assert into.getvalue() == b"abc"
        # a trickle that never stops within the whole's bound
        into = io.BytesIO()
        trickle = "i=0; while [ $i -lt 100 ]; do printf y; sleep 0.5; i=$((i + 1)); done"
        with pytest.raises(TimeoutError, match=r"^\d+ bytes came, then not all within 4 s$"):
            fetch(trickle, into, 1 << 20, 4)
        assert into.getvalue() and set(into.getvalue()) == {ord("y")}
        # a stream that never pauses: each read finds bytes waiting, and the whole ends it still
        with open(os.devnull, "wb") as sink, pytest.raises(TimeoutError, match=r"then not all within 2 s$"):
            fetch("cat /dev/zero", sink, 1 << 50, 2)
    finally:
        target.close()
        for pid in _sleeps(seconds):  # a command without a terminal outlives its session
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not _sleeps(seconds), 10)


def test_a_ctrl_c_before_a_board_measures_stops_it_before_it_begins(board, tmp_path):
    """Several boards at once (only the main thread receives signals): a Ctrl-C while one board
    measures and another has not begun stops the first, what it measured kept, and the second
    before it measures, not after a whole run of its own."""
    relay = _Relay(board.port, held=True)  # the slow board: its connection waits on the relay
    env = relay.home(board, tmp_path / "home", "slow")
    (tmp_path / "home/.ssh/config").write_text(
        (tmp_path / "home/.ssh/config").read_text() + (board.home / ".ssh/config").read_text()
    )
    (tmp_path / "home/.ssh/known_hosts").write_text(
        (tmp_path / "home/.ssh/known_hosts").read_text() + (board.home / ".ssh/known_hosts").read_text()
    )
    out = tmp_path / "fleet"
    boards = ("--target", "ssh://board", "--target", "ssh://slow")
    proc = start_rtlab(*run_args(out, "idle", "60s", *boards), env=env)
    try:
        remote = remote_of(out / "ssh_board")
        wait_for(lambda: event_seen(remote / "events", "measure-start"))
        time.sleep(1.5)  # past cyclictest's start: stopped earlier, the board has measured nothing
        proc.send_signal(signal.SIGINT)
        wait_for(lambda: event_seen(remote / "events", "measure-end"))  # the signal has come
        relay.passing.set()
        _, stderr = proc.communicate(timeout=120)
    finally:
        relay.close()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, stderr
    # the board measuring stopped as one alone would, what it measured kept (on a busy host it
    # may not have measured yet: then it says so)
    idle = read_json(out / "ssh_board/run.json")["loads"]["idle"]
    if idle["status"] == "partial":
        assert read_json(out / "ssh_board/loads/idle/cyclictest.json")["thread"]
    else:
        assert idle["status"] == "failed" and (idle.get("reason") or "").startswith("stopped before"), idle
    assert "ssh://slow: failed: interrupted before measuring began" in stderr, stderr
    assert not list((out / "ssh_slow").glob("loads/*/cyclictest.json"))
