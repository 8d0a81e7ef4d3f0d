"""A board is not trusted: hostile archives, logs, documents and servers, refused with one line.

Each path a target's data takes home is fed what an attacker would send: links and chains
of links, traversal, special and sparse members, bombs, YAML and JSON built to exhaust the
host, terminal escapes. Every test checks the victims outside the run (their bytes), that the
refusal is one line with its exit code and no traceback, and that a good run is not lost.
"""

from __future__ import annotations

import base64
import http.server
import io
import json
import resource
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import copy_of, digest, read_json, rtlab, run_args
from evt_data import write_run
from rtlab import bounds as b
from rtlab.boundary import unpack, untrusted
from rtlab.errors import RunFailed, UsageError
from rtlab.farm import server as lava_server
from rtlab.plan import Plan
from rtlab.rundir import events
from rtlab.rundir.disk import RunDir, append_line, write_note

ESCAPES = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x1b[31m"  # a clipboard write, a screen clear, red


def member(
    name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE, **fields: object
) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    for key, value in fields.items():
        setattr(info, key, value)
    return info, data


def archive(*members: tuple[tarfile.TarInfo, bytes], gz: bool = True) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz" if gz else "w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buffer.getvalue()


def checksummed(header: bytearray) -> bytes:
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header[:512])
    return bytes(header[:512])


def negative_size(name: str) -> bytes:
    """A GNU tar header whose size field is base-256 encoded and negative (-512)."""
    info = tarfile.TarInfo(name)
    info.size = 0
    header = bytearray(info.tobuf(format=tarfile.GNU_FORMAT))
    header[124:136] = b"\xff" * 10 + b"\xfe\x00"  # 12 bytes of two's complement: -512
    return checksummed(header) + b"\0" * 1024


def sparse_member(name: str) -> bytes:
    """A 3 kB archive holding a GNU sparse member that says it is 64 GiB."""
    info = tarfile.TarInfo(name)
    info.type = tarfile.GNUTYPE_SPARSE
    info.size = 512
    header = bytearray(info.tobuf(format=tarfile.GNU_FORMAT))
    header[483:495] = b"%011o\0" % (64 << 30)  # realsize
    header[386:398] = b"%011o\0" % ((64 << 30) - 512)  # one map entry: offset ...
    header[398:410] = b"%011o\0" % 512  # ... and its bytes
    return checksummed(header) + b"x" * 512 + b"\0" * 1024


LIMITS = unpack.Limits(file_bytes=1 << 20, total_bytes=4 << 20, members=100)

# name -> (archive, what the refusal says)
HOSTILE: dict[str, tuple[bytes, str]] = {
    "symlink": (archive(member("sysinfo.json", kind=tarfile.SYMTYPE, linkname="/etc/passwd")), "is a link"),
    # each link inside the folder when checked alone (CVE-2025-4517/4138): a/b -> ., c -> a/b/../..
    "link-chain": (
        archive(
            member("a", kind=tarfile.DIRTYPE),
            member("a/b", kind=tarfile.SYMTYPE, linkname="."),
            member("c", kind=tarfile.SYMTYPE, linkname="a/b/b/b/../../../victim/secret.txt"),
            member("c", b"overwritten"),
        ),
        "is a link",
    ),
    "hardlink": (archive(member("events", kind=tarfile.LNKTYPE, linkname="../victim/secret.txt")),
                 "is a link"),
    "traversal": (archive(member("loads/../../victim/secret.txt", b"overwritten")), "name part"),
    "absolute": (archive(member("/tmp/rtlab-hostile-absolute", b"x")), "not a relative path"),
    "device": (archive(member("loads/idle/null", kind=tarfile.CHRTYPE, devmajor=1, devminor=3)),
               "special file"),
    "fifo": (archive(member("events", kind=tarfile.FIFOTYPE)), "special file"),
    "sparse": (sparse_member("loads/idle/cyclictest.json"), "sparse"),
    "negative-size": (negative_size("events"), "negative size"),
    "too-deep": (archive(member("loads/idle/trace/001/x/y/z", b"x")), "deeper than a run's layout"),
    "too-many": (archive(*(member(f"loads/idle/f{i}", b"x") for i in range(200))), "more than 100 members"),
    "too-large": (archive(member("loads/idle/cyclictest.json", b"\0" * (2 << 20))), "more than the 1048576"),
    "bomb": (archive(*(member(f"loads/l{i}/load.log", b"\0" * (1 << 20)) for i in range(6))),
             "more than 4194304 bytes"),
    "garbage": (b"\x1f\x8b" + b"not a tar at all" * 10, "damaged"),
}  # fmt: skip


