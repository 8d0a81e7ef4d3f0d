"""The trust boundary, tried as an attacker would: each case a board, a log, a server or a
copied run folder could bring, held by behaviour (the CLI wherever it can reach the case).

Each test checks what a user would: the host's files untouched (their bytes), one line with
its exit code and no traceback, and the good data still read. The history's cases run on
SQLite and a real PostgreSQL in test_history.py.
"""

from __future__ import annotations

import base64
import http.server
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import AGENT, BUSYBOX, copy_of, read_json, rtlab
from rtlab.boundary import paths, untrusted, values
from rtlab.errors import RunFailed, UsageError
from rtlab.farm import server as lava_server
from rtlab.rundir import events
from test_hostile import FAKE_GUEST, lava_log, limited, run_bundle

# --- a board that names host files ------------------------------------------------------------


@pytest.mark.hostile
@pytest.mark.parametrize("name", ["../../../victim/secret.txt", "/tmp/rtlab-hostile-hwlat", ".bashrc", "a/b"])
def test_hwlat_files_a_board_names_never_leave_the_output_folder(tmp_path, victim, name):
    from rtlab.runner import hwlat
    from rtlab.targets import open_target
    from rtlab.targets.qemu.console import Console

    stream = tmp_path / "stream"
    stream.write_text(
        "@rtlab trace-start t=1 level=hwlat seconds=1 threshold_us=10 hypervisor=yes\n"
        "@rtlab trace-end t=2 spikes=0\n"
        f"@rtlab hwlat-file name={name}\nhost secret overwritten\n"
        "@rtlab hwlat-file name=hwlat.trace\n# tracer: hwlat\n@rtlab hwlat-end\n"
    )
    (tmp_path / "final").write_text("")
    script = tmp_path / "guest.py"
    script.write_text(FAKE_GUEST)
    target = open_target("qemu:debian-rt")
    target.console = Console([sys.executable, str(script), str(stream), str(tmp_path / "final")])  # type: ignore[attr-defined]
    out = tmp_path / "out" / "hwlat"
    try:
        assert target.console.wait_for("@rtlab-ready", 30)  # type: ignore[attr-defined]
        with pytest.raises(
            RunFailed, match="is not a file of the hwlat pass|is not a file of the hwlat pass rtlab"
        ):
            hwlat.run(target, out, 1, 10, None)
    finally:
        target.close()
    assert not out.exists()  # nothing written, in the folder or anywhere else
    assert not Path("/tmp/rtlab-hostile-hwlat").exists()


@pytest.mark.hostile
def test_a_known_hwlat_file_is_kept():
    files = untrusted_files("@rtlab hwlat-file name=hwlat.trace\n# tracer: hwlat\n@rtlab hwlat-end\n")
    assert files == {"hwlat.trace": "# tracer: hwlat\n"}


def untrusted_files(text: str) -> dict[str, str]:
    from rtlab.runner import hwlat

    return hwlat._files(text)


# --- servers --------------------------------------------------------------------------------------


