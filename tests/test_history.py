"""rtlab history over real runs, in SQLite and in a real PostgreSQL, through the same tests.

Ten real runs of one load named "work": five quiet (a sleeping command beside cyclictest),
then five where the load is tests/spin.c, a SCHED_FIFO 99 busy loop taking CPU 0 for 5 ms
of every 10 ms, which makes cyclictest really late. A second kernel cannot exist on this
host: the busy runs' sysinfo.json is made to say another kernel release (a fake file tree,
the only one here), so the history holds two kernels, one worse than the other.
"""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from conftest import PG_BIN, needs_root, needs_tools, postgres, read_json, rtlab, spin_binary
from test_html_browser import CHROMIUM, chromium

pytestmark = [pytest.mark.spikes, needs_root, needs_tools]

NEXT_KERNEL = "6.12.0-rtlab-next"


@dataclass(frozen=True)
class Runs:
    quiet: Path  # a campaign of 5 repeats
    busy: Path
    damaged: Path


def _campaign(folder: Path, loads_file: Path) -> None:
    done = rtlab("run", "--loads-file", str(loads_file), "--loads", "work", "--duration", "3s",
                 "--settle", "0s", "--repeat", "5", "--out", str(folder), timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Runs:
    base = tmp_path_factory.mktemp("history")
    spin = spin_binary(base)
    quiet, busy = base / "quiet.toml", base / "busy.toml"
    quiet.write_text('[loads.work]\ncommand = ["sleep", "3600"]\n')
    busy.write_text(f'[loads.work]\ncommand = ["{spin}", "0", "30", "0", "100000", "0.01"]\non = "all"\n')
    _campaign(base / "quiet", quiet)
    _campaign(base / "busy", busy)
    for k in range(1, 6):
        path = base / "busy" / f"repeat-{k}" / "sysinfo.json"
        info = read_json(path)
        info["kernel"]["release"] = NEXT_KERNEL
        path.write_text(json.dumps(info))
    damaged = base / "damaged"
    shutil.copytree(base / "quiet" / "repeat-1", damaged)
    (damaged / "run.json").write_text('{"id": "cut off')
    return Runs(base / "quiet", base / "busy", damaged)


@pytest.fixture(scope="module")
def server() -> Iterator[int | None]:
    if PG_BIN is None:
        yield None
        return
    with postgres("rtlab", "rtlab") as port:
        yield port


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path) -> str:
    """A new, empty store of each kind for each test."""
    if request.param == "sqlite":
        return str(tmp_path / "history.db")
    port = request.getfixturevalue("server")
    if port is None:
        pytest.skip("make test-setup installs PostgreSQL")
    name = f"t{uuid.uuid4().hex[:12]}"
    subprocess.run(["psql", "-q", "-h", "127.0.0.1", "-p", str(port), "-U", "rtlab", "-d", "rtlab",
                    "-c", f"CREATE DATABASE {name}"], check=True, capture_output=True)  # fmt: skip
    return f"postgresql://rtlab@127.0.0.1:{port}/{name}"


def history(db: str, *args: str) -> subprocess.CompletedProcess[str]:
    return rtlab("history", *args, "--db", db, timeout=600)


