"""Shared helpers: running rtlab as a user does, fake sysfs trees, the process table."""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
from hypothesis import settings

import console_report
import heaviest_first
from heaviest_first import (  # noqa: F401 (its hooks)
    pytest_runtest_logreport,
    pytest_runtestloop,
    pytest_sessionfinish,
    pytest_sessionstart,
    pytest_terminal_summary,
    pytest_testnodedown,
    pytest_unconfigure,
)
from rtlab import children
from rtlab.agent import script_path

if TYPE_CHECKING:
    from rtlab.targets.qemu import QemuTarget
    from rtlab.targets.qemu.console import Console

# Property tests (test_readers.py): new examples at every run on a developer's machine, the
# same ones on CI (CI=true), so a landing is never decided by the draw; and no deadline on an
# example (hypothesis's 200 ms by default), which would be a timing assertion: on a busy
# machine an example waits for the CPU
settings.register_profile("rtlab", deadline=None)
settings.register_profile("ci", parent=settings.get_profile("rtlab"), derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "rtlab")

AGENT = script_path()  # the agent as shipped: its parts and generated constants

# This test session's own rtlab folder (lock, board runs) and a mark in the environment of
# every process it starts: the tests look only at what they started, so another rtlab on
# the same machine neither blocks them nor fails them.
TARGET_DIR = Path(tempfile.mkdtemp(prefix="rtlab-tests-"))
os.environ["RTLAB_TARGET_DIR"] = str(TARGET_DIR)
# ... gone with the session's process (a pytest-xdist worker is one too): each left its folder
# in /tmp before, about ten a make test
atexit.register(shutil.rmtree, TARGET_DIR, ignore_errors=True)
# A session started under nohup ignores SIGHUP, and so would every rtlab it starts (rtlab
# leaves an ignored SIGHUP ignored, by design), and a test's SIGHUP would stop none of them:
# a handler that does nothing keeps this session deaf to it, and the processes it starts get
# SIGHUP's default back at their exec, as from a terminal.
if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
    signal.signal(signal.SIGHUP, lambda _signum, _frame: None)
SESSION_MARK = f"RTLAB_TEST_SESSION={uuid.uuid4().hex}"
os.environ[SESSION_MARK.partition("=")[0]] = SESSION_MARK.partition("=")[2]


# The groups a test belongs to, exactly one each (pyproject.toml says what each means). The
# first three measure nothing and boot nothing: `make test` runs them on every CPU at once.
# The others measure or boot, and check only what they started, so they pass beside another
# rtlab measuring (a farm's tests judge what the farm does, never how late a thread woke): two
# at a time, a file's tests on one worker (its runs made once) and the files that boot a
# board, and a farm's test that boots a guest (`boots`), on one worker, one after another
# (BOARDS_TOGETHER: a riscv64 U-Boot board rebooted beside another board's boot once never
# came back); a farm's other tests measure this machine as host tests do, a file a group. What
# judges this machine's own share of the CPU (a load's duty cycle, the work it did), or its
# quiet latency over a monitor's quiet blocks, needs the machine to itself, and so does what
# holds every CPU at SCHED_FIFO 99: ALONE. (The Makefile's PARALLEL and ALONE say the same.)
# What plants a spike on this machine (a SCHED_FIFO 99 busy loop on one CPU) also judges its
# quiet runs quiet: two such beside each other would each take the other's spike for the
# machine's, so they share one worker (SPIKES), the boards' one: beside the spike planters (a
# planted bisection's loop at SCHED_FIFO 99 on CPU 0), the emulated x86_64 board went silent
# at its campaign's trace pass and never answered again, in two runs of make test in a row.
GROUPS = ("unit", "hostile", "tools", "host", "guests", "boards", "farm")
PARALLEL_GROUPS = ("unit", "hostile", "tools")
BOARDS_TOGETHER = ("boards", "boots")
SPIKES = "spikes"
ALONE = "alone"
PLANTED = "planted"