class Recorder(http.server.BaseHTTPRequestHandler):
    """Records what reached it; as the first server, sends every request to `redirect_to`."""

    redirect_to = ""
    seen: list[dict[str, str]]

    def _answer(self) -> None:
        self.seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if self.redirect_to:
            self.send_response(307)
            self.send_header("Location", self.redirect_to + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps({"state": "Finished", "health": "Complete"}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer  # noqa: N815

    def log_message(self, *args: object) -> None:
        pass


def serve(handler: type[http.server.BaseHTTPRequestHandler]) -> tuple[str, http.server.ThreadingHTTPServer]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", server


@pytest.fixture
def two_origins() -> Iterator[tuple[str, str, list[dict[str, str]], list[dict[str, str]]]]:
    """A server that redirects everything (307) to a second one on another port (another origin)."""
    seen_a: list[dict[str, str]] = []
    seen_b: list[dict[str, str]] = []
    url_b, b = serve(type("B", (Recorder,), {"seen": seen_b}))
    url_a, a = serve(type("A", (Recorder,), {"seen": seen_a, "redirect_to": url_b}))
    yield url_a, url_b, seen_a, seen_b
    for server in (a, b):
        server.shutdown()
        server.server_close()


@pytest.mark.hostile
def test_the_squad_token_never_follows_a_redirect_to_another_origin(good_run, tmp_path, two_origins):
    url_a, url_b, seen_a, seen_b = two_origins
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    done = rtlab("export", "squad", str(good_run), "--url", url_a, "--team", "t", "--project", "p",
                 "--build", "b", "--environment", "e", "--token-file", str(token))  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "another origin" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert seen_a and seen_a[0]["auth-token"] == "s3cret-token"  # sent where it was meant to go
    assert seen_b == []  # and nowhere else
    assert "s3cret-token" not in done.stderr + done.stdout


@pytest.mark.hostile
def test_without_a_credential_a_redirect_is_followed(two_origins):
    url_a, _, seen_a, seen_b = two_origins
    record = lava_server.Server(url_a).job(1)
    assert record["state"] == "Finished" and len(seen_a) == 1 and len(seen_b) == 1
    assert "authorization" not in seen_b[0]


@pytest.mark.hostile
def test_the_lava_token_never_follows_a_redirect_to_another_origin(two_origins):
    url_a, _, seen_a, seen_b = two_origins
    with pytest.raises(RunFailed, match="rtlab sends no credential across origins"):
        lava_server.Server(url_a, token="s3cret").job(1)
    assert seen_a[0]["authorization"] == "Token s3cret" and seen_b == []


@pytest.fixture
def dripping_headers() -> Iterator[str]:
    """A server that answers with a status line, then one header byte every half second, for ever."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    stop = threading.Event()

    def serve_one() -> None:
        while not stop.is_set():
            try:
                listener.settimeout(0.5)
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                try:
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                    while not stop.is_set():
                        conn.sendall(b"a")
                        time.sleep(0.5)
                except OSError:
                    pass

    thread = threading.Thread(target=serve_one, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(5)
    listener.close()


@pytest.mark.unit
def test_a_server_dripping_its_headers_is_cut_at_the_deadline(dripping_headers):
    started = time.monotonic()
    with pytest.raises(RunFailed, match="took more than 2 s"):
        lava_server.Server(dripping_headers, deadline_s=2).job(1)
    assert time.monotonic() - started < 30  # the deadline, not a read's timeout, ended it


# --- memory from one number --------------------------------------------------------------------


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("where", "value", "said"),
    [
        ("count", 10**7, "outside 1..8192"),
        ("online", "0-99999999", "beyond the 8192 Linux can have"),
        ("hybrid_core", "0-99999999", "beyond the 8192 Linux can have"),
    ],
)
def test_one_number_in_a_boards_sysinfo_costs_no_memory(good_run, tmp_path, where, value, said):
    run = copy_of(good_run, tmp_path / "run")
    info = read_json(run / "sysinfo.json")
    info["cpus"][where] = value
    (run / "sysinfo.json").write_text(json.dumps(info))
    done = limited("report", str(run), "--format", "json")  # 2 GiB at most
    assert done.returncode == 0, done.stderr[-500:]
    summary = json.loads(done.stdout)
    assert any("sysinfo.json" in w["message"] and said in w["message"] for w in summary["warnings"])
    assert summary["loads"]["idle"]["status"] == "complete"


@pytest.mark.hostile
def test_a_cpu_list_beyond_linux_in_run_json_is_named(good_run, tmp_path):
    run = copy_of(good_run, tmp_path / "run")
    manifest = read_json(run / "run.json")
    manifest["plan"]["rt_cpus"] = "0-99999999"
    (run / "run.json").write_text(json.dumps(manifest))
    done = limited("report", str(run), "--format", "json")
    assert done.returncode == 0, done.stderr[-500:]
    assert "beyond the 8192" in done.stdout and "Traceback" not in done.stderr


@pytest.mark.hostile
def test_a_cpu_list_the_user_gives_is_bounded_too(tmp_path):
    done = limited("run", "--rt-cpus", "0-99999999", "--loads", "idle", "--duration", "1s", "--out",
                   str(tmp_path / "x"))  # fmt: skip
    assert done.returncode == 2 and "beyond the 8192" in done.stderr, done.stderr
    assert not (tmp_path / "x").exists()


# --- folders ----------------------------------------------------------------------------------


@pytest.mark.hostile
def test_a_load_folder_linked_to_another_run_is_not_read_as_this_runs(good_run, tmp_path):
    other = copy_of(good_run, tmp_path / "other")
    run = copy_of(good_run, tmp_path / "run")
    shutil.rmtree(run / "loads/idle")
    (run / "loads/idle").symlink_to(other / "loads/idle")
    done = rtlab("report", str(run), "--format", "json")
    assert done.returncode == 0, done.stderr
    idle = json.loads(done.stdout)["loads"]["idle"]
    assert idle["status"] == "failed" and "loads/idle is a link" in idle["reason"]
    assert idle.get("merged") is None  # none of the other run's numbers


@pytest.mark.hostile
def test_a_numbered_folder_that_is_no_number_is_not_read(good_run, tmp_path):
    run = copy_of(good_run, tmp_path / "run")
    (run / "loads/idle/trace/1x").mkdir(parents=True)
    (run / "loads/idle/segments/²").mkdir(parents=True)
    done = rtlab("report", str(run), "--format", "json")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert json.loads(done.stdout)["loads"]["idle"]["status"] == "complete"


@pytest.mark.hostile
def test_a_campaign_index_that_is_a_link_is_one_line(tmp_path, victim):
    out = tmp_path / "campaign"
    out.mkdir()
    (out / "repeats.json").symlink_to(victim)
    done = rtlab("run", "--loads", "idle", "--duration", "1s", "--repeat", "2", "--out", str(out))
    assert done.returncode == 2, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("rtlab:")]
    assert len(said) == 1 and "repeats.json is a link" in said[0] and "Traceback" not in done.stderr


# --- LAVA logs ----------------------------------------------------------------------------------


@pytest.mark.hostile
@pytest.mark.parametrize("cut", [False, True], ids=["between-lines", "inside-a-line"])
def test_kernel_lines_inside_the_bundle_are_skipped_and_counted(good_run, tmp_path, cut):
    log = lava_log(tmp_path / "job.log", run_bundle(good_run), noise=3, cut=cut)
    done = rtlab("lava", "import", "--log", str(log), "-o", str(tmp_path / "imported"))
    assert done.returncode == 0, done.stderr
    said = read_json(tmp_path / "imported" / "lava-import.json")
    assert said["console_lines_skipped"] > 0
    summary = read_json(tmp_path / "imported" / "summary.json")
    assert summary["loads"]["idle"]["status"] == "complete"
    assert (tmp_path / "imported" / "summary.json").read_bytes() == (good_run / "summary.json").read_bytes()


@pytest.mark.hostile
def test_a_cut_last_line_keeps_its_padding():
    """A kernel message in the bundle's last line, after its base64 padding: the line's start,
    padding and all, is the bundle's (CI once lost the last line this way, one run in ten)."""
    from rtlab.farm import lava

    data = bytes(range(256)) * 3 + b"x"
    text = base64.b64encode(data).decode()
    assert text.endswith("==")
    last = len(text) - len(text) % 76
    said = [text[i : i + 76] for i in range(0, last, 76)] + [text[last:] + "[ 9.000123] rcu: stall on CPU 0"]
    entries = [{"lvl": "target", "msg": m} for m in ["@rtlab-bundle-begin u1", *said, "@rtlab-bundle-end u1"]]
    found = lava.bundle(entries)
    assert found.damaged is None and found.data == data and found.noise == 1


@pytest.mark.hostile
def test_a_bundle_cut_off_says_so(good_run, tmp_path):
    log = lava_log(tmp_path / "job.log", run_bundle(good_run))
    kept = [line for line in log.read_text().splitlines() if "@rtlab-bundle-end" not in line]
    log.write_text("\n".join(kept[: len(kept) // 2]) + "\n")
    done = rtlab("lava", "import", "--log", str(log), "-o", str(tmp_path / "imported"))
    assert done.returncode == 3, done.stderr
    assert "begins but does not end (the log was cut off)" in done.stderr


def _second_bundle(good_run: Path, tmp_path: Path, uid: str = "f0f0f0f0f0f0") -> tuple[Path, str, str]:
    """A log with the job's bundle and, after it, another one (of UID, its loads failed)."""
    forged = copy_of(good_run, tmp_path / "forged")
    manifest = read_json(forged / "run.json")
    manifest["uid"] = uid
    manifest["loads"]["idle"] = {"status": "failed", "reason": "forged"}
    (forged / "run.json").write_text(json.dumps(manifest))
    (forged / "loads/idle/cyclictest.json").write_text("{}")
    real = tmp_path / "real.log"
    lava_log(real, run_bundle(good_run))
    lava_log(tmp_path / "forged.log", run_bundle(forged))
    lines = real.read_text().splitlines()
    forged_lines = [line for line in (tmp_path / "forged.log").read_text().splitlines() if '"target"' in line]
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines[:-1] + forged_lines + lines[-1:]) + "\n")
    return log, read_json(good_run / "run.json")["uid"], uid


@pytest.mark.hostile
def test_a_second_bundle_with_another_uid_never_replaces_the_jobs(good_run, tmp_path):
    log, uid, forged = _second_bundle(good_run, tmp_path)
    done = rtlab("lava", "import", "--log", str(log), "-o", str(tmp_path / "a"))
    assert done.returncode == 3 and "give --uid" in done.stderr and forged in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "a" / "run.json").exists()
    done = rtlab("lava", "import", "--log", str(log), "-o", str(tmp_path / "b"), "--uid", uid)
    assert done.returncode == 0, done.stderr
    assert read_json(tmp_path / "b" / "summary.json")["loads"]["idle"]["status"] == "complete"
    assert read_json(tmp_path / "b" / "lava-import.json")["uid"] == uid


@pytest.mark.hostile
def test_a_second_bundle_with_the_jobs_own_uid_is_refused(good_run, tmp_path):
    # the uid is in the job's definition, which others on a shared farm can read
    uid = read_json(good_run / "run.json")["uid"]
    log, _, _ = _second_bundle(good_run, tmp_path, uid=uid)
    done = rtlab("lava", "import", "--log", str(log), "-o", str(tmp_path / "a"), "--uid", uid)
    assert done.returncode == 3 and f"two run bundles of uid {uid}" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "a" / "run.json").exists()


@pytest.mark.unit
def test_a_server_that_never_accepts_is_unreachable_not_slow():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))  # bound, never listening: the connection is refused
    port = listener.getsockname()[1]
    try:
        with pytest.raises(UsageError, match="cannot reach .*check --url"):
            lava_server.Server(f"http://127.0.0.1:{port}", deadline_s=5).job(1)
    finally:
        listener.close()


