"""The HTML report of a real short run, opened in headless Chromium: the table and
the figures must be there and drawn, not just a file that exists."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib import colors
from matplotlib.image import imread

from conftest import needs_root, needs_tools, rtlab, run_args
from rtlab.report import figures

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.host,
    needs_root,
    needs_tools,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is installed by `make test`"),
]


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CHROMIUM or "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("html")
    run = base / "run"
    done = rtlab(*run_args(run, "idle,cpu", "2s", settle="1s"))
    assert done.returncode == 0, done.stderr
    out = base / "report.html"
    done = rtlab("report", str(run), "--format", "html", "-o", str(out), "--deadline", "100ms")
    assert done.returncode == 0, done.stderr
    return out


def test_dom_has_the_table_and_drawn_figures(page):
    dom = chromium("--dump-dom", page.as_uri()).stdout
    assert 'id="table-5-1"' in dom
    for load in ("idle", "cpu"):
        assert f'<td class="name">{load}</td>' in dom
    assert dom.count("<svg") >= 2
    for load in ("idle", "cpu"):  # OSADL's latency plot, a curve per CPU
        assert f'id="fig-osadl-{load}"' in dom and "Latency plot (as OSADL draws it)" in dom
    # a drawn curve is a path with many points, not an empty axis
    assert any(len(d) > 500 for d in dom.split(' d="')[1:])


def test_screenshot_shows_the_figures(page, tmp_path):
    shot = tmp_path / "shot.png"
    done = chromium(f"--screenshot={shot}", "--window-size=1200,4000", page.as_uri())
    assert shot.exists(), done.stderr
    pixels = imread(shot)[:, :, :3]
    assert pixels.std() > 0.05  # not a blank page
    for load in ("idle", "cpu"):
        rgb = np.array(colors.to_rgb(figures.load_color(load)))
        near = np.abs(pixels - rgb).sum(axis=2) < 0.15
        assert near.sum() > 200, f"no {load} curve on the page"