RULE = (
    f"every test carries exactly one group marker of {', '.join(GROUPS)} (pytestmark = "
    "pytest.mark.GROUP in its file, or @pytest.mark.GROUP on the test; pyproject.toml says what "
    "each means)"
)
MISGROUPED = pytest.StashKey[str]()
# What rtlab says when the emulated guest itself failed (targets/qemu, analysis/status.py).
GUEST_FAILED = r"guest did not start|the guest had not finished \d+ s after the start|the guest died"
FAILED_ASSERTION = r"^AssertionError\b"  # pytest-rerunfailures matches "Type: message"
BOARD_STOPPED = "the board stopped answering on its console"


class BoardStopped(Exception):
    """A test failed, and its emulated board no longer answers on its serial console: the
    guest hung (pytest_pyfunc_call), whatever the test then saw."""


def pytest_configure(config: pytest.Config) -> None:
    # its hooks beside heaviest_first's (a conftest holds one function of a hook's name)
    config.pluginmanager.register(console_report, "console_report")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test with no group marker, or two, stops the session before anything runs, naming its
    file and test: `-m` would otherwise leave it out of every group, unseen. A pytest-xdist
    worker cannot stop the session with a message (it is lost in the worker's crash report):
    there the test is put in every group, so each `-m` of a group selects it, and it fails."""
    wrong = {}
    for item in items:
        groups = sorted({m.name for m in item.iter_markers() if m.name in GROUPS})
        if len(groups) != 1:
            wrong[item] = "no group marker" if not groups else f"group markers {', '.join(groups)}"
    if wrong and not hasattr(config, "workerinput"):
        raise pytest.UsageError(f"{RULE}:\n" + "\n".join(f"  {i.nodeid}: {w}" for i, w in wrong.items()))
    for item, said in wrong.items():
        item.stash[MISGROUPED] = said
        for group in GROUPS:
            item.add_marker(group)
    # An emulated guest on a busy host sometimes fails by itself, not by what the test checks:
    # Debian's 6.1 RT guest went silent in its first load (seen only in full runs of the suite,
    # 3 times in 5), bookworm-backports' 6.12 RT kernel panicked in run_timer_softirq 1.3 s into
    # its boot (once). rtlab stops such a guest and says so, as test_qemu checks; a test of
    # something else that failed with those words runs once more (pytest-rerunfailures), and
    # pytest's summary shows each rerun with the failure that caused it, rtlab's words in it
    # (--rerun-show-tracebacks in pyproject.toml).
    # A farm's test that boots rtlab's own guest beside the farm's is rerun so too: a riscv64
    # guest once printed nothing after OpenSBI for 300 s (QEMU's SMP emulation with Sstc).
    # A test that plants an effect (a spike, a busy loop, a duty cycle) and judges it through
    # rtlab's statistics does so beside this host's own noise, which nothing here controls: each
    # such test fails by chance now and then, rtlab right about the data it had (a base run a
    # booting neighbour spoiled, quiet runs whose hiccups raised a limit above the planted
    # bursts), and a different one each time (5 of 8 whole runs here in a row had one: CI64,
    # CI65, CI72 and two more). One more try on a failed assertion takes the suite's chance of
    # a red from about the sum of theirs to about the sum of their squares; a planted effect
    # rtlab no longer finds fails both tries, and make test lists each rerun at its end with
    # the failure that caused it (console_report). What plants spikes on this machine is one.
    for item in items:
        rerun_on: list[str] = []
        if item.get_closest_marker("guests") or item.get_closest_marker("farm"):
            rerun_on.append(GUEST_FAILED)
        if item.get_closest_marker(PLANTED) or item.get_closest_marker(SPIKES):
            rerun_on.append(FAILED_ASSERTION)
        if item.get_closest_marker("boards"):  # on a board booted again (test_board's Bench)
            rerun_on.append(BOARD_STOPPED)
        if rerun_on:
            item.add_marker(pytest.mark.flaky(reruns=1, only_rerun=rerun_on))
    # `--dist loadgroup` (make test's measuring part) keeps a group's tests on one worker:
    # each file is one, the files that boot boards, a farm's tests that boot a guest and the
    # tests that plant spikes on this machine together one (read before pytest-xdist's own hook)
    for item in items:
        if any(item.get_closest_marker(group) for group in (*BOARDS_TOGETHER, SPIKES)):
            item.add_marker(pytest.mark.xdist_group("boards"))
        else:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.partition("::")[0]))
    heaviest_first.order(config, items)  # ... and hands the groups out heaviest first


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Any:
    """A failed test whose emulated board (a `board` that can say whether it `answers`) no
    longer answers on its console failed because the guest hung, not by what it checks: said
    so (BoardStopped, the test's own failure as its cause), and run once more (BOARD_STOPPED).
    Debian's x86_64 RT kernel under QEMU's emulation hung mid-test now and then on a busy host."""
    try:
        return (yield)
    except Exception as failed:
        answers = getattr(pyfuncitem.funcargs.get("board"), "answers", None)
        if answers is None or answers():
            raise
        said = (str(failed).splitlines() or [""])[0][:300]
        raise BoardStopped(
            f"{BOARD_STOPPED} after the test failed: {type(failed).__name__}: {said}"
        ) from failed


def pytest_runtest_setup(item: pytest.Item) -> None:
    if MISGROUPED in item.stash:
        pytest.fail(f"{item.nodeid}: {item.stash[MISGROUPED]}: {RULE}", pytrace=False)


@pytest.fixture(autouse=True)
def _test_mark() -> Any:
    """Each test's processes carry a mark of their own too (RTLAB_TEST_CASE)."""
    os.environ["RTLAB_TEST_CASE"] = uuid.uuid4().hex
    yield
    os.environ.pop("RTLAB_TEST_CASE", None)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_FIFO and mlock need root")
needs_tools = pytest.mark.skipif(
    not (shutil.which("cyclictest") and shutil.which("stress-ng")),
    reason="cyclictest and stress-ng are installed by `make setup`",
)


BUSYBOX = shutil.which("busybox")


@pytest.fixture(scope="session")
def busybox_path(tmp_path_factory) -> str:
    """A PATH of busybox applets plus cyclictest and stress-ng: what a Buildroot board has."""
    if not BUSYBOX:
        pytest.skip("busybox is installed by `make setup`")
    bin_dir = tmp_path_factory.mktemp("busybox-bin")
    subprocess.run([BUSYBOX, "--install", "-s", str(bin_dir)], check=True)
    for tool in ("cyclictest", "stress-ng"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).unlink(missing_ok=True)
            os.symlink(found, bin_dir / tool)
    return str(bin_dir)


def rtlab(*args: str, env: dict[str, str] | None = None, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rtlab", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        **kw,
    )


def console_tail(out: Path, lines: int = 30) -> str:
    """A guest's last console lines as its run kept them, for a failure's message."""
    console = out / "console.log"
    if not console.is_file():
        return "\n(no console.log)"
    return "\nconsole.log ends:\n" + "\n".join(console.read_text(errors="replace").splitlines()[-lines:])


def spin_binary(folder: Path) -> Path:
    """tests/spin.c built into FOLDER: a SCHED_FIFO 99 busy loop, the spike the tests inject."""
    if shutil.which("gcc") is None:
        pytest.skip("make test installs gcc and libc6-dev")
    out = folder / "spin"
    subprocess.run(
        ["gcc", "-O2", "-static", "-o", str(out), str(Path(__file__).with_name("spin.c"))], check=True
    )
    return out


# A suite started in the background by a non-interactive shell (`make test &`, some CI runners)
# inherits SIGINT ignored, and so would every rtlab it starts: a Python that starts with SIGINT
# ignored raises no KeyboardInterrupt, and the tests that press Ctrl-C would wait on an rtlab
# that never heard it. The tests' children get SIGINT as a terminal gives it, however the
# suite was started.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def start_rtlab(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """rtlab running in the background, as a user's terminal would have it, to be signalled."""
    return subprocess.Popen(
        [sys.executable, "-m", "rtlab", *args],
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_args(out: Path, loads: str, duration: str, *more: str, settle: str = "0s") -> list[str]:
    """`rtlab run` measuring LOADS for DURATION each into OUT, then any MORE options."""
    return ["run", "--loads", loads, "--duration", duration, "--settle", settle, "--out", str(out), *more]


def measured_run(
    factory: Any, name: str, loads: str = "idle,cpu", duration: str = "1s", more: tuple[str, ...] = ()
) -> Path:
    """A short real run in a folder of its own (tmp_path_factory), for a module's tests to share;
    `more`: more options of rtlab run."""
    out = factory.mktemp(name) / "run"
    done = rtlab(*run_args(out, loads, duration, *more))
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="session")
def kernel_cache(tmp_path_factory) -> Path:
    """One RTLAB_CACHE for a process's tests that merge configs onto Debian's 6.12 source: the
    source unpacked into it once (1.7 GB in 80,000 files, about 20 CPU-seconds), not per test."""
    return tmp_path_factory.mktemp("kernel-cache")


@pytest.fixture(scope="session")
def idle_cpu_run(tmp_path_factory) -> Path:
    """One real run of idle and cpu (2 s each) for the session's tests that only read it
    (test_faults' report cases, test_export's documents); a test that damages it copies it."""
    return measured_run(tmp_path_factory, "idle-cpu", duration="2s")


def wait_for(predicate: Any, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def signalled(
    proc: subprocess.Popen[str], ready: Callable[[], object], sig: int = signal.SIGINT, seconds: float = 60.0
) -> str:
    """PROC's stderr once it has ended of SIG, sent as soon as READY holds (each waited for up to
    SECONDS); PROC killed if it is still there, whatever failed."""
    try:
        wait_for(ready, seconds)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=seconds)
    finally:
        if proc.poll() is None:
            proc.kill()
    return str(stderr)


G = TypeVar("G", bound="QemuTarget")


def started_twice(make: Callable[[], G], tidy: Callable[[], None] = lambda: None) -> tuple[G, Console]:
    """A guest MAKE gives, started, or a second one if the first did not start (TIDY between):
    an emulated riscv64 guest on a busy host now and then prints nothing after its firmware
    where a boot takes seconds, and one of the same files started again
    boots (test_board's riscv64 board, 300 s after OpenSBI in a run of make test; test_boot_uboot's,
    1,200 s after U-Boot). rtlab itself now boots a riscv64 guest whose kernel went silent for
    60 s once more (its boot_note); this covers the rest (a board's firmware, a second hang).
    The second start is a warning in pytest's summary, never silent; a second failure is
    raised with the first's words."""
    from rtlab.errors import RunFailed

    first = ""
    for attempt in (1, 2):
        guest = make()
        try:
            console = guest.started()
        except RunFailed as e:
            guest.close()
            tidy()
            if attempt == 2:
                raise RunFailed(f"started twice, in vain; the first time: {first}") from e
            first = str(e)
            warnings.warn(f"{guest.name}: started again: {first.splitlines()[0]}", stacklevel=2)
            continue
        except BaseException:
            guest.close()
            raise
        return guest, console
    raise AssertionError("not reached")


def event_seen(events: Path, kind: str, **fields: str) -> bool:
    """Whether the agent's events file holds a `kind` line with these fields."""
    from rtlab.rundir.events import parse

    if not events.exists():
        return False
    for line in events.read_text(errors="replace").splitlines():
        event = parse(line)
        if event is not None and event.kind == kind and all(event.get(k) == v for k, v in fields.items()):
            return True
    return False


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def longest_silence(events: Path) -> float:
    """The longest the agent said nothing in a run's EVENTS: the widest gap between two of its
    events' times (t=, its clock), read here apart from rtlab's events reader."""
    times = [float(m[1]) for m in re.finditer(r"^@rtlab [a-z-]+ t=([0-9.]+) ", events.read_text(), re.M)]
    return max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0)


def idle_threads(path: Path) -> dict[str, dict[str, Any]]:
    """The threads of a cyclictest.json that took no sample (0 cycles), read here, apart from
    rtlab's reader: their average is cyclictest's -nan, or inf where a thread stopped between
    taking a sample and counting it (not JSON: read as null)."""
    text = re.sub(r'("avg": ?)-?(?:nan|inf)\b', r"\1null", path.read_text())
    return {name: t for name, t in json.loads(text)["thread"].items() if t["cycles"] == 0}


def fake_sysfs(root: Path, governors: dict[int, str]) -> dict[Path, bytes]:
    """A fake /sys with cpufreq governors; returns each file's bytes for later comparison."""
    files = {}
    for cpu, governor in governors.items():
        f = root / f"sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"
        f.parent.mkdir(parents=True)
        f.write_bytes(f"{governor}\n".encode())
        files[f] = f.read_bytes()
    return files


def start_time(pid: int) -> str:
    """Field 22 of /proc/PID/stat: when the process started, in clock ticks since boot."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(") ")[2].split()[19]


def processes_in(folder: Path) -> list[tuple[int, str]]:
    """Processes whose working directory lies in `folder` (the agent starts its tools there)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if cwd == str(folder) or cwd.startswith(f"{folder}/"):
            found.append((int(entry.name), comm))
    return found


def ours(entry: Path, session: bool = False) -> bool:
    """A process the running test (or, with `session`, any test of this session) started."""
    mark = SESSION_MARK if session else f"RTLAB_TEST_CASE={os.environ.get('RTLAB_TEST_CASE')}"
    try:
        return mark.encode() in (entry / "environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _live_ours(session: bool) -> Iterator[tuple[int, str, Path]]:
    """(pid, comm, /proc entry) of the running test's live processes (zombies aside)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                comm = (entry / "comm").read_text().strip()
                if ours(entry, session) and (entry / "stat").read_text().rpartition(")")[2].split()[0] != "Z":
                    yield int(entry.name), comm, entry
            except OSError:
                pass


def processes_named(*names: str, session: bool = False) -> set[int]:
    """The running test's processes with these names (comm), live ones only; with `session`,
    those of every test of this session."""
    return {pid for pid, comm, _ in _live_ours(session) if comm in names}


def commands_left() -> list[str]:
    """The command lines of every live process the running test started."""
    found = []
    for _, _, entry in _live_ours(False):
        with contextlib.suppress(OSError):
            found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
    return found


def stop_groups(started: list[subprocess.Popen[Any]]) -> None:
    """Servers a test started, each leading a process group: SIGTERM to every group, then
    SIGKILL to a group still there after 30 s; one that ended already is gone."""
    for proc in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in started:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# --- this machine as an SSH board (test_ssh, test_monitor, test_lava, test_labgrid, ...) ------

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


@dataclass
class Board:
    """Debian's sshd on a loopback port as an SSH board: this machine, a throwaway host key."""

    port: int
    home: Path
    keys: Path
    sshd: subprocess.Popen[bytes]

    @property
    def env(self) -> dict[str, str]:
        return {"HOME": str(self.home), "SSH_AUTH_SOCK": ""}

    def fingerprint(self) -> str:
        out = subprocess.run(
            ["ssh-keygen", "-lf", str(self.keys / "host_key.pub")], capture_output=True, text=True
        )
        return out.stdout.split()[1]


def keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# One sshd for the whole session (each file that measures over it used to start its own): the
# tests connect, measure and leave, and each checks only the processes it started itself.
@pytest.fixture(scope="session")
def board(tmp_path_factory) -> Iterator[Board]:
    keys = tmp_path_factory.mktemp("sshd")
    keygen(keys / "host_key")
    keygen(keys / "user_key")
    (keys / "authorized_keys").write_text((keys / "user_key.pub").read_text())
    port = free_port()
    (keys / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {keys}/host_key\nPidFile {keys}/sshd.pid\n"
        f"AuthorizedKeysFile {keys}/authorized_keys\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
        # a board's shell runs no startup file of this machine's root: bash sources ~/.bashrc
        # for a command from sshd only as a top-level shell, and SHLVL=1 makes it a nested one
        "SetEnv SHLVL=1\n"
        # scp (LAVA's deploy to ssh) speaks SFTP
        "Subsystem sftp /usr/lib/openssh/sftp-server\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
    # ends with the worker even when a SIGTERM or SIGKILL skips this fixture's teardown
    # (a listener outlived its killed run by an hour)
    parent = os.getpid()
    sshd = subprocess.Popen([SSHD, "-D", "-e", "-f", str(keys / "sshd_config")], stderr=subprocess.DEVNULL,
                            preexec_fn=lambda: children.die_with_parent(signal.SIGTERM, parent))  # fmt: skip
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "sshd did not start"
            time.sleep(0.1)
    home = keys / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh/config").write_text(
        f"Host board\n  HostName 127.0.0.1\n  Port {port}\n  User root\n  IdentityFile {keys}/user_key\n"
    )
    algorithm, blob = (keys / "host_key.pub").read_text().split()[:2]
    (home / ".ssh/known_hosts").write_text(f"[127.0.0.1]:{port} {algorithm} {blob}\n")
    yield Board(port, home, keys, sshd)
    sshd.terminate()
    sshd.wait()


PG_BIN = next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)), None)