@pytest.mark.hostile
def test_a_loads_output_cannot_add_fields_to_its_event(tmp_path):
    loads = tmp_path / "loads.toml"
    loads.write_text(
        '[loads.forge]\ncommand = ["sh", "-c", "echo error: x load=idle status=complete; exit 1"]\n'
    )
    out = tmp_path / "run"
    done = rtlab("run", "--loads-file", str(loads), "--loads", "forge", "--duration", "1s", "--settle", "1s",
                 "--out", str(out))  # fmt: skip
    assert done.returncode == 3, done.stderr
    ends = [line for line in (out / "events").read_text().splitlines() if line.startswith("@rtlab load-end")]
    assert len(ends) == 1 and "load=forge status=failed" in ends[0] and "load=idle" not in ends[0], ends
    assert "load:idle status:complete" in ends[0]  # the words kept, quoted


@pytest.mark.hostile
@pytest.mark.skipif(BUSYBOX is None, reason="make setup installs busybox")
def test_lava_report_reads_an_events_fields_not_its_reason(tmp_path):
    run = tmp_path / "run"
    (run / "loads/idle").mkdir(parents=True)
    (run / "loads/cpu").mkdir(parents=True)
    (run / "plan.loads").write_text("cpu\nidle\n")
    # as a board whose agent does not quote would write it: cpu's reason carries a forgery
    (run / "events").write_text(
        "@rtlab load-end t=1.0 load=cpu status=failed reason=stress-ng: x load=idle status=complete\n"
        "@rtlab load-end t=2.0 load=idle status=failed reason=boom\n"
    )
    done = subprocess.run(
        [BUSYBOX, "sh", str(AGENT), "lava-report", str(run)], capture_output=True, text=True
    )
    assert "lava-test-case idle --result fail" in done.stdout, done.stdout + done.stderr
    assert "lava-test-case cpu --result fail" in done.stdout
    assert "idle --result pass" not in done.stdout