def listed(db: str) -> list[dict]:
    done = history(db, "list", "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["runs"]


def _nearest_rank(values: list[int], counts: list[int], overflows: int, q: float) -> int | None:
    order = np.argsort(values)
    cum = np.cumsum(np.asarray(counts)[order])
    rank = math.ceil(q * (cum[-1] + overflows))
    return int(np.asarray(values)[order][np.searchsorted(cum, rank)]) if rank <= cum[-1] else None


def _pooled(folders: list[Path]) -> tuple[list[int], list[int], int]:
    values: list[int] = []
    counts: list[int] = []
    overflows = 0
    for folder in folders:
        h = read_json(folder / "summary.json")["loads"]["work"]["histograms"]["merged"]
        values += h["values"]
        counts += h["counts"]
        overflows += h["overflows"]
    return values, counts, overflows


@pytest.mark.host
def test_runs_go_in_once_and_come_back(runs, db):
    done = history(db, "add", str(runs.quiet), str(runs.busy), str(runs.damaged))
    assert done.returncode == 0, done.stderr
    assert done.stderr.count(": added (") == 10
    assert f"{runs.damaged}: damaged: " in done.stderr and "run.json" in done.stderr
    again = history(db, "add", str(runs.quiet), str(runs.busy))
    assert again.returncode == 0 and again.stderr.count(": known (") == 10, again.stderr
    found = listed(db)
    assert len(found) == 10
    assert [r["repeat"] for r in found] == [1, 2, 3, 4, 5] * 2
    assert [Path(r["path"]).parent for r in found] == [runs.quiet] * 5 + [runs.busy] * 5
    assert {r["kernel_release"] for r in found[5:]} == {NEXT_KERNEL}
    assert len({r["kernel"] for r in found}) == 2 and len({r["board"] for r in found}) == 1
    for r in found:  # each run as its own folder says
        manifest = read_json(Path(r["path"]) / "run.json")
        assert r["uid"] == manifest["uid"] and r["status"] == "complete" and r["loads"] == "work"
    newer = history(db, "list", "--kernel", NEXT_KERNEL, "--format", "json")
    assert [r["uid"] for r in json.loads(newer.stdout)["runs"]] == [r["uid"] for r in found[5:]]


@pytest.mark.host
def test_the_trend_by_kernel_recomputed(runs, db, tmp_path):
    assert history(db, "add", str(runs.quiet), str(runs.busy)).returncode == 0
    done = history(db, "trend", "--load", "work", "--metric", "p99.99", "--format", "json")
    assert done.returncode == 0, done.stderr
    points = json.loads(done.stdout)["loads"]["work"]
    assert [len(p["runs"]) for p in points] == [5, 5] and points[1]["kernel"].startswith(NEXT_KERNEL)
    for p, campaign in zip(points, (runs.quiet, runs.busy), strict=True):
        folders = [campaign / f"repeat-{k}" for k in range(1, 6)]
        # five runs: the mean of each run's own p99.99, with Student's t over them
        own = [_nearest_rank(*_pooled([folder]), 0.9999) for folder in folders]
        assert p["value"] == pytest.approx(float(np.mean(own)))
        half = stats.t.ppf(0.975, 4) * np.std(own, ddof=1) / math.sqrt(5)
        assert p["interval"] == pytest.approx([max(0.0, p["value"] - half), p["value"] + half])
        assert "the mean of their own p99.99, t over them" in p["note"]
    # the busy kernel is the worse one: p99.9, as the busy loop makes one wake-up in 100 late
    # (CPU 0's every 10 ms) and this VM's own hiccups of several ms, which can reach a quiet
    # run's p99.99, are far fewer than one in 1000
    done = history(db, "trend", "--load", "work", "--metric", "p99.9", "--format", "json")
    p999 = [p["value"] for p in json.loads(done.stdout)["loads"]["work"]]
    assert p999[1] > 5 * p999[0]
    # the exceedance rate above 1 ms, counted again from the histograms
    done = history(
        db, "trend", "--load", "work", "--metric", "exceed-rate", "--level", "1ms", "--format", "json"
    )
    rates = [p["value"] for p in json.loads(done.stdout)["loads"]["work"]]
    for rate, campaign in zip(rates, (runs.quiet, runs.busy), strict=True):
        values, counts, overflows = _pooled([campaign / f"repeat-{k}" for k in range(1, 6)])
        above = sum(c for v, c in zip(values, counts, strict=True) if v > 1000) + overflows
        assert rate == pytest.approx(above / (sum(counts) + overflows))
    assert history(db, "trend", "--metric", "max", "-o", str(tmp_path / "trend.txt")).returncode == 0
    assert NEXT_KERNEL in (tmp_path / "trend.txt").read_text()


@pytest.mark.host
def test_a_regression_is_found_confirmed_and_gated(runs, db):
    assert history(db, "add", str(runs.quiet), str(runs.busy)).returncode == 0
    # p99.9: the busy loop moves it from about a hundred µs to 5 ms, and this VM's rare
    # hiccups (up to 27 ms) do not (they move a quiet run's p99.99 at times)
    done = history(db, "regressions", "--metric", "p99.9", "--format", "json")
    assert done.returncode == 0, done.stderr
    changes = json.loads(done.stdout)["changes"]
    # Otava's change point at the first busy run, confirmed by compare's verdicts. Among the
    # quiet runs the shared machine itself may change (another job starting: seen once, p99.9
    # from 130 to 300 µs over the last two, and then confirmed too); within the busy ones,
    # whose p99.9 varies by less than compare's 10 % margin, no change is proposed.
    confirmed = {Path(c["path"]): c for c in changes if not c["newest"] and c["kind"] != "suspected"}
    assert confirmed[runs.busy / "repeat-1"]["kind"] == "regression"
    assert not {runs.busy / f"repeat-{k}" for k in range(2, 6)} & set(confirmed)
    found = confirmed[runs.busy / "repeat-1"]
    assert found["mean_after"] > found["mean_before"] and "compare: worse" in found["reason"]
    newest = [c for c in changes if c["newest"]]
    assert [Path(c["path"]) for c in newest] == [runs.busy / "repeat-5"]
    assert "newest against the 4 run(s) before it" in newest[0]["reason"]
    # against a quiet baseline the newest run is a regression: the gate fails
    # the quietest of the quiet runs, as a user would choose it: one with a host hiccup in it
    # (a 34 ms one once; its p99.99 32 ms) cannot show a busy run worse in exceedance
    quietest = min(runs.quiet.glob("repeat-[0-9]"), key=_run_max)
    assert history(db, "baseline", "set", str(quietest)).returncode == 0
    gated = history(db, "regressions", "--gate")
    assert gated.returncode == 1, gated.stderr
    assert "the newest run is a regression" in gated.stderr
    board = listed(db)[0]["board"]
    compared = rtlab("compare", "--baseline", f"board:{board}", str(runs.busy / "repeat-5"), "--db", db,
                     "--format", "json")  # fmt: skip
    assert compared.returncode == 0, compared.stderr
    verdicts = json.loads(compared.stdout)["runs"][1]["verdicts"]["loads"]["work"]
    assert verdicts["verdict"] == "worse"


@pytest.mark.host
def test_the_gate_holds_a_regression_until_it_is_accepted(runs, db):
    """Five quiet runs, then five busy ones: the newest is as bad as the four before it, so
    judged against them alone it passes; the regression at the first busy run still stands
    since the first run, and keeps the gate closed until it is accepted."""
    assert history(db, "add", str(runs.quiet), str(runs.busy)).returncode == 0
    gated = history(db, "regressions", "--metric", "p99.9", "--gate", "--format", "json")
    assert gated.returncode == 1, gated.stderr
    changes = json.loads(gated.stdout)["changes"]
    assert [c["kind"] for c in changes if c["newest"]] != ["regression"]  # the old gate's blind spot
    holding = [c for c in changes if c["holds_gate"] and not c["newest"]]
    assert runs.busy / "repeat-1" in {Path(c["path"]) for c in holding}
    said = gated.stderr.strip().splitlines()
    assert len(said) == len(holding)
    assert any(
        f"the regression at {runs.busy / 'repeat-1'}" in line and "rtlab history accept" in line
        for line in said
    )
    # accepted, each with its reason: the gate opens, the trend says so, a rebuild keeps it
    for c in holding:
        done = history(
            db, "accept", c["path"], "--load", c["load"], "--reason", "the new scheduler, on purpose"
        )
        assert done.returncode == 0, done.stderr
    assert history(db, "regressions", "--metric", "p99.9", "--gate").returncode == 0
    trend = history(db, "trend", "--metric", "p99.9", "--format", "json")
    marked = [p["change"] for p in json.loads(trend.stdout)["loads"]["work"] if p["change"]]
    assert any((m.get("accepted") or {}).get("reason") == "the new scheduler, on purpose" for m in marked)
    assert history(db, "rebuild").returncode == 0
    assert history(db, "regressions", "--metric", "p99.9", "--gate").returncode == 0
    # a reason is needed, and one line says so
    done = history(db, "accept", str(runs.busy / "repeat-1"), "--load", "work", "--reason", " ")
    assert done.returncode == 2 and "--reason is empty" in done.stderr


@pytest.mark.host
def test_concurrent_writers_lose_nothing(runs, db):
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "rtlab", "history", "add", str(runs.busy), str(runs.quiet), "--db", db],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outputs
    said = "".join(err for _, err in outputs)
    assert said.count(": added (") == 10 and said.count(": known (") == 30
    assert len({r["uid"] for r in listed(db)}) == len(listed(db)) == 10