@contextlib.contextmanager
def postgres(user: str, database: str) -> Iterator[int]:
    """A PostgreSQL server of the test's own (Debian's, as `make test-setup` installs it) on
    a loopback port with USER owning DATABASE (no password); yields the port."""
    import pwd

    assert PG_BIN is not None
    owner = pwd.getpwnam("postgres")
    # PostgreSQL runs as its own user, who cannot enter pytest's private folders
    data = Path(tempfile.mkdtemp(prefix="rtlab-test-pg-"))
    os.chown(data, owner.pw_uid, owner.pw_gid)

    def as_postgres(*argv: str) -> None:
        subprocess.run(["setpriv", f"--reuid={owner.pw_uid}", f"--regid={owner.pw_gid}",
                        "--init-groups", *argv], check=True, capture_output=True, cwd="/")  # fmt: skip

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    as_postgres(str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres")
    as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(data / "log"), "-w", "start",
                "-o", f"-p {port} -k {data} -c listen_addresses=127.0.0.1")  # fmt: skip
    try:
        for sql in (f"CREATE USER {user} CREATEDB", f"CREATE DATABASE {database} OWNER {user}"):
            as_postgres("psql", "-q", "-h", str(data), "-p", str(port), "-c", sql)
        yield port
    finally:
        as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(data)


# --- what the boundary's tests share (test_hostile, test_boundary, test_readers) -----------


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def victim(tmp_path) -> Iterator[Path]:
    """A host file outside every run; its bytes must never change or be read into a run."""
    path = tmp_path / "victim" / "secret.txt"
    path.parent.mkdir()
    path.write_text("host secret: never in a run\n")
    before = digest(path)
    yield path
    assert digest(path) == before and path.is_file() and not path.is_symlink()


@pytest.fixture(scope="session")
def good_run(tmp_path_factory) -> Path:
    """A short real run (1 s idle), copied by each test that damages it: one for the session
    (test_hostile, test_boundary, test_readers read it), as no test writes into it."""
    out = tmp_path_factory.mktemp("hostile") / "good"
    done = rtlab("run", "--loads", "idle", "--duration", "1s", "--settle", "0s", "--out", str(out))
    if done.returncode != 0:
        pytest.skip(f"no local run here: {done.stderr[-300:]}")
    return out


def copy_of(run: Path, where: Path) -> Path:
    shutil.copytree(run, where)
    return where