# --- units of the boundary ------------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize("name", ["..", ".", "", "a/b", "/etc", "..x/", "a\x1b", "²", "x" * 101, ".hidden"])
def test_a_name_from_outside_becomes_no_path(name):
    assert not paths.is_component(name)
    with pytest.raises(paths.BadName):
        paths.component(name, "a load's name")


@pytest.mark.unit
def test_numbered_folders_are_numbers_only(tmp_path):
    for name in ("001", "2", "1x", "²", "0000001"):
        (tmp_path / name).mkdir()
    (tmp_path / "003").symlink_to(tmp_path / "001")
    assert [n for n, _ in paths.numbered(tmp_path)] == [1, 2]


@pytest.mark.unit
def test_no_link_anywhere_below_a_run(tmp_path, victim):
    (tmp_path / "run/loads").mkdir(parents=True)
    (tmp_path / "run/loads/idle").symlink_to(victim.parent)
    with pytest.raises(untrusted.Damaged, match="loads/idle is a link"):
        untrusted.read_bytes(tmp_path / "run/loads/idle/secret.txt", 100, root=tmp_path / "run")


@pytest.mark.unit
def test_a_tail_is_whole_lines_of_a_regular_file_reached_without_a_link(tmp_path, victim):
    """untrusted.read_tail, what a probe's last words are read with: never more than asked,
    never a line cut by the limit, never a link, a FIFO or a folder."""
    import os

    run = tmp_path / "run"
    (run / "p").mkdir(parents=True)
    log = run / "p" / "probe.log"
    log.write_bytes(b"first line\nsecond\n Failed!\n")
    assert untrusted.read_tail(log, 100, run) == log.read_bytes()  # shorter than the limit
    assert untrusted.read_tail(log, log.stat().st_size, run) == log.read_bytes()  # exactly it
    assert untrusted.read_tail(log, 11, run) == b" Failed!\n"  # "second\n" cut, so left out
    assert untrusted.read_tail(log, 9, run) == b" Failed!\n"  # a line that fits exactly is whole
    assert untrusted.read_tail(log, 3, run) == b""  # no whole line within the limit
    os.mkfifo(run / "p" / "fifo")
    (run / "p" / "folder").mkdir()
    for name in ("fifo", "folder"):
        with pytest.raises(untrusted.Damaged, match="not a regular file"):
            untrusted.read_tail(run / "p" / name, 100, run)
    (run / "p" / "link").symlink_to(victim)
    (run / "q").symlink_to(victim.parent)
    for path in (run / "p" / "link", run / "q" / victim.name):
        with pytest.raises(untrusted.Damaged, match="is a link"):
            untrusted.read_tail(path, 100, run)


