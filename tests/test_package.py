"""rtlab as a user installs it: the wheel (and sdist) built from this tree, installed into a
fresh virtualenv outside the tree, must carry every file the code reads at run time."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from conftest import needs_root, needs_tools, read_json

pytestmark = pytest.mark.host

ROOT = Path(__file__).resolve().parents[1]
# The installed package alone: nothing from this checkout on the path
CLEAN = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
RUNTIME_FILES = (
    "rtlab/agent/parts/00-head.sh",
    "rtlab/agent/parts/99-main.sh",
    "rtlab/targets/qemu/init.sh",
    "rtlab/kernel/kconfig/rt.config",
    "rtlab/kernel/kconfig/small.config",
    "rtlab/report/templates/report.html.j2",
    "rtlab/plan/loads.toml",
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    dist = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--sdist", "--outdir", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    wheel = next(dist.glob("rtlab-*.whl"))
    pip = subprocess.run(
        [str(venv / "bin/pip"), "install", "-q", str(wheel)], capture_output=True, text=True, env=CLEAN
    )
    assert pip.returncode == 0, pip.stderr[-2000:]
    return dist, venv


def test_wheel_and_sdist_hold_every_runtime_file(installed):
    dist, _ = installed
    with zipfile.ZipFile(next(dist.glob("rtlab-*.whl"))) as wheel:
        names = wheel.namelist()
    for path in RUNTIME_FILES:
        assert path in names, path
    with tarfile.open(next(dist.glob("rtlab-*.tar.gz"))) as tar:
        sdist = tar.getnames()
    for path in RUNTIME_FILES:
        assert any(name.endswith(f"src/{path}") for name in sdist), path


def test_installed_rtlab_works_outside_the_tree(installed, tmp_path):
    _, venv = installed
    rtlab = str(venv / "bin/rtlab")
    version = subprocess.run([rtlab, "--version"], capture_output=True, text=True, cwd=tmp_path, env=CLEAN)
    assert version.returncode == 0 and version.stdout.startswith("rtlab ")
    assert subprocess.run([rtlab, "--help"], capture_output=True, cwd=tmp_path, env=CLEAN).returncode == 0
    fragments = subprocess.run(
        [rtlab, "kernel", "fragments"], capture_output=True, text=True, cwd=tmp_path, env=CLEAN
    )
    assert fragments.returncode == 0, fragments.stderr
    assert "CONFIG_PREEMPT_RT=y" in fragments.stdout
    # the package's own files, not this checkout's
    where = subprocess.run(
        [str(venv / "bin/python"), "-c", "import rtlab; print(rtlab.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=CLEAN,
    ).stdout
    assert where.startswith(str(venv)), where


@needs_root
@needs_tools
def test_installed_rtlab_measures(installed, tmp_path):
    _, venv = installed
    out = tmp_path / "run"
    done = subprocess.run(
        [
            str(venv / "bin/rtlab"),
            "run",
            "--loads",
            "idle",
            "--duration",
            "1s",
            "--settle",
            "0s",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=CLEAN,
    )
    assert done.returncode == 0, done.stderr
    assert read_json(out / "summary.json")["loads"]["idle"]["merged"]["samples"] > 0