@pytest.mark.host
def test_rebuild_from_the_folders(runs, db, tmp_path):
    moved = tmp_path / "quiet"
    shutil.copytree(runs.quiet, moved)
    assert history(db, "add", str(moved), str(runs.busy)).returncode == 0
    assert history(db, "baseline", "set", str(runs.busy / "repeat-1"), "--load", "work").returncode == 0
    before = listed(db)
    shutil.rmtree(moved)
    done = history(db, "rebuild")
    assert done.returncode == 0, done.stderr
    assert [f"{moved}/repeat-{k}: gone" in done.stderr for k in range(1, 6)] == [True] * 5
    assert done.stderr.count(": added (") == 5
    after = listed(db)
    assert [(r["uid"], r["repeat"], r["board"]) for r in after] == [
        (r["uid"], r["repeat"], r["board"]) for r in before[5:]
    ]
    shown = history(db, "baseline", "show", "--load", "work")
    assert shown.stdout.strip() == str(runs.busy / "repeat-1")


def _run_max(run: Path) -> int:
    """A run's largest wake-up latency (µs), from cyclictest's own JSON, every CPU."""
    return max(t["max"] for t in read_json(run / "loads" / "work" / "cyclictest.json")["thread"].values())


def _odd(runs: Runs, where: Path, case: str) -> Path:
    """A copy of a good run holding one value a board or a copied folder could bring."""
    run = where / case
    shutil.copytree(runs.quiet / "repeat-1", run)
    manifest = read_json(run / "run.json")
    manifest["uid"] = f"odd-{case}"
    info = read_json(run / "sysinfo.json")
    load = run / "loads" / "work"
    if case == "release":  # PostgreSQL refused it before; SQLite took it
        info["kernel"]["release"] = "6.12.0-" + "r" * 200
    elif case == "started":
        manifest["started"] = "2026-01-01T00:00:00Z" + "0" * 60
    elif case == "future":
        manifest["started"] = "9999-12-31T23:59:59Z"
    elif case == "trace":
        (load / "trace" / "1x").mkdir(parents=True)
    elif case in ("bucket", "cpu"):
        data = read_json(load / "cyclictest.json")
        thread = next(iter(data["thread"].values()))
        if case == "bucket":
            thread["histogram"]["1"] = 10**30
        else:
            thread["cpu"] = 10**11
        (load / "cyclictest.json").write_text(json.dumps(data))
    (run / "run.json").write_text(json.dumps(manifest))
    (run / "sysinfo.json").write_text(json.dumps(info))
    return run