_PIECES = st.lists(st.sampled_from([b"\n", b"a", b"\xff", b" Failed!", b"\r", b"\x00"]), max_size=60)


@pytest.mark.hostile
@settings(max_examples=300, deadline=None)
@given(data=st.one_of(st.binary(max_size=600), _PIECES.map(b"".join)), limit=st.integers(0, 700))
def test_any_file_s_tail_is_the_longest_run_of_whole_lines_within_the_limit(data, limit):
    """Whatever a board wrote, read_tail gives the file's longest ending that fits in LIMIT and
    begins a line (the whole file when it fits), never a byte more."""
    import tempfile

    if len(data) <= limit:
        expected = data
    else:  # line starts at or after the first byte the limit allows; none: nothing whole
        starts = [s for s in range(len(data) - limit, len(data) + 1) if data[s - 1 : s] == b"\n"]
        expected = data[starts[0] :] if starts else b""
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        (run / "probe.log").write_bytes(data)
        got = untrusted.read_tail(run / "probe.log", limit, run)
    assert got == expected and len(got) <= limit


@pytest.mark.unit
def test_a_start_in_the_future_is_not_kept():
    assert values.timestamp("2026-01-02T03:04:05Z")[0] == "2026-01-02T03:04:05Z"
    kept, why = values.timestamp("9999-01-01T00:00:00Z")
    assert kept is None and "in the future" in (why or "")


