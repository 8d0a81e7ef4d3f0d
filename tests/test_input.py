"""Bad input: one clear line naming the fix, exit code 2, nothing measured or written."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import AGENT, needs_root, needs_tools, rtlab
from rtlab.errors import UsageError
from rtlab.plan.loads import parse_loads
from rtlab.units import parse_duration, parse_latency


@pytest.mark.hostile
def test_units():
    assert parse_duration("10s") == 10
    assert parse_duration("10m") == 600
    assert parse_duration("1h") == 3600
    assert parse_duration("45") == 45
    assert parse_latency("200us") == 200
    assert parse_latency("1ms") == 1000
    for bad in ("", "10x", "-5s", "1.5m", "0s"):
        with pytest.raises(UsageError):
            parse_duration(bad)


@pytest.mark.unit
@pytest.mark.parametrize(
    "text",
    ["\u0661\u0662s", "\uff11\uff12", "9" * 10_000, "1e300", "-1s", "1.5m", "nan", "", "1\u2028s", "367d"],
)
def test_a_duration_is_ascii_digits_within_a_year(text):
    with pytest.raises(UsageError) as refused:
        parse_duration(text)
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 200


@pytest.mark.unit
def test_each_kind_of_value_has_its_bounds():
    from rtlab.bounds import MAX_HORIZON_S, MAX_LATENCY_US, MIN_PROBABILITY
    from rtlab.units import parse_count, parse_percentage, parse_probability, probability, seconds

    assert parse_duration("366d") == 366 * 86400
    assert parse_duration("36500d", most=MAX_HORIZON_S) == 36500 * 86400
    assert parse_latency("60s") == MAX_LATENCY_US
    for bad in ("61s", "99999999999999999999us", "\u0661ms"):
        with pytest.raises(UsageError):
            parse_latency(bad)
    assert parse_count("12") == 12
    for bad in ("-1", "\u0661\u0662", "1_000", "+3", "1e3", "9" * 10_000):
        with pytest.raises(UsageError):
            parse_count(bad)
    assert parse_probability("1%", "--false-alarm", below=0.5) == 0.01
    assert parse_probability("1e-9", "--p") == 1e-9
    for bad in ("nan", "inf", "1e-300", "0", "50%", "1_0", "\u0661%", "-1%", "1e999"):
        with pytest.raises(UsageError):
            parse_probability(bad, "--false-alarm", below=0.5)
    for value in (float("nan"), float("inf"), 1e-300, 0.0, 1.0):
        with pytest.raises(UsageError):
            probability(value, "--probability")
    assert probability(MIN_PROBABILITY, "--probability") == MIN_PROBABILITY
    assert parse_percentage("10%", "--margin", 1000) == 0.1
    for bad in ("nan%", "inf%", "1e300%", "10", "-1%", "1001%"):
        with pytest.raises(UsageError):
            parse_percentage(bad, "--margin", 1000)
    assert seconds(300.0, "--boot-timeout", 1, 3600) == 300.0
    for value in (float("nan"), float("inf"), -1.0, 1e300):
        with pytest.raises(UsageError):
            seconds(value, "--boot-timeout", 1, 3600)


@pytest.mark.hostile
def test_loads_pick_subset_and_order():
    assert parse_loads("storage,idle") == ("storage", "idle")
    with pytest.raises(UsageError, match="choose from idle,cpu,os,memory,storage"):
        parse_loads("idle,gpu")


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("args", "fix"),
    [
        (["--loads", "idle,gpu"], "choose from idle,cpu,os,memory,storage"),
        (["--duration", "ten"], "e.g. 30s or 10m"),
        (["--interval", "2x"], "e.g. 200us or 1ms"),
        (["--preset", "nope"], "choose from starfive"),
        (["--priority", "120"], "1 to 99"),
        (["--target", "serial:/dev/ttyUSB0"], "use local"),
    ],
)
def test_bad_option_is_one_line_and_exit_2(args, fix, tmp_path):
    done = rtlab("run", *args, "--out", str(tmp_path / "run"))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and fix in lines[0]
    assert not (tmp_path / "run").exists()


@pytest.mark.hostile
@pytest.mark.parametrize("option", ["--junit", "--output"])
def test_an_output_file_that_cannot_be_written_is_refused_before_anything_runs(option, good_run, tmp_path):
    """-o and --junit are checked while the command line is read: a folder of that name, or a
    missing folder, is one line, with nothing compared or printed first."""
    (tmp_path / "taken").mkdir()
    for path, said in (
        (tmp_path / "taken", "it is a folder"),
        (tmp_path / "no/x.xml", "its folder does not exist"),
    ):
        done = rtlab("compare", option, str(path), str(good_run), str(good_run))
        assert done.returncode == 2 and done.stdout == "", done.stdout
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"rtlab: cannot write {path}: {said}"), lines
    assert not (tmp_path / "no").exists()


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run", "--interval", "0"], "rtlab: --interval: bad latency '0': it must be at least 1us"),
        (["run", "--loads", "idle", "--segment", "ten"], "rtlab: --segment: bad duration 'ten'"),
        (
            ["scan", "--per-stressor", "0s"],
            "rtlab: --per-stressor: bad duration '0s': it must be at least 1s",
        ),
        (["trace", "--threshold", "500us", "--settle", "1y"], "rtlab: --settle: bad duration '1y'"),
    ],
)
def test_a_bad_value_names_its_option_as_the_command_spells_it(args, said, tmp_path):
    done = rtlab(*args, "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[0].startswith(said) and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--hwlat", "--loads", "cpu", "--probe", "oslat"],
            "rtlab: --loads, --probe: no effect with --hwlat",
        ),
        (["--hwlat", "--loads-file", "loads.toml"], "rtlab: --loads-file: no effect with --hwlat"),
    ],
)
def test_trace_refuses_an_option_that_would_do_nothing(args, said, tmp_path):
    done = rtlab("trace", *args, "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr.startswith(said) and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.hostile
def test_out_directory_that_is_not_a_run(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    done = rtlab("run", "--duration", "1s", "--loads", "idle", "--out", str(tmp_path))
    assert done.returncode == 2
    assert "choose another --out" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.hostile
def test_report_of_a_folder_that_is_not_a_run(tmp_path):
    done = rtlab("report", str(tmp_path))
    assert done.returncode == 2 and "is not an rtlab run" in done.stderr


@pytest.mark.hostile
def test_missing_cyclictest_names_the_package(tmp_path):
    # A PATH with the shell tools the agent needs but no rt-tests.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    needs = re.search(r'^AGENT_NEEDS="([^"]*)"', AGENT.read_text(), re.M)
    assert needs is not None
    for tool in ("sh", "hostname", "stress-ng", *needs.group(1).split()):
        found = shutil.which(tool)
        if found:
            os.symlink(found, bin_dir / tool)
    done = rtlab("run", "--duration", "1s", "--out", str(tmp_path / "run"), env={"PATH": str(bin_dir)})
    assert done.returncode == 2
    assert "cyclictest is not installed on local: apt-get install rt-tests" in done.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.hostile
@needs_root
@needs_tools
@pytest.mark.skipif(not shutil.which("setpriv"), reason="needs setpriv (util-linux)")
def test_unprivileged_user_is_told_what_is_missing():
    # Without any capability, cyclictest gets neither SCHED_FIFO nor mlock.
    drop = [
        "setpriv",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
    ]
    out = Path("/tmp/rtlab-unprivileged-never-made")
    done = subprocess.run(
        [
            *drop,
            sys.executable,
            "-m",
            "rtlab",
            "run",
            "--duration",
            "1s",
            "--loads",
            "idle",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")},
        cwd="/tmp",
    )
    assert done.returncode == 2, done.stderr
    assert "SCHED_FIFO" in done.stderr and "run as root" in done.stderr
    assert not out.exists()


def _commands(command, path=()):
    """Every command of the CLI, with its words: ('run',), ('history', 'limit'), ..."""
    sub = getattr(command, "commands", None)
    if sub is None:
        yield path, command
        return
    for name, child in sub.items():
        yield from _commands(child, (*path, name))


@pytest.mark.unit
def test_no_command_declares_a_run_option_by_hand():
    # a run option (plan.options.OPTIONS) is declared once; a command that takes one gets it from the
    # table (cli/options.run_options), under its own help or flag at most (scan's --per-stressor)
    from typer.main import get_command

    from rtlab.cli import app
    from rtlab.plan.options import OPTION

    taken: dict[str, set[str]] = {}
    measuring = {"run", "trace", "scan", "study", "monitor", "bisect", "sweep", "lava job"}
    commands = {" ".join(words): command for words, command in _commands(get_command(app))}
    assert measuring <= set(commands)
    for words, command in commands.items():
        if words not in measuring:
            continue  # history limit's --duration is the length of a run it answers for
        for param in command.params:
            flag = next((o[2:] for o in param.opts if o.startswith("--")), None)
            panel = getattr(param, "rich_help_panel", None) or ""
            if flag in OPTION:
                assert panel.startswith("Run options"), f"rtlab {words} declares --{flag} by hand"
            if panel.startswith("Run options"):
                taken.setdefault(words, set()).add(flag)
    assert set(OPTION) <= taken["run"]
    assert {"loads", "duration", "trace-spikes", "trace-level"} <= taken["trace"]
    assert "trace" not in taken["trace"]  # trace's own --threshold
    assert {"duration", "settle", "idle-after-boot"} <= taken["study"]
    assert {"per-stressor", "settle"} <= taken["scan"]


@pytest.mark.unit
def test_the_command_line_starts_without_the_heavy_libraries():
    # every test and every user command pays the CLI's imports: numpy, scipy, matplotlib and
    # sqlalchemy are imported where a command needs them (bench/bench_startup.py: --help went
    # from 0.42 s to 0.21 s when values.py and untrusted.py stopped importing two of them)
    heavy = ("numpy", "scipy", "matplotlib", "sqlalchemy")
    code = (
        "import sys, rtlab.cli, rtlab.plan, rtlab.boundary.untrusted, rtlab.boundary.values; "
        f"print(' '.join(m for m in {heavy!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == [], done.stdout


@pytest.mark.unit
@pytest.mark.parametrize(
    "options, said",
    [
        ("cpus=10**30", "give a whole number"),
        ("cpus=١٢", "give a whole number"),
        ("cpus=0", "cpus must be 1 to 255"),
        ("cpus=100000", "cpus must be 1 to 255"),
        ("boot-timeout=nan", "give a number of seconds"),
        ("boot-timeout=1e300", "give 1 to 86400 seconds"),
        ("margin=inf", "give a number of seconds"),
        ("ssh=-1", "give a whole number"),
    ],
)
def test_a_qemu_targets_numbers_go_through_the_users_gate(options, said):
    from rtlab.targets.qemu.spec import GuestSpec

    with pytest.raises(UsageError, match=re.escape(said)):
        GuestSpec.parse(f"debian-rt,{options}")
    spec = GuestSpec.parse("debian-rt,cpus=4,boot-timeout=60,margin=0.5")
    assert (spec.cpus, spec.boot_timeout, spec.margin) == (4, 60.0, 0.5)


@pytest.mark.hostile
def test_a_lava_log_that_is_a_fifo_is_one_line_not_a_wait(tmp_path):
    fifo = tmp_path / "log"
    os.mkfifo(fifo)
    done = rtlab("lava", "import", "--log", str(fifo), "--output", str(tmp_path / "out"), timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "is not a regular file" in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.unit
def test_the_makefiles_parts_are_the_groups_conftest_names():
    # make test runs PARALLEL on every CPU, the other groups two at a time and ALONE with the
    # machine to itself: a group or mark added to one side and not the other would run beside
    # a measurement that needs the machine
    makefile = (Path(__file__).parent.parent / "Makefile").read_text()
    from conftest import ALONE, GROUPS, PARALLEL_GROUPS

    def part(name: str) -> tuple[str, ...]:
        found = re.search(rf"^{name} := (.+)$", makefile, re.MULTILINE)
        assert found, name
        return tuple(found[1].split(" or "))

    assert part("PARALLEL") == PARALLEL_GROUPS and set(PARALLEL_GROUPS) < set(GROUPS)
    assert part("ALONE") == (ALONE,) and ALONE not in GROUPS


def inner_pytest(
    folder: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """pytest run in FOLDER on its own tests (tests/ on its path, for the plugins they take)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=folder, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