ODD = ("release", "started", "future", "trace", "bucket", "cpu")


@pytest.mark.host
def test_odd_runs_are_added_or_named_and_never_stop_the_batch(runs, db, tmp_path):
    odd = [_odd(runs, tmp_path, case) for case in ODD]
    done = history(db, "add", *map(str, odd), str(runs.busy))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count(": added (") == len(ODD) + 5, done.stderr  # every one, each named
    found = {r["uid"]: r for r in listed(db)}
    assert len(found["odd-release"]["kernel"]) <= 200 and found["odd-release"]["kernel"].startswith(
        "6.12.0-rrr"
    )
    assert found["odd-started"]["started"] is None
    assert "in the future: kept out of the newest" in done.stderr
    assert found["odd-future"]["started"] is None
    # the future run is never the newest: the board's series ends with a run measured here
    assert listed(db)[-1]["uid"] != "odd-future"


@pytest.mark.host
def test_rebuild_keeps_the_index_whatever_the_folders_hold(runs, db, tmp_path):
    odd = [_odd(runs, tmp_path, case) for case in ODD]
    assert history(db, "add", *map(str, odd), str(runs.busy)).returncode == 0
    assert history(db, "baseline", "set", str(runs.busy / "repeat-1")).returncode == 0
    before = {r["uid"] for r in listed(db)}
    shutil.rmtree(odd[0] / "loads")  # one folder damaged since: named, the rest stays
    (odd[1] / "run.json").write_text('{"uid": ')
    done = history(db, "rebuild")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert f"{odd[1]}: damaged" in done.stderr
    after = {r["uid"] for r in listed(db)}
    assert after == before - {"odd-started"}  # the one no longer readable, and only it
    shown = history(db, "baseline", "show")
    assert shown.returncode == 0 and shown.stdout.strip() == str(runs.busy / "repeat-1")