@pytest.mark.unit
def test_the_db_address_never_shows_its_password():
    from rtlab.history.address import shown_url

    assert shown_url("postgresql://bob:s3cret@host:5432/db") == "postgresql://bob@host:5432/db"
    assert shown_url("postgresql://bob:s3:c@ret@host/db").count("s3") == 0


@pytest.mark.hostile
def test_a_malformed_db_address_is_one_line_without_its_password(good_run, tmp_path):
    junit = tmp_path / "junit.xml"
    for url in ("postgresql://bob:s3cret@host:notaport/db", "postgresql://bob:s3cret@host:99999999/db"):
        done = rtlab("history", "list", "--db", url)
        assert done.returncode == 2 and "s3cret" not in done.stderr, done.stderr
        assert "bob@host" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    # a measured run keeps its JUnit file and its exit code when its history cannot be written
    bad = {"RTLAB_HISTORY_DB": "postgresql://bob:s3cret@h:x/db"}
    done = rtlab("run", "--loads", "idle", "--duration", "1s", "--settle", "0s", "--out", str(tmp_path / "r"),
                 "--history", "--junit", str(junit), env=bad)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert junit.is_file() and "s3cret" not in done.stderr
    assert "warning: not added to the history" in done.stderr and "Traceback" not in done.stderr


# --- probes -------------------------------------------------------------------------------------

_RTLA = """# Time unit is microseconds (us)
Index   IRQ-000   Thr-000
2             5         4
over:         0         0
count:        5         4
min:          2         2
avg:       2.00      2.00
max:          2         2
"""


def _probe(name: str, raw: object, argv: list[str]) -> object:
    from rtlab.plan import probes

    return probes.parse(probes.PROBES[name], raw, argv)


@pytest.mark.unit
def test_probe_counts_that_would_wrap_are_refused():
    from rtlab.plan.probes import InvalidProbe

    big = (1 << 53) - 1  # each below the bound, the two together beyond it (numpy's int64 wraps at 2**63)
    threads = {
        str(c): {"cpu": c, "min": 1, "max": 1, "avg": 1.0, "histogram": {"1": big, "2": 0}} for c in (0, 1)
    }
    with pytest.raises(InvalidProbe, match="more samples than any run can have"):
        _probe("oslat", {"thread": threads}, ["oslat"])
    threads["0"]["histogram"]["1"] = 1 << 62
    with pytest.raises(InvalidProbe, match="not a count|samples at"):
        _probe("oslat", {"thread": threads}, ["oslat"])