@pytest.mark.unit
@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_archive_is_refused_and_leaves_nothing(case, tmp_path, victim):
    data, words = HOSTILE[case]
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text("{}")
    with pytest.raises(unpack.Refused, match=words):
        unpack.unpack(data, run, LIMITS, "the board's archive")
    assert sorted(p.name for p in run.iterdir()) == ["run.json"]  # nothing of it kept
    assert not Path("/tmp/rtlab-hostile-absolute").exists()


@pytest.mark.unit
def test_a_good_archive_is_unpacked_and_the_hosts_files_kept(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text("host's")
    (run / "collect-error.txt").symlink_to(tmp_path / "elsewhere")  # planted before: replaced, not followed
    data = archive(
        member(".", kind=tarfile.DIRTYPE),
        member("./run.json", b"board's"),
        member("./collect-error.txt", b"board's"),
        member("./loads/idle/cyclictest.json", b"{}"),
        member("./loads/storage/scratch/a/b/c/d/e", b"leftover"),  # a load's scratch: not a result
    )
    written = unpack.unpack(data, run, LIMITS, "archive", keep=("run.json",))
    assert written == ["collect-error.txt", "loads/idle/cyclictest.json"]
    assert (run / "run.json").read_text() == "host's"
    assert not (run / "collect-error.txt").is_symlink() and not (tmp_path / "elsewhere").exists()
    assert not (run / "loads/storage").exists()


@pytest.mark.unit
def test_caps_follow_the_plan():
    small = unpack.Limits.for_plan({"loads": ["idle"], "duration_s": 10, "cpu_count": 2})  # type: ignore[typeddict-item]
    soak = unpack.Limits.for_plan(
        {"loads": ["idle", "cpu"], "duration_s": 72 * 3600, "segment_s": 600, "cpu_count": 8}  # type: ignore[typeddict-item]
    )
    assert small.total_bytes < soak.total_bytes and small.members < soak.members
    assert soak.members >= 2 * 432  # every segment of both loads
    hostile = unpack.Limits.for_plan({"cpu_count": 10**30, "duration_s": -5, "loads": "x" * 10**6})  # type: ignore[typeddict-item]
    assert hostile.total_bytes < 1 << 50  # a board's own numbers cannot lift the caps without bound
    # a board's plan asks for no more room than the largest plan rtlab accepts could fill
    widest = dict(
        duration_s=b.MAX_DURATION_S,
        block_us=b.MIN_BLOCK_US,
        histogram_us=b.MAX_HISTOGRAM_US,
        spike_nodes=b.MAX_SPIKE_NODES,
        trace_us=500,
        trace_s=60,
        trace_spikes=b.MAX_TRACE_SPIKES,
    )
    Plan(**widest).validate()  # type: ignore[arg-type]
    beyond = dict(duration_s=10**12, block_us=1, histogram_us=10**12, spike_nodes=10**12, trace_spikes=10**12)
    for field, value in beyond.items():
        with pytest.raises(UsageError):
            Plan(**{**widest, field: value}).validate()  # type: ignore[arg-type]
    small_board = {"loads": ["idle"], "cpu_count": 2}
    assert unpack.Limits.for_plan({**small_board, **widest, **beyond}) == unpack.Limits.for_plan(
        {**small_board, **widest}
    )  # type: ignore[typeddict-item]


# --- documents ---------------------------------------------------------------------------------

BAD_JSON = {
    "deep": "[" * 1_000_000 + "]" * 1_000_000,
    "digits": '{"cpus": {"count": ' + "9" * 5001 + "}}",
    "nan": '{"cpus": {"count": NaN}}',
    "infinite": '{"t": 1e999}',
}


@pytest.mark.unit
@pytest.mark.parametrize("case", BAD_JSON)
def test_a_json_bomb_is_one_damaged_line(case):
    with pytest.raises(untrusted.Damaged, match="^damaged sysinfo.json: "):
        untrusted.json_loads(BAD_JSON[case], "sysinfo.json")


BAD_YAML = {
    "laughs": "{a: &a [x,x,x,x,x,x,x,x,x], b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a], "
    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b], d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c], "
    "e: [*d,*d,*d,*d,*d,*d,*d,*d,*d]}",
    "deep": "{a: " + "[" * 100_000 + "]" * 100_000 + "}",
}


@pytest.mark.unit
@pytest.mark.parametrize("case", BAD_YAML)
def test_a_yaml_bomb_is_one_damaged_line(case):
    with pytest.raises(untrusted.Damaged, match="^damaged log line: "):
        untrusted.yaml_loads(BAD_YAML[case], "log line")


@pytest.mark.unit
def test_printable_strips_what_a_terminal_obeys():
    assert untrusted.printable(f"a{ESCAPES}b\u202ec\r\nd") == "a?]52;c;cm0gLXJmIH4=??[2J?[31mb?c? d"
    assert untrusted.printable("line\nnext", lines=True) == "line\nnext"


