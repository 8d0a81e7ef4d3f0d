"""Campaigns that change a board's kernel: rtlab study with a kernel axis and boot parameters,
each cell booted by rtlab (boot/ensure.py), verified, measured, the board back on its default
kernel at the end; a study killed while a kernel boots and resumed.

The board is tests/test_boot.py's x86_64 kexec board (Debian's standard kernel its default,
Debian's RT kernel fetched for it). The unit tests below it judge ensure's decisions from
what a board says, without one."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

import test_boot
from conftest import read_json, rtlab, start_rtlab, wait_for
from rtlab.boot import ensure, steps, verify
from rtlab.boot.image import KernelVersion
from rtlab.campaigns.study import parse
from rtlab.errors import RunFailed, Stopped, UsageError
from test_boot import RT, KexecBoard, _uname

kexec_board = test_boot.kexec_board  # the board test_boot.py boots, its fixture here too

STANDARD = "linux-image-amd64"  # what the board's default kernel is built from
ISOLATED = "isolcpus=1 nohz_full=1 rcu_nocbs=1"


def _study(folder: Path, board: KexecBoard, kernels: dict[str, str], stages: str) -> Path:
    path = folder / "study.toml"
    listed = "\n".join(f"{label} = {json.dumps(kernel)}" for label, kernel in kernels.items())
    path.write_text(
        f'[study]\nname = "kernels"\nloads = ["idle"]\nduration = "3s"\nsettle = "0s"\n'
        f'[targets]\nBoard = "ssh://board"\n[kernels]\n{listed}\n{stages}'
        f'[boot]\ninitrd = {json.dumps(str(board.initrd))}\nboot-timeout = "240"\n'
        f"power-cycle = {json.dumps(board.power_cycle())}\n"
    )
    return path


def _run_kernel(run: Path) -> dict[str, str]:
    return read_json(run / "sysinfo.json")["kernel"]


@pytest.mark.boards
@pytest.mark.slow
def test_a_study_of_kernels_by_boot_parameters_on_a_board(kexec_board, tmp_path):
    board = kexec_board
    stages = f'[stages.none]\n[stages.isolated]\nboot = "{ISOLATED}"\n'
    study = _study(tmp_path, board, {"RT": RT, "Standard": STANDARD}, stages)
    out = tmp_path / "out"
    done = rtlab("study", str(study), "--out", str(out), env=board.env, timeout=3600)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    doc = read_json(out / "study.json")
    assert list(doc["runs"]) == [
        "runs/Board/RT/none", "runs/Board/RT/isolated",
        "runs/Board/Standard/none", "runs/Board/Standard/isolated",
    ]  # fmt: skip
    for key, entry in doc["runs"].items():
        assert entry["status"] == "complete", (key, entry)
        kernel = _run_kernel(out / key)
        rt = "/RT/" in key
        # each run measured the kernel its cell names, with the cell's command line in effect
        assert ("PREEMPT_RT" in kernel["version"]) == rt, (key, kernel)
        assert entry["board"]["release"] == kernel["release"], entry
        words = kernel["cmdline"].split()
        isolated = key.endswith("isolated")
        assert all((w in words) == isolated for w in ISOLATED.split()), (key, words)
        if isolated:
            assert any("/sys/devices/system/cpu/isolated: 1" in line for line in entry["board"]["verified"])
    # the standard kernel's plain cell needed no boot: the board's own kernel, as it booted
    assert "rtlab.boot=" not in _run_kernel(out / "runs/Board/Standard/none")["cmdline"]
    assert (
        len([p for p in (out / "boots").iterdir() if p.is_dir()]) == 3
    )  # RT, RT isolated, Standard isolated
    report = (out / "report.md").read_text()
    for label in ("RT / none", "RT / isolated", "Standard / none", "Standard / isolated"):
        assert label in report, report
    assert _uname(board) == board.default_release
    assert "rtlab.boot=" not in board.sh("cat /proc/cmdline")


@pytest.mark.boards
@pytest.mark.slow
def test_a_study_killed_while_a_kernel_boots_resumes_without_measuring_twice(kexec_board, tmp_path):
    board = kexec_board
    study = _study(tmp_path, board, {"Standard": STANDARD, "RT": RT}, "")
    out = tmp_path / "out"
    proc = start_rtlab("study", str(study), "--out", str(out), env=board.env)

    def booting() -> bool:
        for record in (out / "boots").glob("*/boot.json"):
            states = json.loads(record.read_text()).get("states", [])
            if states and states[-1]["state"] == "wait":
                return True
        return False

    try:
        wait_for(booting, 1200)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    first = read_json(out / "study.json")["runs"]
    assert list(first) == ["runs/Board/Standard/none"], first
    started = read_json(out / "runs/Board/Standard/none/run.json")["started"]
    time.sleep(1)
    done = rtlab("study", str(study), "--out", str(out), env=board.env, timeout=3600)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    assert "resuming: 1 of 2 runs already measured" in done.stderr, done.stderr
    runs = read_json(out / "study.json")["runs"]
    assert [e["status"] for e in runs.values()] == ["complete", "complete"], runs
    # the standard cell is the one measured before the kill, the RT one on the RT kernel
    assert read_json(out / "runs/Board/Standard/none/run.json")["started"] == started
    assert "PREEMPT_RT" in _run_kernel(out / "runs/Board/RT/none")["version"]
    assert "PREEMPT_RT" not in _run_kernel(out / "runs/Board/Standard/none")["version"]
    assert not list((out / "runs/Board").glob("*/*.interrupted-*"))
    assert _uname(board) == board.default_release


@pytest.mark.boards
@pytest.mark.slow
def test_a_cell_whose_parameter_did_not_take_effect_is_refused_not_measured(kexec_board, tmp_path):
    board = kexec_board
    # CPU 5 on a board of 2: the kernel boots, lists no isolated CPU, and says so
    study = _study(tmp_path, board, {"RT": RT}, '[stages.isolated]\nboot = "isolcpus=5"\n')
    out = tmp_path / "out"
    done = rtlab("study", str(study), "--out", str(out), env=board.env, timeout=3600)
    assert done.returncode == 3, done.stdout + done.stderr[-4000:]
    said = [line for line in done.stderr.splitlines() if line.startswith("rtlab:")]
    assert said == [f"rtlab: no run was measured: Board / RT / isolated (refused) (see {out}/study.json)"], (
        said
    )
    entry = read_json(out / "study.json")["runs"]["runs/Board/RT/isolated"]
    assert entry["status"] == "refused", entry
    assert any("isolcpus=5 did not take effect" in line for line in entry["refused"]), entry
    assert not (out / "runs/Board/RT/isolated").exists()  # nothing measured as if it had
    assert _uname(board) == board.default_release


@pytest.mark.boards
@pytest.mark.slow
def test_tune_boot_parameters_dry_run_apply_and_revert(kexec_board, tmp_path):
    board = kexec_board
    common = ("tune", "--target", "ssh://board", "--boot", "isolcpus=1 nohz_full=1", "--kernel", RT,
              "--initrd", str(board.initrd), "--boot-timeout", "240",
              "--power-cycle", board.power_cycle())  # fmt: skip
    dry = rtlab(*common, env=board.env, timeout=600)
    assert dry.returncode == 0, dry.stdout + dry.stderr[-3000:]
    assert "would load: kexec -l" in dry.stderr and "nohz_full=1 rtlab.boot=" in dry.stderr, dry.stderr
    assert _uname(board) == board.default_release
    # the boots' records go where rtlab runs (boots/), as rtlab boot's do: here, the test's folder
    applied = rtlab(*common, "--apply", env=board.env, timeout=1200, cwd=tmp_path)
    assert applied.returncode == 0, applied.stdout + applied.stderr[-3000:]
    assert "/sys/devices/system/cpu/isolated: 1" in applied.stdout, applied.stdout
    assert "PREEMPT_RT" in board.sh("cat /proc/version")
    assert board.sh("cat /sys/devices/system/cpu/isolated").strip() == "1"
    reverted = rtlab("tune", "--target", "ssh://board", "--boot", "", "--revert", "--boot-timeout", "240",
                     env=board.env, timeout=1200, cwd=tmp_path)  # fmt: skip
    assert any((tmp_path / "boots").iterdir())  # the boots were recorded, in the test's folder
    assert reverted.returncode == 0, reverted.stdout + reverted.stderr[-3000:]
    assert "back on its default kernel" in reverted.stdout, reverted.stdout
    assert _uname(board) == board.default_release


# --- ensure's decisions, without a board ------------------------------------------------


RT_VERSION = KernelVersion("6.1.0-50-rt-amd64", "#1 SMP PREEMPT_RT Debian 6.1.176-1 (2026-07-02)")


class _Session(ensure.Session):
    def __init__(self) -> None:
        super().__init__(ensure.Setup("ssh://b"), lambda _: None)
        self._images["rt"] = (Path("rt"), RT_VERSION)


def _report(cmdline: str, uname: str = RT_VERSION.release, boot_id: str = "b1", **more: str) -> dict:
    return {"uname": uname, "version": f"Linux version {uname} (x@y) {RT_VERSION.build}",
            "cmdline": cmdline, "boot_id": boot_id, "arch": "x86_64", **more}  # fmt: skip


@pytest.mark.unit
def test_a_board_runs_what_a_cell_wants_only_when_its_kernel_and_command_line_are_exact():
    s = _Session()
    plain, iso = ensure.Want("rt"), ensure.Want("rt", ("isolcpus=1",))
    # a kernel the board's bootloader started (no mark): its own command line counts
    assert s._runs(plain, _report("root=/dev/sda"))
    assert s._runs(iso, _report("root=/dev/sda isolcpus=1"))
    assert not s._runs(iso, _report("root=/dev/sda"))
    assert not s._runs(plain, _report("root=/dev/sda", uname="6.1.0-50-amd64"))
    # one rtlab booted stands only for the boot this session made for that cell
    booted = _report("root=/dev/sda isolcpus=1 rtlab.boot=boot-1")
    assert not s._runs(iso, booted)
    s._last_asked = (iso, "b1")
    assert s._runs(iso, booted) and not s._runs(plain, booted)
    assert not s._runs(iso, {**booted, "boot_id": "b2"})
    # the default kernel: any kernel the bootloader started, never one of rtlab's
    assert s._runs(ensure.Want(), _report("root=/dev/sda"))
    assert not s._runs(ensure.Want(), booted)


@pytest.mark.unit
def test_a_parameter_that_did_not_take_effect_is_refused_with_the_evidence():
    s = _Session()
    want = ensure.Want("rt", ("isolcpus=1", "irqaffinity=0"))
    ok = _report("isolcpus=1 irqaffinity=0", isolated="1", nohz_full="@none", irqaffinity="1")
    on = s._verified(want, ok, None)
    assert on.release == RT_VERSION.release and any("isolated: 1" in line for line in on.evidence)
    with pytest.raises(ensure.Refused, match="isolcpus=1 did not take effect: .*isolated says ''"):
        s._verified(want, {**ok, "isolated": ""}, None)
    with pytest.raises(ensure.Refused, match="irqaffinity=0 did not take effect: .* says '3'"):
        s._verified(want, {**ok, "irqaffinity": "3"}, None)
    with pytest.raises(ensure.Refused, match="booted another kernel"):
        s._verified(want, {**ok, "uname": "6.1.0-50-amd64"}, None)
    assert verify.mask_cpus("00000000,00000006") == {1, 2}


@pytest.mark.unit
def test_a_study_with_kernels_orders_cells_by_boot_and_names_them(tmp_path):
    text = (
        '[targets]\nBoard = "ssh://root@vf2"\n[kernels]\nRT = "out/rt/bzImage"\nMainline = "default"\n'
        '[stages.none]\n[stages.isolated]\nboot = "isolcpus=1"\n[stages.tuned]\ntune = true\nrt-cpus = "1"\n'
    )
    study = parse(text, tmp_path / "s.toml")
    assert [c.folder for c in study.cells()][:3] == [
        "runs/Board/RT/none", "runs/Board/RT/isolated", "runs/Board/RT/tuned",
    ]  # fmt: skip
    # the cells of one boot follow one another: none and tuned share the RT kernel's plain boot
    order = [study.label(c) for c in study.order()]
    assert order == ["RT / none", "RT / tuned", "RT / isolated",
                     "Mainline / none", "Mainline / tuned", "Mainline / isolated"]  # fmt: skip
    assert study.cells()[1].want() == ensure.Want(str(tmp_path / "out/rt/bzImage"), ("isolcpus=1",))
    for bad, says in (
        ('[targets]\nA = "qemu:debian"\n[kernels]\nRT = "x"\n', "every target must be ssh://"),
        ('[targets]\nA = "ssh://b"\n[boot]\ninitrd2 = "x"\n', "unknown key initrd2"),
    ):
        with pytest.raises(UsageError, match=says):
            parse(bad, tmp_path / "s.toml")


@pytest.mark.boards
@pytest.mark.slow
def test_compare_two_kernels_on_a_board_alternates_them(kexec_board, tmp_path):
    board = kexec_board
    out = tmp_path / "cmp"
    done = rtlab("compare", "--target", "ssh://board", "--kernel", RT, "--kernel", STANDARD, "--repeat", "2",
                 "--labels", "RT,Standard", "--loads", "idle", "--duration", "3s", "--settle", "0s",
                 "--initrd", str(board.initrd), "--boot-timeout", "240", "--power-cycle", board.power_cycle(),
                 "--out", str(out), env=board.env, timeout=3600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    runs = read_json(out / "kernels.json")["runs"]
    # A B B A, each run on the kernel it names (verified before, and read back from the run)
    assert list(runs) == ["RT/repeat-1", "Standard/repeat-1", "Standard/repeat-2", "RT/repeat-2"], runs
    for key, entry in runs.items():
        assert entry["status"] == "complete", (key, entry)
        kernel = _run_kernel(out / key)
        assert ("PREEMPT_RT" in kernel["version"]) == key.startswith("RT/"), (key, kernel)
    # the standard kernel's two runs on one boot, the board's own; the RT kernel's on two boots
    assert runs["Standard/repeat-1"]["board"]["boot_id"] == runs["Standard/repeat-2"]["board"]["boot_id"]
    assert len([p for p in (out / "boots").iterdir() if p.is_dir()]) == 2
    assert "RT" in done.stdout and "Standard" in done.stdout  # compare's table and verdicts
    assert _uname(board) == board.default_release


@pytest.mark.unit
def test_kernels_alternate_so_a_drifting_board_weighs_on_each_alike():
    from rtlab.campaigns.kernels import Side, order

    a, b = Side("A", ensure.Want("a")), Side("B", ensure.Want("b"))
    assert [(s.label, k) for s, k in order([a, b], 4)] == [
        ("A", 1), ("B", 1), ("B", 2), ("A", 2), ("A", 3), ("B", 3), ("B", 4), ("A", 4),
    ]  # fmt: skip
    assert ensure.label_of("linux-image-rt-amd64") == "linux-image-rt-amd64"


@pytest.mark.unit
def test_compare_of_kernels_refuses_what_it_cannot_measure_in_one_line(tmp_path):
    for args, says in (
        (["--kernel", "a", "--kernel", "b"], "give --target ssh://"),
        (["--target", "qemu:debian", "--kernel", "a", "--kernel", "b"], "give --target ssh://"),
        (["--target", "ssh://b", "--kernel", "a"], "give two kernels or more"),
        (["--target", "ssh://b", "--kernel", "a", "--kernel", "b", "--labels", "x"], "1 labels for 2"),
        (["--target", "ssh://b", "--repeat", "2", str(tmp_path), str(tmp_path)], "go with --kernel"),
    ):
        done = rtlab("compare", *args)
        assert done.returncode == 2 and says in done.stderr, (args, done.stderr)


@pytest.mark.unit
def test_a_revision_whose_kernel_does_not_boot_is_skipped_with_its_record(tmp_path):
    from rtlab.bisect.board import Boots
    from rtlab.bisect.measured import READY, SKIPPED, Settings, Subject, Subjects

    class Board:  # ensure's answers, as a board that boots one kernel and not the other gives them
        def __init__(self) -> None:
            self.asked: list[str] = []
            self.say = lambda _: None

        def ensure(self, want: ensure.Want) -> ensure.On:
            self.asked.append(want.kernel)
            if "broken" in want.kernel:
                raise ensure.Refused(
                    want, ["did not boot", "no answer over SSH within 300 s"], tmp_path / "b1"
                )
            return ensure.On(want, "6.12.0-rt", "#1 PREEMPT_RT", "", "b", ["running 6.12.0-rt"])

    board = Board()
    boots = Boots(board, lambda s: tmp_path / s.folder, lambda s: tmp_path / s.folder / "kernel/Image")  # type: ignore[arg-type]
    measured: list[str] = []

    def measure(where: Path, name: str, s: Subject) -> str:
        boots.before(s)
        measured.append(s.key)
        raise RuntimeError("measured")  # the good revision got this far: booted, verified

    prepared: dict[str, str] = {}
    lab = Subjects(tmp_path, measure, lambda s: READY, lambda _: None, prepared, lambda: None, Settings())
    lab.boot = boots.boot
    broken, good = Subject("bbb", "revs/002-broken", "bbb"), Subject("ggg", "revs/003-good", "ggg")
    assert lab.ensure(broken, 1) is False
    assert prepared == {"bbb": SKIPPED} and measured == []
    log = (tmp_path / "revs/002-broken/prepare.log").read_text()
    assert "skipped (125)" in log and "no answer over SSH" in log and str(tmp_path / "b1") in log
    with pytest.raises(RuntimeError, match="measured"):
        lab.ensure(good, 1)
    assert prepared["ggg"] == READY and measured == ["ggg"]
    assert (
        board.asked
        == [str(tmp_path / "revs/002-broken/kernel/Image")]
        + [str(tmp_path / "revs/003-good/kernel/Image")] * 2
    )


@pytest.mark.unit
def test_a_kernel_that_booted_before_and_fails_once_is_booted_again_not_skipped(tmp_path):
    # a loaded emulator: the good end's kernel, booted and measured before, comes back on the
    # board's default once when it is booted again for the ends' next run in turns
    from rtlab.bisect.board import Boots
    from rtlab.bisect.measured import ATTEMPTS, READY, Settings, Subject, Subjects
    from rtlab.errors import RunFailed

    class Board:
        def __init__(self, fails: int) -> None:
            self.fails, self.asked = fails, 0
            self.say = lambda _: None

        def ensure(self, want: ensure.Want) -> ensure.On:
            self.asked += 1
            if self.asked > 1 and self.fails:  # the first boot went well
                self.fails -= 1
                raise ensure.Refused(want, ["booted another kernel"], tmp_path / f"b{self.asked}")
            return ensure.On(want, "6.12.0-rt", "#1 PREEMPT_RT", "", f"b{self.asked}", ["running 6.12.0-rt"])

    def lab_on(board: Board) -> tuple[Subjects, dict[str, str]]:
        boots = Boots(board, lambda s: tmp_path / s.folder, lambda s: tmp_path / s.folder / "kernel/Image")  # type: ignore[arg-type]
        prepared: dict[str, str] = {}
        lab = Subjects(tmp_path, lambda *_: "x", lambda s: READY, lambda _: None, prepared, lambda: None,
                       Settings())  # fmt: skip
        lab.boot = boots.boot
        return lab, prepared

    good = Subject("ggg", "revs/000-good", "ggg")
    flaky = Board(fails=1)
    lab, prepared = lab_on(flaky)
    assert lab._ready(good) and prepared == {"ggg": READY}
    lab.current = None  # another revision measured in between: good's kernel booted again
    assert lab._ready(good) and prepared == {"ggg": READY} and flaky.asked == 3
    log = (tmp_path / "revs/000-good/prepare.log").read_text()
    assert "which booted before, did not boot" in log and "skipped" not in log
    # one that fails every time now stops in one line, never skipped: the same command again goes on
    broken = Board(fails=ATTEMPTS)
    lab, prepared = lab_on(broken)
    assert lab._ready(good)
    lab.current = None
    with pytest.raises(RunFailed, match=f"it booted before, not in {ATTEMPTS} attempts now"):
        lab._ready(good)
    assert prepared == {"ggg": READY} and broken.asked == 1 + ATTEMPTS


@pytest.mark.unit
def test_a_restarted_campaign_trusts_only_the_boot_it_verified(tmp_path):
    first = ensure.Session(ensure.Setup("ssh://b", boots=tmp_path), lambda _: None)
    iso = ensure.Want("rt", ("isolcpus=1",))
    first._images["rt"] = (Path("rt"), RT_VERSION)
    booted = _report("root=/dev/sda isolcpus=1 rtlab.boot=boot-1", isolated="1", nohz_full="@none")
    first._verified(iso, booted, None)
    again = ensure.Session(ensure.Setup("ssh://b", boots=tmp_path), lambda _: None)
    again._images["rt"] = (Path("rt"), RT_VERSION)
    assert again._runs(iso, booted)  # the same boot: nothing booted again
    assert not again._runs(iso, {**booted, "boot_id": "b2"})  # the board rebooted meanwhile
    (tmp_path / ensure.LAST).write_text('{"kernel": "rt", "append": "isolcpus=1", "boot_id": "b1"}')
    damaged = ensure.Session(ensure.Setup("ssh://b", boots=tmp_path), lambda _: None)
    damaged._images["rt"] = (Path("rt"), RT_VERSION)
    assert not damaged._runs(iso, booted)


@pytest.mark.unit
def test_a_board_reset_to_its_default_has_what_a_boot_left_put_back_before_the_next_and_at_the_end():
    # a GRUB board's one-shot boot, then a reset (a watchdog) during the measurement: the board
    # runs its default kernel, but GRUB's files still hold rtlab's entry and its saved copies
    events: list[str] = []
    default = _report("root=/dev/sda", uname="6.1.0-50-amd64", boot_id="b2")
    rt = _report("root=/dev/sda rtlab.boot=boot-2", boot_id="b3", isolated="@none", nohz_full="@none")
    reports = [default, rt, default]

    class Reset(_Session):
        def report(self) -> dict:
            events.append("report")
            return reports.pop(0)

        def back(self) -> str:
            events.append("back")
            return "back: put back"

        def _boot(self, want: ensure.Want, path: Path) -> Path | None:
            events.append("boot")
            return None

    s = Reset()
    s.booted = True
    s.ensure(ensure.Want("rt"))
    assert events == ["report", "back", "boot", "report"]
    assert s.close() == "back: put back" and events[-2:] == ["report", "back"]


@pytest.mark.unit
def test_a_label_of_dots_names_no_folder_outside_the_comparison():
    from rtlab.campaigns import kernels
    from rtlab.names import slug

    # --labels ..,x: the first side's runs and repeats.json went to --out's parent
    assert [kernels.Side(label, ensure.Want()).folder for label in ("..", ".", "./..")] == ["_", "_", "._.."]
    assert slug("a..b") == "a..b"


@pytest.mark.unit
@pytest.mark.parametrize(
    "damaged",
    [
        {"runs": "ab"},
        {"runs": {"a/repeat-1": 1}},
        {"n": "x\n\x1b[31m", "target": ["t"], "sides": [[]]},
    ],
)
def test_a_damaged_kernels_index_is_one_line(tmp_path, damaged):
    import json

    from rtlab.campaigns import kernels

    sides = [kernels.Side("a", ensure.Want("A")), kernels.Side("b", ensure.Want("B"))]
    asked = {"target": "ssh://b", "n": 1, "sides": [["a", "A", ""], ["b", "B", ""]]}
    (tmp_path / kernels.FILE).write_text(json.dumps({**asked, **damaged}))
    with pytest.raises(UsageError) as e:
        kernels.run(sides, 1, "ssh://b", tmp_path, lambda side, where: ({}, False), lambda _: None)
    assert "\n" not in str(e.value) and "\x1b" not in str(e.value)


@pytest.mark.unit
def test_a_resumed_study_whose_kernel_changed_in_its_file_measures_the_cell_again(tmp_path):
    from rtlab.campaigns import study as studies

    head = '[study]\nname = "k"\n[targets]\nBoard = "ssh://root@vf2"\n[stages.none]\n'
    measured: list[str] = []

    def measure(cell, where):
        measured.append(cell.folder)
        where.mkdir(parents=True)
        want = cell.want()
        return "complete", "", False, {"board": {"kernel": want.kernel, "append": " ".join(want.append)}}

    first = parse(head + '[kernels]\nRT = "out/rt/bzImage"\n', tmp_path / "s.toml")
    studies.run(first, tmp_path / "out", measure, lambda _: None)
    studies.run(first, tmp_path / "out", measure, lambda _: None)  # the same file: nothing again
    assert measured == ["runs/Board/RT/none"]
    edited = parse(head + '[kernels]\nRT = "out/rt2/bzImage"\n', tmp_path / "s.toml")
    doc = studies.run(edited, tmp_path / "out", measure, lambda _: None)
    assert measured == ["runs/Board/RT/none"] * 2
    assert doc["runs"]["runs/Board/RT/none"]["board"]["kernel"] == str(tmp_path / "out/rt2/bzImage")
    assert (tmp_path / "out/runs/Board/RT/none.interrupted-1").is_dir()  # the first kept beside


@pytest.mark.unit
def test_a_boots_record_goes_to_a_new_folder_when_an_earlier_one_was_removed(tmp_path):

    outs: list[Path] = []

    class Engine:
        board = type("B", (), {"drop": lambda self: None})()

        def boot(self) -> steps.Outcome:
            return steps.Outcome(verify.BOOTED, [], None)

    class Recorded(_Session):
        def _engine(self, **extra: object) -> Engine:  # type: ignore[override]
            outs.append(extra["out"])  # type: ignore[arg-type]
            return Engine()

    s = Recorded()
    s.setup.boots = tmp_path
    (tmp_path / "002").mkdir()  # 001 removed by hand
    s._boot(ensure.Want("rt"), Path("rt"))
    assert outs == [tmp_path / "003"]


@pytest.mark.unit
@pytest.mark.parametrize("label", ["boots", "kernels.json"])
def test_a_kernels_label_that_names_the_comparisons_own_files_is_refused(tmp_path, label):
    from rtlab.campaigns import kernels

    sides = [kernels.Side(label, ensure.Want("A")), kernels.Side("b", ensure.Want("B"))]
    with pytest.raises(UsageError, match="comparison's own"):
        kernels.run(sides, 1, "ssh://b", tmp_path, lambda side, where: ({}, False), lambda _: None)


@pytest.mark.unit
def test_a_resumed_comparison_whose_kernel_was_rebuilt_is_refused_not_mixed(tmp_path):
    from rtlab.campaigns import kernels

    rt, std = tmp_path / "rt.Image", tmp_path / "std.Image"
    rt.write_bytes(b"first build")
    std.write_bytes(b"standard")
    sides = [kernels.Side("rt", ensure.Want(str(rt))), kernels.Side("std", ensure.Want(str(std)))]
    out = tmp_path / "out"
    measured: list[str] = []

    def measure(side, where):  # the first kernel measured, then the comparison stopped
        measured.append(side.label)
        return {"status": "complete"}, True

    from rtlab.errors import Stopped

    with pytest.raises(Stopped):
        kernels.run(sides, 2, "ssh://b", out, measure, lambda _: None)
    assert measured == ["rt"]
    doc = read_json(out / kernels.FILE)
    assert doc["digests"] == {"rt": kernels.digest(str(rt)), "std": kernels.digest(str(std))}
    rt.write_bytes(b"second build")  # rebuilt at the same path
    with pytest.raises(UsageError) as e:
        kernels.run(sides, 2, "ssh://b", out, measure, lambda _: None)
    assert "rt's kernel changed since" in str(e.value) and "put it back" in str(e.value)
    assert measured == ["rt"] and list(read_json(out / kernels.FILE)["runs"]) == ["rt/repeat-1"]
    rt.write_bytes(b"first build")  # put back: it goes on where it stopped
    on = lambda side, where: (measure(side, where)[0], False)  # noqa: E731
    kernels.run(sides, 2, "ssh://b", out, on, lambda _: None)
    assert measured == ["rt", "std", "std", "rt"]

    # a build folder (rtlab kernel build's out/) is held to the image in it
    build = tmp_path / "out-rt"
    build.mkdir()
    (build / "bzImage").write_bytes(b"first build")
    assert kernels.digest(str(build)) == kernels.digest(str(rt))
    folder_sides = [kernels.Side("rt", ensure.Want(str(build))), sides[1]]
    with pytest.raises(Stopped):
        kernels.run(folder_sides, 2, "ssh://b", tmp_path / "out2", measure, lambda _: None)
    (build / "bzImage").write_bytes(b"second build")
    with pytest.raises(UsageError, match="rt's kernel changed since"):
        kernels.run(folder_sides, 2, "ssh://b", tmp_path / "out2", measure, lambda _: None)
    (build / "bzImage").unlink()
    with pytest.raises(UsageError, match="now no image there"):
        kernels.run(folder_sides, 2, "ssh://b", tmp_path / "out2", measure, lambda _: None)


@pytest.mark.unit
def test_a_studys_kernel_paths_are_from_its_own_folder_as_its_boot_files_are(tmp_path, monkeypatch):
    folder = tmp_path / "studies"
    folder.mkdir()
    (folder / "bzImage").write_bytes(b"kernel")
    text = (
        '[study]\nname = "k"\nloads = ["idle"]\n[targets]\nBoard = "ssh://root@vf2"\n'
        '[kernels]\nRT = "out/rt"\nHere = "bzImage"\nDeb = "linux-image-6.12-rt.deb"\n'
        'Package = "linux-image-rt-amd64"\nOwn = "default"\nAbs = "/srv/Image"\n'
        'Suite = "linux-image-rt-amd64/bookworm-backports"\n'
    )
    monkeypatch.chdir(tmp_path)  # rtlab started from another folder than the study's
    study = parse(text, Path("studies/k.toml"))
    assert dict(study.kernels) == {
        "RT": str(folder / "out/rt"), "Here": str(folder / "bzImage"),
        "Deb": str(folder / "linux-image-6.12-rt.deb"), "Package": "linux-image-rt-amd64",
        "Own": "default", "Abs": "/srv/Image", "Suite": "linux-image-rt-amd64/bookworm-backports",
    }  # fmt: skip
    # a study begun when its kernel paths were kept as written, from the folder it ran in:
    # resumed from there, its cells stand (nothing measured again)
    from rtlab.campaigns import study as studies

    cell = next(c for c in study.cells() if c.kernel and c.kernel[0] == "Here")
    monkeypatch.chdir(folder)
    entry = {"status": "complete", "board": {"kernel": "bzImage", "append": ""}}
    assert studies._measured_as_asked(cell, entry)
    assert not studies._measured_as_asked(cell, {**entry, "board": {"kernel": "other", "append": ""}})


@pytest.mark.unit
def test_a_ctrl_c_while_the_board_is_put_back_waits_until_it_is():
    # a campaign's end (or its first Ctrl-C) puts the board back on its default kernel; a
    # Ctrl-C then must not stop that half way (the board would run a kernel no one knows): it
    # is noted, said, and the caller stops after it with its own words
    import os

    events: list[str] = []
    said: list[str] = []

    class PutBack(_Session):
        def report(self) -> dict:
            return _report("root=/dev/sda rtlab.boot=boot-1")

        def back(self) -> str:
            events.append("back begins")
            os.kill(os.getpid(), signal.SIGINT)  # the user's second Ctrl-C
            events.append("back ends")
            return "back: on 6.1.0-50-amd64"

    s = PutBack()
    s.say = said.append
    before = signal.getsignal(signal.SIGINT)
    assert s.close() == "back: on 6.1.0-50-amd64"
    assert signal.getsignal(signal.SIGINT) == before  # Ctrl-C is the caller's again
    assert events == ["back begins", "back ends"] and s.stopped
    assert said[-2] == "rtlab stops once ssh://b is found on its default kernel, or put back on it"
    with pytest.raises(Stopped) as e:
        s.after_close("run the same study again to go on")
    assert str(e.value) == (
        "interrupted as rtlab let go of ssh://b: ssh://b was put back on its default kernel first "
        "(back: on 6.1.0-50-amd64); run the same study again to go on"
    )
    # a board that never comes back: the third Ctrl-C ends the wait, and says what is unknown
    stuck = PutBack()
    stuck.say = said.append
    stuck.back = lambda: [os.kill(os.getpid(), signal.SIGINT) for _ in range(3)] and "never"  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        stuck.close()
    assert said[-1] == "stopped: ssh://b's kernel is unknown: rtlab boot --target ssh://b --back"
    assert signal.getsignal(signal.SIGINT) == before


@pytest.mark.unit
def test_a_study_lets_go_of_every_board_whatever_ctrl_c_comes_between():
    # a Ctrl-C between two boards' close is held as one during a close (each board is still
    # put back, and the study stops after); the third during one board's wait lets go of the
    # boards after it unchecked, each named with its way back
    import os

    said: list[str] = []
    closed: list[str] = []

    class Board(_Session):
        def __init__(self, target: str) -> None:
            super().__init__()
            self.setup = ensure.Setup(target)

        def close(self) -> str | None:
            closed.append(self.setup.target)
            return f"back: {self.setup.target}"

    def between(line: str) -> bool:  # what a study shows of a close: here, a Ctrl-C after it
        os.kill(os.getpid(), signal.SIGINT)
        return False

    boards = [Board("ssh://a"), Board("ssh://b")]
    before = signal.getsignal(signal.SIGINT)
    ensure.close_all(boards, said.append, shown=between)
    assert signal.getsignal(signal.SIGINT) == before
    assert closed == ["ssh://a", "ssh://b"] and all(b.stopped for b in boards)

    class Stuck(Board):
        def close(self) -> str | None:
            closed.append(self.setup.target)
            raise KeyboardInterrupt  # as close() raises on the third Ctrl-C

    closed.clear()
    with pytest.raises(KeyboardInterrupt):
        ensure.close_all([Stuck("ssh://a"), Board("ssh://b")], said.append, shown=lambda _: True)
    assert closed == ["ssh://a"]
    back = "rtlab boot --target ssh://b --back"
    assert said[-1] == f"ssh://b: not checked: {back} puts it on its default kernel"
    assert signal.getsignal(signal.SIGINT) == before  # Ctrl-C is the caller's again


@pytest.mark.unit
def test_a_ctrl_c_while_a_silent_board_is_waited_for_says_it_did_not_answer():
    # letting go of a board that does not answer: the stop says so, never "put back"
    import os

    class Silent(_Session):
        def _answering(self) -> dict:
            os.kill(os.getpid(), signal.SIGINT)  # while rtlab waits for it
            raise RunFailed("no answer within 300 s")

    s = Silent()
    said = s.close()
    assert s.silent and s.stopped
    assert said == "ssh://b did not answer: no answer within 300 s; rtlab boot --target ssh://b --back"
    with pytest.raises(Stopped) as e:
        s.after_close()
    assert str(e.value) == f"interrupted as rtlab let go of ssh://b: {said}"