@pytest.mark.unit
def test_two_threads_on_one_cpu_are_refused_not_merged():
    from rtlab.plan.probes import InvalidProbe

    one = {"cpu": 0, "min": 1, "max": 1, "avg": 1.0, "histogram": {"1": 5, "2": 0}}
    with pytest.raises(InvalidProbe, match="two threads on CPU 0"):
        _probe("oslat", {"thread": {"0": one, "1": dict(one)}}, ["oslat"])
    for other in ("IRQ-000", "IRQ-0"):  # the same column, or the same CPU spelt otherwise
        with pytest.raises(InvalidProbe, match="two IRQ columns for CPU 0"):
            _probe("timerlat", _RTLA.replace("Thr-000", other), ["rtla"])


@pytest.mark.unit
@pytest.mark.parametrize("word", ["1_0", "١٠", "1e1", "+5", "0x5"])
def test_rtla_cells_are_ascii_digits_only(word):
    from rtlab.plan.probes import InvalidProbe

    assert _probe("timerlat", _RTLA, ["rtla"]) is not None  # the table as rtla prints it reads
    with pytest.raises(InvalidProbe):
        _probe("timerlat", _RTLA.replace("2             5", f"2          {word}"), ["rtla"])
    with pytest.raises(InvalidProbe):
        _probe("timerlat", _RTLA.replace("IRQ-000", "IRQ-٠٠٠"), ["rtla"])


# --- names ------------------------------------------------------------------------------------


@pytest.mark.hostile
def test_a_name_with_an_escape_never_reaches_a_terminal_or_a_report(good_run, tmp_path):
    done = rtlab(
        "run", "--loads", "idle", "--duration", "1s", "--out", str(tmp_path / "x"), "--name", "a\x1b[31mb"
    )
    assert done.returncode == 2 and "control characters" in done.stderr, done.stderr
    assert "\x1b" not in done.stderr and not (tmp_path / "x").exists()
    run = copy_of(good_run, tmp_path / "run")  # a run whose id came from elsewhere
    manifest = read_json(run / "run.json")
    manifest["id"] = "board\x1b]52;c;cm0=\x07\x1b[2J"
    (run / "run.json").write_text(json.dumps(manifest))
    (run / "summary.json").unlink()
    for fmt in ("table", "md", "csv", "html", "junit"):
        shown = rtlab("report", str(run), "--format", fmt)
        assert shown.returncode == 0, shown.stderr
        assert "\x1b" not in shown.stdout + shown.stderr and "\x07" not in shown.stdout + shown.stderr, fmt


# --- a board's answer to a planner's one read of many files -----------------------------------


@pytest.mark.hostile
def test_a_boards_dump_keeps_only_what_was_asked_and_a_failed_one_is_read_file_by_file(
    busybox_path, tmp_path
):
    from rtlab.system import tune
    from rtlab.system.files import AgentFiles, Root
    from test_agent import _LocalAgent
    from test_tune import board

    board(tmp_path)

    class Dumps(_LocalAgent):
        """The agent on this machine's fake /sys, its `file dump` answered as a board likes."""

        answer: tuple[int, str] = (0, "")

        def agent(self, args: list[str]) -> tuple[int, str]:
            if args[:2] == ["file", "dump"]:
                self.calls += 1
                return self.answer
            return super().agent(args)

    target = Dumps("busybox-ash", busybox_path, tmp_path)
    governor = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
    target.answer = (0, "\n".join([
        "U /sys/fs/cgroup/rtlab-rt",  # a folder not asked for: the planner asks for itself
        "F /etc/passwd", "cm9vdA==",  # a file not asked for
        f"U {governor}", "QUFB",  # unreadable, whatever follows it
        "F /proc/sys/kernel/timer_migration", "[ 12.345678] a kernel message on the console", "MA==",
        "F /proc/sys/kernel/sched_rt_runtime_us\x1b[2J", "MQ==",  # a path no file has
    ]))  # fmt: skip
    asked = ["/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor", "/proc/sys/kernel/*"]
    assert AgentFiles(target).read_all(asked) == {governor: None, "/proc/sys/kernel/timer_migration": "0"}
    # a dump that failed (a console's timeout): the plan reads file by file, the same plan
    target.answer, target.calls = (124, ""), 0
    cpus = tune.cpu_plan(Root(tmp_path), "2-3", None)
    assert tune.plan(AgentFiles(target), cpus) == tune.plan(Root(tmp_path), cpus)
    assert target.calls > 20