@pytest.mark.tools
def test_xdist_keeps_a_group_on_one_worker(tmp_path):
    # make test's measuring part (--dist loadgroup) keeps a file's tests, and the boards'
    # files, on one worker through xdist_group marks: with pytest 9.2 they stopped grouping,
    # silently, and two boards booted side by side
    (tmp_path / "conftest.py").write_text(
        "import pytest\n"
        "@pytest.hookimpl(tryfirst=True)\n"
        "def pytest_collection_modifyitems(items):\n"
        "    for item in items:\n"
        "        item.add_marker(pytest.mark.xdist_group(item.nodeid.partition('::')[0][:6]))\n"
    )
    for name in ("test_a1.py", "test_a2.py", "test_b1.py"):
        (tmp_path / name).write_text("".join(f"def test_{i}():\n    pass\n" for i in range(4)))
    done = inner_pytest(tmp_path, "-n", "2", "--dist", "loadgroup", "-v")
    assert done.returncode == 0, done.stdout + done.stderr
    ran = re.findall(r"^\[(gw\d)\] .*PASSED (test_\w)\d", done.stdout, re.MULTILINE)
    assert len(ran) == 12, done.stdout
    workers = {prefix: {gw for gw, p in ran if p == prefix} for prefix in ("test_a", "test_b")}
    assert all(len(w) == 1 for w in workers.values()), workers