@pytest.mark.host
def test_a_newer_store_is_one_line(tmp_path, runs):
    db = tmp_path / "history.db"
    assert history(str(db), "add", str(runs.busy)).returncode == 0
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE rtlab_meta SET value = '99' WHERE key = 'schema_version'")
    done = history(str(db), "list")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "schema version 99, newer than this rtlab's" in done.stderr


@pytest.mark.host
def test_a_store_of_the_first_version_is_migrated(tmp_path, runs):
    """A store written before acceptances (schema 1) gains their table when opened, its runs kept."""
    db = tmp_path / "history.db"
    assert history(str(db), "add", str(runs.busy)).returncode == 0
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE accepted")
        conn.execute("UPDATE rtlab_meta SET value = '1' WHERE key = 'schema_version'")
    assert len(listed(str(db))) == 5
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM rtlab_meta WHERE key = 'schema_version'").fetchone() == ("2",)
    done = history(str(db), "accept", str(runs.busy / "repeat-1"), "--load", "work", "--reason", "known")
    assert done.returncode == 0, done.stderr


@pytest.mark.host
def test_bad_history_input_is_one_line(tmp_path, runs):
    db = str(tmp_path / "history.db")
    assert history(db, "add", str(runs.busy)).returncode == 0
    for args, says in (
        (["list", "--since", "last week"], "give a date as YYYY-MM-DD"),
        (["trend", "--metric", "p50"], "choose from p99, p99.9, p99.99, max, exceed-rate"),
        (["trend", "--board", "no-such-board"], "no run of board 'no-such-board'"),
        (["baseline", "set", str(runs.quiet / "repeat-1")], "is not in the history store: add it first"),
        (["add", str(tmp_path / "missing")], "is not a folder"),
    ):
        done = history(db, *args)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and says in done.stderr, (
            args,
            done.stderr,
        )
    # a PostgreSQL that does not answer (nothing listens on port 1)
    for args in (["list"], ["add", str(runs.busy)]):
        done = history("postgresql://rtlab@127.0.0.1:1/rtlab", *args)
        says = "cannot open the history store postgresql+pg8000://rtlab@127.0.0.1:1/rtlab"
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and says in done.stderr, (
            args,
            done.stderr,
        )


@pytest.mark.unit
def test_a_db_address_is_shown_without_any_of_its_secrets():
    from rtlab.history.address import secrets_of, shown_url

    for url, shown in (
        ("postgresql://bob:S1@host:5432/db", "postgresql://bob@host:5432/db"),
        ("postgresql://bob:S1/x?y@host/db", "postgresql://bob@host/db"),  # / and ? in a password
        ("postgresql://bob:S1:c@S1@host/db", "postgresql://bob@host/db"),  # an @ written unencoded
        ("postgresql://bob@host/db?password=S1&sslmode=require", "postgresql://bob@host/db?password=***&sslmode=require"),
        ("postgresql://bob@host/db?sslpassword=S1&sslkey=S2&passfile=S3&auth_token=S4&client_secret=S5",
         "postgresql://bob@host/db?sslpassword=***&sslkey=***&passfile=***&auth_token=***&client_secret=***"),
        ("postgresql://bob@host/db?Pass%77ord=S1", "postgresql://bob@host/db?Pass%77ord=***"),
        ("postgresql://bob:S1@host:notaport/db?password=S2", "postgresql://bob@host:notaport/db?password=***"),
    ):  # fmt: skip
        assert shown_url(url) == shown, url
    # what a database's message must not repeat: each secret as the driver was given it
    found = secrets_of("postgresql+pg8000://bob:S1:c@S9@host/db?password=S2&password=S3&sslkey=S%204&user=x")
    assert sorted(found) == sorted(["S1:c", "S9", "S2", "S3", "S 4"])