@pytest.mark.hostile
@settings(max_examples=300, deadline=None)
@given(
    files=st.dictionaries(
        st.from_regex(r"/[a-z0-9_.]{1,8}(/[a-z0-9_.]{1,8}){0,2}", fullmatch=True), st.binary(max_size=300)
    ),
    noise=st.text(max_size=200),
)
def test_any_dump_answer_gives_printable_asked_paths_and_a_well_formed_one_its_files(files, noise):
    # files.py's reader of `agent.sh file dump`: whatever a board prints, it never raises, and
    # keeps only printable absolute paths; what the agent prints for FILES reads back as read
    # gives each (bytes decoded with replacement, the trailing newlines dropped)
    from rtlab.system.files import _dumped

    for path, value in _dumped(noise).items():
        assert path.startswith("/") and untrusted.printable(path) == path
        assert value is None or isinstance(value, str)
    out = "".join(f"F {path}\n" + "".join(base64.encodebytes(data).decode()) for path, data in files.items())
    assert _dumped(out + "[  1.0] a kernel line\n") == {
        path: data.decode(errors="replace").rstrip("\n") for path, data in files.items()
    }


@pytest.mark.unit
@settings(max_examples=300)
@given(said=st.lists(st.text(max_size=300), max_size=5))
def test_any_console_a_hung_boot_left_gives_a_note_of_one_bounded_line(said):
    """The last line a hung boot printed goes into run.json and every report: whatever the
    guest said (escapes, U+2028, no line at all), the note is one line of bounded length."""
    from collections import deque

    from rtlab.targets.qemu import _hung

    console = type("Console", (), {"tail": deque(said)})()
    note = _hung("silent for 60 s while it booted", console)  # type: ignore[arg-type]
    assert note.startswith("its first boot hung (silent for 60 s while it booted")
    assert note.endswith(") and was stopped; it was booted once more")
    assert untrusted.one_line(note) == note and len(note.splitlines()) == 1
    assert len(note) <= 200 + 120 * len(untrusted.escaped("\U000e0041"))


@pytest.mark.unit
@settings(max_examples=300)
@given(reason=st.text(max_size=3000), kind=st.sampled_from(sorted(events.HOST_SAID)))
def test_any_reason_the_host_writes_is_one_bounded_line_read_back_as_written(reason, kind):
    """The host's word about a run quotes what came from outside: a lost connection's reason
    what a board's SSH server said, a guest's death QEMU's error, a LAVA job's failure the
    server's. Whatever it says (escapes, U+2028, thousands of characters), the event is one
    line under the reader's cut, read back with its kind and its reason, cut and made visible."""
    written = events.line(kind, reason=reason)
    assert written.endswith("\n") and len(written.splitlines()) == 1
    assert untrusted.one_line(written[:-1]) == written[:-1]
    assert len(written) <= events.MAX_CHARS
    event = events.parse(written)
    assert event is not None and event.kind == kind
    assert event.get("reason") == untrusted.one_line(reason[: events.REASON_CHARS])