@pytest.mark.tools
def test_the_measuring_parts_groups_go_heaviest_first_and_their_seconds_are_kept(tmp_path):
    # tests/heaviest_first.py: by the seconds of a whole run, a group not there as a minute;
    # each group's tests in their own order; the seconds of this run written for the next
    (tmp_path / "conftest.py").write_text(
        "import heaviest_first, pytest\n"
        "from heaviest_first import pytest_runtest_logreport, pytest_sessionfinish\n"
        "@pytest.hookimpl(tryfirst=True)\n"
        "def pytest_collection_modifyitems(config, items):\n"
        "    for item in items:\n"
        "        item.add_marker(pytest.mark.xdist_group(item.nodeid.partition('.py')[0]))\n"
        "    heaviest_first.order(config, items)\n"
    )
    for name in ("test_light", "test_mid", "test_new", "test_heavy"):
        (tmp_path / f"{name}.py").write_text("".join(f"def test_{i}():\n    pass\n" for i in range(3)))
    weights = {"test_heavy": 100, "test_mid": 50, "test_light": 1}  # test_new: NEW_GROUP_S, 60
    (tmp_path / "durations.json").write_text(json.dumps(weights))
    times = tmp_path / "times" / "test-times.json"
    env = {"RTLAB_TEST_TIMES": str(times), "RTLAB_TEST_DURATIONS": str(tmp_path / "durations.json")}
    done = inner_pytest(tmp_path, "-n", "1", "--dist", "loadgroup", "--no-loadscope-reorder", "-v", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    ran = re.findall(r"PASSED (test_\w+)\.py::test_(\d)", done.stdout)
    heaviest_first = ("test_heavy", "test_new", "test_mid", "test_light")
    assert ran == [(name, str(i)) for name in heaviest_first for i in range(3)], ran
    assert set(json.loads(times.read_text())) == set(heaviest_first)


@pytest.mark.tools
def test_each_tests_cpu_seconds_are_its_own_and_its_childrens(tmp_path):
    # tests/heaviest_first.py: a test whose child spun at least 1 CPU-second counts it, in the
    # worker that ran it and where the session is led; a child that slept costs next to none,
    # and what collection spent counts for no test
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1: pass\n"
    files = {
        "conftest.py": "from heaviest_first import *  # noqa: F403\n",
        "spinner.py": spin,  # 1 CPU-second, run or imported
        "test_spin.py": "import subprocess, sys\ndef test_spin():\n"
        "    subprocess.run([sys.executable, 'spinner.py'])\n",
        # its collection spins: no test's
        "test_sleep.py": "import subprocess, spinner\ndef test_sleep():\n"
        "    subprocess.run(['sleep', '1'])\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    times = tmp_path / "times" / "test-times.json"
    env = {"RTLAB_TEST_TIMES": str(times), "RTLAB_TEST_DURATIONS": str(tmp_path / "none.json")}
    done = inner_pytest(tmp_path, "-n", "1", "--durations=2", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    shown = re.findall(r"^(\d+\.\d+)s cpu  (\S+)$", done.stdout, re.MULTILINE)
    assert [name for _, name in shown] == ["test_spin.py::test_spin", "test_sleep.py::test_sleep"], (
        done.stdout
    )
    assert float(shown[0][0]) >= 1.0 and float(shown[1][0]) < 0.5, shown
    by_file = dict(
        row.split()[::-1]
        for row in json.loads(times.with_name("test-workers.json").read_text())["cpu-seconds"]
    )
    assert set(by_file) == {"test_spin.py", "test_sleep.py"} and int(by_file["test_spin.py"]) >= 1, by_file


@pytest.mark.tools
def test_a_failed_tests_report_shows_its_boards_console_made_printable(tmp_path):
    # tests/conftest.py: the last lines of a fixture's console_tail(), once, control
    # characters and line breaks made visible; a console that cannot be read is said so
    (tmp_path / "conftest.py").write_text("from console_report import pytest_runtest_makereport\n")
    (tmp_path / "test_one.py").write_text(
        "import pytest\n"
        "class Board:\n"
        "    def console_tail(self, lines):\n"
        "        return f'{lines} lines\\nkernel \\x1b[2J panic\\u2028here'\n"
        "class Gone:\n"
        "    def console_tail(self, lines):\n"
        "        raise OSError('closed')\n"
        "@pytest.fixture\n"
        "def board():\n"
        "    return Board()\n"
        "@pytest.fixture\n"
        "def gone():\n"
        "    return Gone()\n"
        "def test_fails(board, gone):\n"
        "    assert False\n"
        "def test_passes(board):\n"
        "    pass\n"
    )
    done = inner_pytest(tmp_path, "-n", "1", "test_one.py")
    assert done.returncode == 1 and "1 failed, 1 passed" in done.stdout, done.stdout + done.stderr
    assert done.stdout.count("board's console, its last 60 lines") == 1, done.stdout
    assert "60 lines\nkernel ?[2J panic?here\n" in done.stdout, done.stdout
    assert "\x1b" not in done.stdout and "\u2028" not in done.stdout
    assert "(the console could not be read: OSError('closed'))" in done.stdout, done.stdout


@pytest.mark.tools
def test_a_planted_test_runs_again_only_on_a_failed_assertion_and_each_try_is_listed(tmp_path):
    # tests/conftest.py tries a planted test once more when an assertion failed, never when the
    # code raised; console_report lists the failed try (RERUN) and each final failure (FAILED)
    from conftest import FAILED_ASSERTION

    (tmp_path / "conftest.py").write_text("from console_report import pytest_runtest_logreport\n")
    (tmp_path / "test_planted.py").write_text(
        "import pathlib, pytest\n"
        f"AGAIN = pytest.mark.flaky(reruns=1, only_rerun=[{FAILED_ASSERTION!r}])\n"
        "@AGAIN\n"
        "def test_second_try_passes():\n"
        "    tries = pathlib.Path('tries')\n"
        "    tries.write_text(tries.read_text() + 'x' if tries.exists() else 'x')\n"
        "    assert tries.read_text() == 'xx', 'spike\\nnot found'\n"
        "@AGAIN\n"
        "def test_never_found():\n"
        "    assert 1 == 2\n"
        "@AGAIN\n"
        "def test_raises():\n"
        "    {}['key']\n"
    )
    failures = tmp_path / "failures"
    done = inner_pytest(tmp_path, "test_planted.py",
                        env={"RTLAB_TEST_FAILURES": str(failures), "PYTEST_XDIST_WORKER": ""})  # fmt: skip
    assert done.returncode == 1 and "2 failed, 1 passed, 2 rerun" in done.stdout, done.stdout + done.stderr
    assert failures.read_text().splitlines() == [
        "RERUN test_planted.py::test_second_try_passes: AssertionError: spike | not found | "
        "assert 'x' == 'xx' | - xx | + x",
        "RERUN test_planted.py::test_never_found: assert 1 == 2",
        "FAILED test_planted.py::test_never_found: assert 1 == 2",
        "FAILED test_planted.py::test_raises: KeyError: 'key'",
    ], failures.read_text()


@pytest.mark.unit
def test_a_guests_test_runs_again_only_on_rtlabs_words_for_a_guest_that_failed_by_itself():
    # tests/conftest.py reruns a guests test once when its failure quotes rtlab saying the
    # emulated guest itself failed: the words are read here from rtlab's own code
    from conftest import GUEST_FAILED
    from rtlab.analysis.status import _guest_end
    from rtlab.rundir.events import Kind, line, parse

    said = {
        "hung": line(Kind.GUEST_TIMEOUT, seconds=444, silent=441, answered="no"),
        "slow": line(Kind.GUEST_TIMEOUT, seconds=90, margin=60, answered="yes"),
        "died": line(Kind.GUEST_DIED, reason="qemu exited with status 1"),
    }
    for kind, event in said.items():
        reason = _guest_end([parse(event)])
        assert reason and re.search(GUEST_FAILED, f"AssertionError: warning: idle: failed: {reason}"), kind
    qemu = Path(__file__).parents[1] / "src/rtlab/targets/qemu/__init__.py"
    assert 'f"the {self.name} guest did not start' in qemu.read_text()
    assert re.search(GUEST_FAILED, "rtlab: the debian-rt guest did not start (no shell within 300 s)")
    # ... and test_lava's for a guest that LAVA's QEMU device booted and that never got past its firmware
    lava = "the guest did not start in LAVA's QEMU device"
    assert lava in Path(__file__).with_name("test_lava.py").read_text()
    assert re.search(GUEST_FAILED, f"AssertionError: {lava}: ...")
    for other in ("cyclictest: failed (exit 1)", "the board did not come back", "load cpu: partial"):
        assert not re.search(GUEST_FAILED, other)


@pytest.mark.unit
def test_a_boards_keepalives_come_from_the_ssh_config_each_where_it_sets_them(tmp_path, monkeypatch):
    from rtlab.targets.ssh_config import KEEPALIVE_COUNT, KEEPALIVE_S, Keepalive, keepalive

    monkeypatch.setenv("HOME", str(tmp_path))
    assert keepalive("board", None) == Keepalive(KEEPALIVE_S, KEEPALIVE_COUNT)  # no ~/.ssh/config
    assert keepalive("board", None).silence_s == KEEPALIVE_S * (KEEPALIVE_COUNT + 1) == 75
    (tmp_path / ".ssh").mkdir()
    config = tmp_path / ".ssh/config"
    cases = {
        "Host board\n  ServerAliveInterval 5\n": Keepalive(5, KEEPALIVE_COUNT),
        "Host board\n  ServerAliveCountMax 2\n": Keepalive(KEEPALIVE_S, 2),
        # ssh's "off": none sent, and a lost connection is tried again for rtlab's own silence
        "Host board\n  ServerAliveInterval 0\n  ServerAliveCountMax 9\n": Keepalive(0, 9),
        "Host other\n  ServerAliveInterval 5\n": Keepalive(KEEPALIVE_S, KEEPALIVE_COUNT),
    }
    for text, expected in cases.items():
        config.write_text(text)
        assert keepalive("board", 2222) == expected, text
    config.write_text("Host board\n  ServerAliveInterval 0\n  ServerAliveCountMax 9\n")
    assert keepalive("board", None).silence_s == KEEPALIVE_S * 10
    # a Match on the user rtlab logs in as (ssh://bob@board), not the one running rtlab
    config.write_text("Match user bob\n  ServerAliveInterval 7\n")
    assert keepalive("board", None, "bob") == Keepalive(7, KEEPALIVE_COUNT)
    assert keepalive("board", None, "alice") == Keepalive(KEEPALIVE_S, KEEPALIVE_COUNT)
    for bad in ("ServerAliveInterval soon", "ServerAliveCountMax 0"):
        config.write_text(f"Host board\n  {bad}\n")
        with pytest.raises(UsageError, match=rf"^{re.escape(str(config))}: "):
            keepalive("board", None)