@pytest.mark.unit
def test_printable_leaves_no_invisible_character_a_line_could_hide_words_behind():
    """Every control, format character (zero-width spaces, the soft hyphen, tag characters,
    bidirectional marks) and line separator Unicode has, asked of unicodedata: each is '?'."""
    hidden = [c for c in map(chr, range(0x110000)) if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")]
    # tab and newline (U+0009, U+000A) become spaces, as on any one line printable gives
    assert untrusted.printable("".join(hidden)) == "?" * 9 + "  " + "?" * (len(hidden) - 11)
    assert untrusted.printable("caf\u00e9 \u00a0\u4e2d") == "caf\u00e9 \u00a0\u4e2d"  # text stays text
    # one_line writes them as escapes Python reads back as the same characters
    said = "".join(hidden)
    assert untrusted.one_line(said).encode().decode("unicode_escape") == said


# Every character str.splitlines ends a line at (\n \r \x0b \x0c \x1c-\x1e \x85 \u2028 \u2029),
# found by asking it; then the other controls, and every format character unicodedata knows
# (the bidirectional overrides, zero-width ones, the soft hyphen, tag characters beyond the
# first plane).
LINE_BREAKS = [c for c in map(chr, range(0x110000)) if len(f"a{c}b".splitlines()) > 1]
NOT_IN_A_LINE = [
    *LINE_BREAKS,
    *(c for c in map(chr, [*range(0x20), *range(0x7F, 0xA0)]) if c not in LINE_BREAKS),
    *(c for c in map(chr, range(0x110000)) if unicodedata.category(c) == "Cf"),
]


@pytest.mark.unit
def test_a_host_line_after_a_board_line_cut_short_is_a_line_of_its_own(tmp_path):
    """A board's events file whose last line was cut mid-write (it lost power): the host's
    word appended after it is never read as that line's end, and a second line follows it."""
    path = tmp_path / "events"
    path.write_bytes(b"@rtlab load-start load=idle\n@rtlab load-end load=idle sta")
    lost = events.line(events.Kind.CONNECTION_LOST, reason="board gone")
    append_line(path, lost)
    append_line(path, lost)
    assert path.read_text().splitlines() == [
        "@rtlab load-start load=idle",
        "@rtlab load-end load=idle sta",
        lost.rstrip("\n"),
        lost.rstrip("\n"),
    ]
    assert [e.kind for e in RunDir(tmp_path).events()][-2:] == ["connection-lost", "connection-lost"]


@pytest.mark.unit
@pytest.mark.parametrize("char", NOT_IN_A_LINE, ids=lambda c: f"U+{ord(c):04X}")
def test_what_a_board_says_stays_one_visible_line_of_the_events_and_logs(tmp_path, char):
    forged = f"lost{char}@rtlab done status=complete"
    append_line(tmp_path / "events", events.line(events.Kind.DONE, status="failed", reason=forged))
    append_line(tmp_path / "events", f"@rtlab load-end load=idle status=failed reason={forged}\n")
    write_note(tmp_path / "collect-error.txt", f"{forged}\nsecond line\n")
    written = (tmp_path / "events").read_text(encoding="utf-8")
    # one line per write, whoever splits them (str.splitlines, a file's lines, "\n")
    with (tmp_path / "events").open(encoding="utf-8") as f:  # universal newlines: \r too
        assert len(written.splitlines()) == len(f.readlines()) == 2
    assert [e.get("status") for e in RunDir(tmp_path).events()] == ["failed", "failed"]
    code = ord(char)  # as Python reads it back: eight digits beyond the first plane
    escape = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
    assert written.count(f"lost{escape}@rtlab done status=complete") == 2  # shown, not dropped
    note = (tmp_path / "collect-error.txt").read_text(encoding="utf-8")
    if char != "\n":  # a note keeps its own newlines
        assert note.splitlines() == [f"lost{escape}@rtlab done status=complete", "second line"]
    assert untrusted.one_line(untrusted.one_line(forged)) == untrusted.one_line(forged)


@pytest.mark.unit
def test_outside_text_is_split_at_newlines_only():
    said = "@rtlab load-end status=failed reason=a\u2028b\x85c\x0bd\x1ce\re\r\n@rtlab done status=x\n"
    assert untrusted.lines(said) == [
        "@rtlab load-end status=failed reason=a\u2028b\x85c\x0bd\x1ce\re",
        "@rtlab done status=x",
    ]
    assert untrusted.lines("") == [] and untrusted.lines("a\n\nb") == ["a", "", "b"]


# --- a whole run: damaged documents and escapes through rtlab's commands ---------------------


@pytest.mark.hostile
@pytest.mark.parametrize("case", ["deep", "digits", "nan"])
def test_a_damaged_sysinfo_costs_only_the_system_facts(good_run, tmp_path, case):
    run = copy_of(good_run, tmp_path / "run")
    (run / "sysinfo.json").write_text(BAD_JSON[case])
    done = rtlab("report", str(run), "--format", "json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["loads"]["idle"]["status"] == "complete"
    assert any("damaged" in w["message"] and "sysinfo.json" in w["message"] for w in summary["warnings"])
    assert "Traceback" not in done.stderr


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("plan", "said"),
    [
        ({"loads": "idle"}, "plan.loads: a string 'idle', not a list"),
        ({"histogram_us": None}, "plan.histogram_us: null, not a whole number"),
        ({"interval_us": -200}, "plan.interval_us: -200 is out of range"),
        ({"loads": ["../../victim"]}, "plan.loads: '../../victim' is no load name"),
        ({"loads": ["/etc"]}, "plan.loads: '/etc' is no load name"),
    ],
)
def test_a_damaged_run_json_is_named_and_the_loads_still_reported(good_run, tmp_path, plan, said, victim):
    run = copy_of(good_run, tmp_path / "run")
    manifest = read_json(run / "run.json")
    manifest["plan"].update(plan)
    (run / "run.json").write_text(json.dumps(manifest))
    shutil.copy(victim, tmp_path / "victim-copy")
    for fmt in ("json", "table", "md", "csv"):
        done = rtlab("report", str(run), "--format", fmt)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        assert "host secret" not in done.stdout
    summary = json.loads(rtlab("report", str(run), "--format", "json").stdout)
    assert any(f"damaged {run}/run.json: {said}" in w["message"] for w in summary["warnings"])
    # the plan's own files say what was measured: the load is there, with its numbers
    assert summary["loads"]["idle"]["status"] in ("complete", "partial")
    assert summary["loads"]["idle"]["merged"]["samples"] > 0


@pytest.mark.hostile
def test_a_link_in_a_run_is_not_followed(good_run, tmp_path, victim):
    run = copy_of(good_run, tmp_path / "run")
    (run / "loads/idle/load.log").symlink_to(victim)
    (run / "events").unlink()
    (run / "events").symlink_to(victim)
    done = rtlab("report", str(run), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert "host secret" not in done.stdout
    assert "events is a link" in done.stdout


def _campaign(tmp_path: Path, n: int = 2) -> Path:
    """The folder of `rtlab run --repeat N` from synthetic runs: repeats.json and repeat-K/."""
    folder = tmp_path / "campaign"
    folder.mkdir()
    for k in range(1, n + 1):
        shutil.move(write_run(tmp_path, k, 0.1, seconds=20), folder / f"repeat-{k}")
    (folder / "repeats.json").write_text(json.dumps({"n": n}))
    return folder


def _history(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return rtlab("history", *args, "--db", str(db))


def _stored(db: Path) -> list[str]:
    done = _history(db, "list", "--format", "json")
    assert done.returncode == 0, done.stderr
    return sorted(r["uid"] for r in json.loads(done.stdout)["runs"])


@pytest.mark.hostile
def test_a_repeat_that_links_to_another_run_is_neither_pooled_nor_indexed(tmp_path):
    """repeat-2 a link to a run from elsewhere: `report` refuses the campaign in one line
    naming the folder; `history add` adds repeat 1 and says why repeat 2 is skipped."""
    campaign = _campaign(tmp_path)
    other = write_run(tmp_path / "elsewhere", 7, 0.1, seconds=20)
    shutil.rmtree(campaign / "repeat-2")
    (campaign / "repeat-2").symlink_to(other)
    done = rtlab("report", str(campaign), "--format", "json")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (said,) = done.stderr.strip().splitlines()
    assert f"{campaign}/repeat-2 is a link" in said, said
    db = tmp_path / "history.db"
    done = _history(db, "add", str(campaign))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"{(campaign / 'repeat-1').resolve()}: added"), lines
    linked = f"{campaign}/repeat-2"
    assert lines[1] == f"{linked}: skipped: {linked} is a link: rtlab reads no links in a run", lines
    assert _stored(db) == [read_json(campaign / "repeat-1" / "run.json")["id"]]  # not the other run


@pytest.mark.hostile
@pytest.mark.parametrize("index", ['{"n": ', '{"n": 0}', '["n", 2]', "link"])
def test_a_damaged_repeats_json_is_one_line_for_report_and_history(tmp_path, index, victim):
    """`history add` reads the campaign as `report` does: from repeats.json, refused when
    damaged, not by counting the repeat folders it finds."""
    campaign = _campaign(tmp_path)
    (campaign / "repeats.json").unlink()
    if index == "link":
        (campaign / "repeats.json").symlink_to(victim)
    else:
        (campaign / "repeats.json").write_text(index)
    named = f"{campaign}/repeats.json is damaged"
    done = rtlab("report", str(campaign), "--format", "json")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (said,) = done.stderr.strip().splitlines()
    assert named in said, said
    db = tmp_path / "history.db"
    done = _history(db, "add", str(campaign))
    assert "Traceback" not in done.stderr, done.stderr
    (said,) = done.stderr.strip().splitlines()
    assert said.startswith(f"{campaign}: skipped: {named}"), said
    assert _stored(db) == []


@pytest.mark.hostile
def test_a_huge_cyclictest_json_is_not_read(good_run, tmp_path):
    run = copy_of(good_run, tmp_path / "run")
    with (run / "loads/idle/cyclictest.json").open("r+b") as f:
        f.truncate(untrusted.RESULT_BYTES + 1)  # sparse on the host's disk: costs nothing
    done = rtlab("report", str(run), "--format", "json")
    summary = json.loads(done.stdout)
    assert summary["loads"]["idle"]["status"] == "failed"
    assert "more than the" in summary["loads"]["idle"]["reason"]


@pytest.mark.hostile
def test_a_boards_escapes_never_reach_the_terminal(good_run, tmp_path):
    run = copy_of(good_run, tmp_path / "run")
    info = read_json(run / "sysinfo.json")
    info["hostname"] = f"board{ESCAPES}"
    info["kernel"]["version"] = f"#1 SMP PREEMPT_RT {ESCAPES}"
    (run / "sysinfo.json").write_text(json.dumps(info))
    manifest = read_json(run / "run.json")
    manifest["loads"]["idle"] = {"status": "failed", "reason": f"the board said {ESCAPES}"}
    (run / "run.json").write_text(json.dumps(manifest))
    with (run / "events").open("a") as f:
        f.write(f"@rtlab load-end load=idle status=failed reason=cut {ESCAPES}\n")
    for fmt in ("table", "md", "csv", "html", "junit"):
        done = rtlab("report", str(run), "--format", fmt)
        assert "\x1b" not in done.stdout + done.stderr and "\x07" not in done.stdout + done.stderr, fmt
    kept = json.loads(rtlab("report", str(run), "--format", "json").stdout)
    assert kept["system"]["hostname"] == f"board{ESCAPES}"  # JSON keeps it, escaped
    assert "\\u001b" in rtlab("report", str(run), "--format", "json").stdout


# --- LAVA: a hostile job log ---------------------------------------------------------------------


def bundle_uid(bundle: bytes) -> str:
    """The uid of the run a bundle holds (its run.json's), as the job that printed it has it."""
    try:
        with tarfile.open(fileobj=io.BytesIO(bundle), mode="r:gz") as tar:
            member = tar.extractfile("run/run.json")
            return str(json.loads(member.read()).get("uid") or "x") if member else "x"
    except (tarfile.TarError, KeyError, ValueError, OSError, EOFError):
        return "x"


def lava_log(path: Path, bundle: bytes | None, extra: list[str] = (), noise: int = 0,  # type: ignore[assignment]
             cut: bool = False, job: dict[str, object] | None = None) -> Path:  # fmt: skip
    """A job's log with BUNDLE between rtlab's marks, a kernel's console line after every
    NOISE of its lines (0: none); CUT: in the middle of the line, as a serial console shows a
    message that came while the line printed (its rest on the next line). JOB: LAVA's own
    result of the job (a pass without it)."""
    lines = [*extra]
    if bundle is not None:
        text, uid = base64.b64encode(bundle).decode(), bundle_uid(bundle)
        lines.append(json.dumps({"lvl": "target", "msg": f"@rtlab-bundle-begin {uid}"}))
        for n, i in enumerate(range(0, len(text), 76), 1):
            kernel = f"[ {n}.000123] rcu: INFO: rcu_preempt self-detected stall on CPU"
            if noise and n % noise == 0 and cut:
                shown = [text[i : i + 30] + kernel, text[i + 30 : i + 76]]
                lines += [json.dumps({"lvl": "target", "msg": m}) for m in shown if m]
                continue
            lines.append(json.dumps({"lvl": "target", "msg": text[i : i + 76]}))
            if noise and n % noise == 0:
                lines.append(json.dumps({"lvl": "target", "msg": kernel}))
        lines.append(json.dumps({"lvl": "target", "msg": f"@rtlab-bundle-end {uid}"}))
    verdict = job or {"result": "pass"}
    lines.append(json.dumps({"lvl": "results", "msg": {"case": "job", "definition": "lava", **verdict}}))
    path.write_text("\n".join(lines) + "\n")
    return path


def run_bundle(run: Path, *hostile: tuple[tarfile.TarInfo, bytes]) -> bytes:
    """RUN as a job's bundle (under run/), with HOSTILE members after it."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.GNU_FORMAT) as tar:
        tar.add(run, arcname="run")
        for info, data in hostile:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buffer.getvalue()


def limited(*argv: str) -> subprocess.CompletedProcess[str]:
    """rtlab with at most 2 GiB of memory and 64 MiB per file written: a bomb ends it, not the host."""

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 20, 64 << 20))

    return subprocess.run(
        [sys.executable, "-m", "rtlab", *argv], capture_output=True, text=True, preexec_fn=limits, timeout=300
    )


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("case", "said"),
    [
        ("chain", "is a link"),
        ("traversal", "name part"),
        ("bomb", "more than"),
        ("sparse", "sparse"),
    ],
)
def test_a_hostile_lava_bundle_is_refused_in_one_line(good_run, tmp_path, victim, case, said):
    if case == "chain":
        extra = [member("run/a", kind=tarfile.SYMTYPE, linkname="."),
                 member("run/events", kind=tarfile.SYMTYPE, linkname=f"a/a/a/../../..{victim}")]  # fmt: skip
        bundle = run_bundle(good_run, *extra)
    elif case == "traversal":
        bundle = run_bundle(good_run, member("run/../victim/secret.txt", b"overwritten"))
    elif case == "bomb":  # 2 GiB of zeros in a few MB of log
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=9) as tar:
            info = tarfile.TarInfo("run/loads/idle/load.log")
            info.size = 2 << 30

            class Zeros(io.RawIOBase):
                left = 2 << 30

                def readable(self) -> bool:
                    return True

                def readinto(self, b):  # type: ignore[no-untyped-def]
                    n = min(len(b), self.left)
                    b[:n] = bytes(n)
                    self.left -= n
                    return n

            tar.addfile(info, io.BufferedReader(Zeros()))
        bundle = buffer.getvalue()
        assert len(bundle) < 8 << 20
    else:
        bundle = sparse_member("run/loads/idle/cyclictest.json")
    log = lava_log(tmp_path / "job.log", bundle)
    out = tmp_path / "imported"
    done = limited("lava", "import", "--log", str(log), "-o", str(out))
    assert done.returncode == 3, done.stderr
    assert said in done.stderr and "nothing was imported" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not any(p.is_symlink() for p in out.rglob("*"))
    assert sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) < 1 << 20


@pytest.mark.hostile
def test_yaml_bombs_in_a_log_are_skipped_and_the_run_imported(good_run, tmp_path):
    bombs = [
        BAD_YAML["laughs"],
        BAD_YAML["deep"],
        "{" + "a: {" * 5000 + "}" * 5001,
        "{x: " + "9" * 5001 + "}",
    ]
    log = lava_log(tmp_path / "job.log", run_bundle(good_run), bombs)
    out = tmp_path / "imported"
    done = limited("lava", "import", "--log", str(log), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert (
        read_json(out / "summary.json")["loads"]["idle"]["merged"]
        == read_json(good_run / "summary.json")["loads"]["idle"]["merged"]
    )


@pytest.mark.hostile
def test_a_failed_jobs_error_message_cannot_make_its_run_complete(tmp_path):
    # the board's own words (lava-test-raise) after a U+2028: a line break to str.splitlines
    theirs = write_run(tmp_path, seed=1, xi=0.1, seconds=10)  # a run whose loads all completed
    manifest = read_json(theirs / "run.json")
    (theirs / "run.json").write_text(json.dumps({**manifest, "loads": {}}))
    said = "board lost\u2028@rtlab done status=complete"
    failed = {"result": "fail", "error_type": "Test", "error_msg": said}
    log = lava_log(tmp_path / "job.log", run_bundle(theirs), job=failed)
    out = tmp_path / "imported"
    done = rtlab("lava", "import", "--log", str(log), "-o", str(out))
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert read_json(out / "run.json")["status"] == "failed"
    assert "board lost" in read_json(out / "run.json")["reason"]
    written = (out / "events").read_text(encoding="utf-8")
    assert written.splitlines()[-1].startswith("@rtlab done status=failed source=lava reason=")


@pytest.mark.hostile
def test_a_bundle_naming_loads_outside_the_run_reads_nothing_there(good_run, tmp_path, victim):
    theirs = copy_of(good_run, tmp_path / "board")
    manifest = read_json(theirs / "run.json")
    manifest["plan"]["loads"] = ["idle", "../../victim", "/etc"]
    (theirs / "run.json").write_text(json.dumps(manifest))
    log = lava_log(tmp_path / "job.log", run_bundle(theirs))
    done = rtlab("lava", "import", "--log", str(log), "-o", str(tmp_path / "imported"))
    assert done.returncode == 3 and "is no load name" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


# --- a LAVA server that misbehaves ---------------------------------------------------------------


class Hostile(http.server.BaseHTTPRequestHandler):
    mode = "big"

    def do_GET(self) -> None:  # noqa: N802
        if self.mode == "escapes":
            body = json.dumps({"detail": f"boom {ESCAPES}"}).encode()
            self.send_response(500)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.end_headers()
        try:
            if self.mode == "big":  # without end
                chunk = b"x" * (1 << 20)
                while True:
                    self.wfile.write(chunk)
            else:  # one byte now and then, without end
                while True:
                    self.wfile.write(b"{")
                    self.wfile.flush()
                    time.sleep(0.5)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hostile_server() -> Iterator[tuple[str, type[Hostile]]]:
    handler = type("Handler", (Hostile,), {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


@pytest.mark.unit
def test_a_server_sending_without_end_is_cut_at_the_cap(hostile_server):
    url, handler = hostile_server
    handler.mode = "big"
    with pytest.raises(RunFailed, match="sent more than 256 MiB"):
        lava_server.Server(url).job(1)


@pytest.mark.unit
def test_a_server_trickling_is_cut_at_the_deadline(hostile_server):
    url, handler = hostile_server
    handler.mode = "slow"
    started = time.monotonic()
    with pytest.raises(RunFailed, match="took more than 2 s"):
        lava_server.Server(url, deadline_s=2).job(1)
    assert time.monotonic() - started < 30


@pytest.mark.hostile
def test_a_servers_escapes_never_reach_the_terminal(hostile_server, tmp_path):
    url, handler = hostile_server
    handler.mode = "escapes"
    done = rtlab("lava", "import", "7", "--url", url, "-o", str(tmp_path / "x"))
    assert done.returncode == 3 and "boom" in done.stderr, done.stderr
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr


# --- a QEMU guest that sends hostile results over its console --------------------------------

# Stands in for QEMU: answers rtlab's console protocol (@rtlab-cmd ID COMMAND, then
# @rtlab-exit ID STATUS) with what the test scripted: STREAM while the agent "runs",
# FINAL for the run folder's tar.gz in base64.
FAKE_GUEST = """
import sys
stream, final = open(sys.argv[1]).read(), open(sys.argv[2]).read()
print("@rtlab-ready", flush=True)
for line in sys.stdin:
    if not line.startswith("@rtlab-cmd "):
        continue
    _, ident, command = line.rstrip("\\n").split(" ", 2)
    if command.startswith("poweroff"):
        break
    sys.stdout.write(final if "tar -cf" in command else stream)
    print(f"@rtlab-exit {ident} 0", flush=True)
"""


def b64_lines(data: bytes) -> str:
    text = base64.b64encode(data).decode()
    return "".join(text[i : i + 76] + "\n" for i in range(0, len(text), 76))


@pytest.mark.hostile
def test_a_guests_hostile_results_are_refused_and_the_good_ones_kept(good_run, tmp_path, victim):
    from rtlab.rundir.disk import RunDir
    from rtlab.targets import open_target
    from rtlab.targets.qemu.console import Console

    good = io.BytesIO()
    with tarfile.open(fileobj=good, mode="w:gz") as tar:
        tar.add(good_run / "loads/idle", arcname="loads/idle")
    hostile = archive(
        member("loads/cpu", kind=tarfile.DIRTYPE),
        member("loads/cpu/cyclictest.json", kind=tarfile.SYMTYPE, linkname=str(victim)),
    )
    stream = tmp_path / "stream"
    stream.write_text(
        f"@rtlab load-start load=idle seconds=1 {ESCAPES}\n"
        f"@rtlab result load=idle\n{b64_lines(good.getvalue())}@rtlab result-end load=idle\n"
        f"@rtlab result load=cpu\n{b64_lines(hostile)}@rtlab result-end load=cpu\n"
        + "x" * 200_000  # a line far longer than a console line may be
        + "\n@rtlab done status=complete\n"
    )
    final = tmp_path / "final"
    final.write_text(b64_lines(archive(member("events", kind=tarfile.SYMTYPE, linkname=str(victim)))))
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    shutil.copy(good_run / "run.json", run.path / "run.json")
    (run.path / "console.log").symlink_to(victim)  # planted: replaced, never written through
    target = open_target("qemu:debian-rt")
    script = tmp_path / "guest.py"
    script.write_text(FAKE_GUEST)
    target.console = Console([sys.executable, str(script), str(stream), str(final)])  # type: ignore[attr-defined]
    try:
        assert target.console.wait_for("@rtlab-ready", 30)  # type: ignore[attr-defined]
        seen: list[str] = []
        assert target.run_agent(["run", "/tmp/rtlab/runs/x"], seen.append, 5) == 0
        assert all(len(line) <= 1 << 16 for line in seen)
        target.collect(run, "/tmp/rtlab/runs/x")
    finally:
        target.close()
    refused = (run.path / "collect-error.txt").read_text()
    assert "the guest's results of cpu" in refused and "is a link" in refused
    assert "the guest's run folder" in refused and "is a link" in refused
    assert not any(p.is_symlink() for p in run.path.rglob("*"))
    # what was good came home whole
    assert digest(run.path / "loads/idle/cyclictest.json") == digest(good_run / "loads/idle/cyclictest.json")


# --- SSH: a board whose run folder is hostile, collected over a real sshd ------------------


@pytest.mark.hostile
def test_a_board_that_prints_without_end_is_refused_past_the_cap(board, monkeypatch):  # noqa: F811
    """One shell command's output (every boot step and check goes through it) is read as it
    comes and refused past the cap, never held whole: here a board printing 5 MB against a
    1 MB cap, and what is under the cap comes back whole, stdout then stderr."""
    from rtlab.errors import RunFailed
    from rtlab.targets import ssh

    for name, value in board.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(ssh, "SHELL_OUTPUT_CAP", 1 << 20)
    target = ssh.SshTarget("ssh://board")
    try:
        status, said = target.shell("printf out; printf err >&2; exit 3")
        assert (status, said) == (3, b"outerr")
        with pytest.raises(RunFailed, match="printed more than 1048576 bytes: refused"):
            target.shell("head -c 5000000 /dev/zero")
        assert target.shell("echo still")[1] == b"still\n"  # the connection is still usable
    finally:
        target.close()


@pytest.mark.hostile
@pytest.mark.parametrize("case", ["link", "huge"])
def test_collect_from_a_hostile_board_refuses_and_keeps_the_run(board, tmp_path, victim, case):  # noqa: F811
    if not shutil.which("cyclictest"):
        pytest.skip("make setup installs rt-tests")
    out = tmp_path / "run"
    done = rtlab(*run_args(out, "idle", "1s", "--target", "ssh://board"), env=board.env)
    assert done.returncode == 0, done.stderr
    before = read_json(out / "summary.json")["loads"]["idle"]["merged"]
    remote = Path(read_json(out / "run.json")["remote"])
    (remote / "loads/idle").mkdir(parents=True)  # the board "has" the run again, hostile
    if case == "link":
        (remote / "sysinfo.json").symlink_to(victim)
    else:  # 200 MB of zeros from a file that takes no room on the board's disk
        with (remote / "loads/idle/load.log").open("wb") as f:
            f.truncate(200 << 20)
    (out / "collect-error.txt").symlink_to(victim)  # planted: replaced, never written through
    try:
        done = rtlab("collect", str(out), env=board.env)
    finally:
        shutil.rmtree(remote)
    assert done.returncode == 3, done.stderr
    assert ("is a link" if case == "link" else "more than") in done.stderr
    assert "Traceback" not in done.stderr
    assert not (out / "collect-error.txt").is_symlink()
    assert not any(p.is_symlink() for p in out.rglob("*"))
    assert read_json(out / "summary.json")["loads"]["idle"]["merged"] == before  # nothing lost


@pytest.mark.hostile
def test_a_log_without_a_bundle_naming_loads_rtlab_does_not_know_is_imported_as_failed(tmp_path):
    # sets of a loads file, a hostile name, or none: the import never fails on a name
    results = [
        {"case": "x", "definition": "0_rtlab", "result": "pass", "set": s} for s in ("spin", "../../etc")
    ]
    log = tmp_path / "job.log"
    log.write_text("".join(json.dumps({"lvl": "results", "msg": r}) + "\n" for r in results))
    out = tmp_path / "imported"
    done = rtlab("lava", "import", "--log", str(log), "-o", str(out))
    assert done.returncode == 3 and "Traceback" not in done.stderr, done.stderr
    manifest = read_json(out / "run.json")
    assert manifest["plan"]["loads"] == ["spin"] and manifest["loads"]["spin"]["status"] == "failed"
    assert "holds no run from the board" in manifest["loads"]["spin"]["reason"]


@pytest.mark.hostile
def test_a_damaged_run_json_and_a_linked_plan_file_are_both_named(good_run, tmp_path, victim):
    run = copy_of(good_run, tmp_path / "run")
    (run / "run.json").write_text("{")
    (run / "plan.loads").unlink()
    (run / "plan.loads").symlink_to(victim)
    done = rtlab("report", str(run), "--format", "json")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    said = [w["message"] for w in json.loads(done.stdout)["warnings"]]
    assert any("run.json" in m for m in said) and any("plan.loads is a link" in m for m in said), said
    assert "host secret" not in done.stdout