@pytest.mark.host
def test_a_db_address_with_a_secret_or_no_driver_is_one_line_without_it(tmp_path):
    """Every form of a password in --db, and an address rtlab cannot open (a driver not
    installed, a SQLite URL with a user), is one line naming the fix, exit 2, secret unsaid."""
    for url, says in (
        ("postgresql://alice@127.0.0.1:1/rt?password=SECRET",
         "cannot open the history store postgresql+pg8000://alice@127.0.0.1:1/rt?password=***: "),
        ("postgresql://alice:SECRET@127.0.0.1:1/rt?sslpassword=SECRET&sslkey=SECRET",
         "--db postgresql+pg8000://alice@127.0.0.1:1/rt?sslpassword=***&sslkey=***: the driver refused"),
        ("postgresql+psycopg2://alice:SECRET@127.0.0.1:1/rt", "postgresql+psycopg2://alice@127.0.0.1:1/rt"),
        ("postgresql+nosuch://alice:SECRET@127.0.0.1:1/rt", "rtlab knows no such database driver"),
        ("sqlite://alice:SECRET@/x", "--db sqlite://alice@/x is not a SQLite address: give the store's file"),
    ):  # fmt: skip
        for args in (["list"], ["add", str(tmp_path)]):
            done = history(url, *args)
            said = done.stdout + done.stderr
            assert done.returncode == 2 and "SECRET" not in said and "Traceback" not in said, (url, said)
            assert len(done.stderr.strip().splitlines()) == 1 and says in done.stderr, (url, done.stderr)


@pytest.mark.host
def test_a_run_whose_load_is_a_link_is_added_without_its_numbers_and_says_why(runs, tmp_path):
    """A run whose loads/work links to another run's is read as `report` reads it: the load
    failed ("loads/work is a link"), said when it is added, and none of the other's numbers stored."""
    run = tmp_path / "linked"
    shutil.copytree(runs.busy / "repeat-1", run)
    manifest = read_json(run / "run.json")
    manifest["uid"] = "linked"
    (run / "run.json").write_text(json.dumps(manifest))
    shutil.rmtree(run / "loads" / "work")
    (run / "loads" / "work").symlink_to(runs.quiet / "repeat-1" / "loads" / "work")
    reported = json.loads(rtlab("report", str(run), "--format", "json").stdout)["loads"]["work"]
    assert reported["status"] == "failed" and reported["reason"].startswith("loads/work is a link")
    db = str(tmp_path / "history.db")
    done = history(db, "add", str(run))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    said = done.stderr.strip()
    assert len(said.splitlines()) == 1 and said.startswith(f"{run}: added ("), said
    assert said.endswith(f"): work failed: {reported['reason']}"), said
    (found,) = listed(db)
    assert found["uid"] == "linked" and found["status"] == "failed"
    with sqlite3.connect(tmp_path / "history.db") as conn:
        stats = conn.execute("SELECT status, samples, max_us FROM load_stats").fetchall()
        kept = conn.execute("SELECT count(*) FROM histograms").fetchone()[0]
        axes = conn.execute("SELECT count(*) FROM block_maxima").fetchone()[0]
    assert stats == [("failed", None, None)] and kept == 0 and axes == 0


@pytest.mark.host
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is installed by `make test`")
def test_the_html_trend_in_a_browser(runs, tmp_path):
    db = str(tmp_path / "history.db")
    assert history(db, "add", str(runs.quiet), str(runs.busy)).returncode == 0
    page = tmp_path / "trend.html"
    done = history(db, "trend", "--metric", "p99.9", "--format", "html", "-o", str(page))
    assert done.returncode == 0, done.stderr
    dom = chromium("--dump-dom", page.as_uri()).stdout
    assert dom.count("<svg") == 3  # the metric by kernel, the histograms overlaid, the block maxima
    assert NEXT_KERNEL in dom and '<td class="name regression">regression</td>' in dom
    assert any(len(d) > 500 for d in dom.split(' d="')[1:])  # drawn curves, not empty axes


@pytest.mark.unit
def test_otava_finds_the_shift_of_a_short_history_and_none_in_noise():
    from rtlab.history.changes import change_points

    rng = np.random.default_rng(1)
    # a board's p99.9 over ten runs as measured here: quiet, then the busy loop
    shifted = [105, 124, 104, 98, 70, 5010, 5034, 5030, 5066, 5068]
    assert [i for i, *_ in change_points(shifted)] == [5]
    assert [i for i, *_ in change_points(list(rng.normal(100, 10, 20)) + list(rng.normal(150, 10, 20)))] == [
        20
    ]
    assert change_points(list(rng.normal(100, 10, 30))) == []
    # a steady series whose shift is below compare's 10 % margin proposes nothing
    assert change_points([5030, 5031, 5029, 5032, 5030, 5060, 5061, 5059, 5062, 5060]) == []


@pytest.mark.unit
def test_one_outlying_run_before_a_step_leaves_the_step_two_sides():
    from rtlab.history.changes import MIN_SIDE, change_points, propose

    # a monitor's blocks as seen here: four quiet ones, one at 9 ms (the host's hiccup), then
    # the busy ones. Otava makes the 9 ms run a level of its own; the gate must still see the
    # step at the first busy run with the quiet runs before it, or it can never confirm it
    values = [2000, 3000, 2500, 2800, 9000, 100070, 100084]
    assert [i for i, *_ in change_points(values)] == [4, 5]
    rows = [{"id": k, "uid": f"run-{k}", "path": f"/runs/{k}", "max_us": v} for k, v in enumerate(values)]
    proposed = propose(rows, "max", None)
    assert [(i, round(before), round(after)) for i, before, after, _ in proposed.points] == [
        (5, round(sum(values[:5]) / 5), round(sum(values[5:]) / 2))
    ]
    before, after = proposed.sides(0)
    assert [r["id"] for r in before] == [0, 1, 2, 3, 4] and [r["id"] for r in after] == [5, 6]
    # points MIN_SIDE runs apart or more are two levels, each kept
    wide = [100, 104, 98, 101, 5000, 5100, 4990, 20000, 20100, 19900]
    found = change_points(wide)
    assert len(found) == 2 and found[1][0] - found[0][0] >= MIN_SIDE
    rows = [{"id": k, "uid": f"run-{k}", "path": f"/runs/{k}", "max_us": v} for k, v in enumerate(wide)]
    assert [i for i, *_ in propose(rows, "max", None).points] == [i for i, *_ in found]


@pytest.mark.host
def test_a_campaign_missing_a_repeat_says_so_and_is_not_complete(runs, tmp_path):
    """A campaign whose last repeat has no run.json (killed before it began) pools the others
    and says which is missing: never "complete" on fewer repeats than asked."""
    campaign = tmp_path / "campaign"
    shutil.copytree(runs.quiet, campaign)
    (campaign / "repeat-5" / "run.json").unlink()
    done = rtlab("report", str(campaign), "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["status"] == "partial"
    said = [w["message"] for w in doc["warnings"] if w["code"] == "repeat-missing"]
    assert said and said[0].startswith("repeat 5 of 5 has no run.json") and "pool 4 repeats" in said[0]
    pooled = sum(read_json(campaign / f"repeat-{k}" / "summary.json")["loads"]["work"]["merged"]["samples"]
                 for k in range(1, 5))  # fmt: skip
    assert doc["loads"]["work"]["merged"]["samples"] == pooled


@pytest.mark.unit
def test_a_db_query_value_of_the_wrong_type_is_one_line(tmp_path):
    done = rtlab("history", "list", "--db", f"sqlite:///{tmp_path}/h.db?timeout=x")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "is not a SQLite address" in done.stderr
