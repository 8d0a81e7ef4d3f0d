"""Report formats on summaries made by hand: figures, deadlines, JUnit and HTML escaping."""

from __future__ import annotations

import csv
import io
import re
import warnings
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from rtlab.analysis import stats
from rtlab.analysis.histogram import Histogram
from rtlab.analysis.summary import warnings as summary_warnings
from rtlab.analysis.verdict import with_deadline
from rtlab.plan import Plan
from rtlab.report import figures
from rtlab.report.formats import csv_format, html, junit

pytestmark = pytest.mark.unit  # pure: summaries made here, rendered


def entry(counts: dict[int, int], status: str = "complete", overflows: int = 0, cpus: int = 2) -> dict:
    h = Histogram.from_counts(counts, 100_000, overflows=overflows, reported_max_us=max(counts))
    per_cpu = {str(c): h.to_json() for c in range(cpus)}
    return {
        "status": status,
        "merged": stats.compute(h).to_json(),
        "cpus": {str(c): stats.compute(h).to_json() for c in range(cpus)},
        "histograms": {"merged": h.to_json(), "cpus": per_cpu},
        "reason": None if status == "complete" else "made by hand",
        "phases": None,
        "timeline": None,
    }


def summary(run: str, loads: dict[str, dict], version: str = "6.12.0-rt #1 SMP PREEMPT_RT") -> dict:
    return {
        "schema": "rtlab.summary/1",
        "run": run,
        "status": "complete",
        "started": "2026-11-21T10:00:00+00:00",
        "target": {"kind": "local", "host": "board"},
        "plan": Plan(loads=tuple(loads), duration_s=600, interval_us=200).to_json(),
        "clock": None,
        "audit": [],
        "system": {
            "hostname": "board",
            "kernel_release": "6.12.0-rt",
            "kernel_version": version,
            "preemption": "PREEMPT_RT",
            "realtime": True,
            "cmdline": "console=ttyS0",
            "cpu_model": "sifive,u74-mc",
            "cpu_count": 2,
            "governors": {"0": "performance"},
        },
        "loads": loads,
        "warnings": [],
    }


RT = summary("rt", {"idle": entry({8: 100, 12: 50, 40: 1}), "cpu": entry({9: 80, 20: 10, 150: 1})})
MAINLINE = summary("mainline", {"idle": entry({8: 90, 15: 40, 66: 1}), "cpu": entry({10: 70, 900: 2})})


def test_deadline_verdict_and_margin():
    judged = with_deadline(RT, 100)["deadline"]
    assert judged["loads"]["idle"] == {"verdict": "pass", "max_us": 40, "margin_us": 60, "deadline_us": 100}
    assert judged["loads"]["cpu"] == {"verdict": "miss", "max_us": 150, "margin_us": -50, "deadline_us": 100}
    assert judged["pass"] is False
    assert with_deadline(RT, 150)["deadline"]["pass"] is True  # equal to the deadline is in time


def test_junit_one_failing_one_passing_load():
    text = junit.render([with_deadline(RT, 100)], ["rt"])
    root = ET.fromstring(text)
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "0")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["idle"].find("failure") is None
    failure = cases["cpu"].find("failure")
    assert failure is not None
    assert "150 µs exceeds the deadline 100 µs by 50 µs" in failure.get("message", "")
    assert cases["cpu"].get("time") == "600.0"


def test_junit_marks_an_unmeasured_load_as_error():
    lost = {"status": "failed", "reason": "x", "merged": None, "cpus": {}, "histograms": None}
    broken = summary("x", {"idle": {**lost, "phases": None, "timeline": None}})
    suite = ET.fromstring(junit.render([with_deadline(broken, 100)], ["x"])).find("testsuite")
    assert suite is not None and suite.get("errors") == "1"


def test_histogram_figure_plots_exactly_the_summary_histograms():
    figs = {f.name: f for f in figures.histogram_figures([RT], ["rt"])}
    assert set(figs) == {"histogram"}  # nothing beyond 200 µs: no full-range figure
    lines = {line.get_label(): line for line in figs["histogram"].figure.axes[0].lines}
    for load in ("idle", "cpu"):
        hist = RT["loads"][load]["histograms"]["merged"]
        expected = np.zeros(figures.VIEW_US, dtype=np.int64)
        expected[hist["values"]] = hist["counts"]
        assert list(lines[load].get_xdata()) == list(range(figures.VIEW_US))
        assert list(lines[load].get_ydata()) == expected.tolist()
        assert lines[load].get_color() == figures.load_color(load)


def test_comparison_figures_overlay_runs_with_fixed_colours():
    figs = {f.name: f for f in figures.histogram_figures([RT, MAINLINE], ["RT", "Mainline"])}
    # mainline's cpu load reached 900 µs, beyond the 200 µs view: the full range is drawn too
    assert set(figs) == {"histogram-idle", "histogram-cpu", "histogram-idle-full", "histogram-cpu-full"}
    full = {line.get_label(): line for line in figs["histogram-cpu-full"].figure.axes[0].lines}
    assert list(full["Mainline"].get_xdata()) == [10, 900]
    assert list(full["Mainline"].get_ydata()) == [70, 2]
    for name in ("histogram-idle", "histogram-cpu"):
        colours = [line.get_color() for line in figs[name].figure.axes[0].lines]
        assert colours == [figures.run_color(0), figures.run_color(1)]


def test_max_figure_bars_and_deadline_line():
    fig = figures.max_figure([RT, MAINLINE], ["RT", "Mainline"], deadline_us=100).figure
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches]
    assert heights == [40, 150, 66, 900]
    assert [line.get_ydata()[0] for line in ax.lines] == [100]


def test_a_run_where_no_load_measured_anything_says_so_on_its_figures():
    failed = {"status": "failed", "reason": "made by hand", "merged": None, "cpus": {}, "histograms": None}
    nothing = summary("broken", {"idle": dict(failed), "cpu": dict(failed)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no empty log axis, no legend of nothing
        drawn = [
            *figures.histogram_figures([nothing], ["broken"]),
            figures.max_figure([nothing], ["b"], None),
        ]
    for named in drawn:
        ax = named.figure.axes[0]
        assert [t.get_text() for t in ax.texts] == ["no load measured anything"], named.name
        assert ax.get_legend() is None, named.name
    assert drawn[-1].figure.axes[0].get_yscale() == "linear"  # the bars' log axis has nothing to show


def test_html_escapes_what_the_measured_system_says():
    hostile = summary("evil", {"idle": entry({8: 10})}, version='6.1 <script>alert("x")</script> & co')
    page = html.render([hostile], ["<b>label</b>"])
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; co" in page
    assert "<b>label</b>" not in page


def test_html_is_self_contained():
    page = html.render([with_deadline(RT, 100), with_deadline(MAINLINE, 100)], ["RT", "Mainline"])
    assert page.count("<svg") == 1 + 4  # max bars, and 2 loads x (view + full range)
    # nothing is fetched: no external scripts, styles, images or fonts
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "@import" not in page and "<link" not in page
    assert "FAIL" in page and "MISS (-50)" in page


def test_comparison_warnings_name_the_difference():
    other = dict(MAINLINE, system=dict(MAINLINE["system"], cpu_model="Cortex-A55"))
    page = html.render([RT, other], ["RT", "Mainline"])
    assert "runs come from different machines (RT: sifive,u74-mc, Mainline: Cortex-A55)" in page


def test_missed_periods_are_warned_about():
    # 10 s at 200 µs on 2 CPUs plans 100,000 samples; 87,000 means periods were skipped.
    plan = {"duration_s": 10, "interval_us": 200, "histogram_us": 100_000}
    short = entry({20: 43_500})
    loads = {"os": {**short, "merged": {**short["merged"], "samples": 87_000}}, "idle": entry({20: 100_000})}
    found = [w for w in summary_warnings(plan, None, loads, []) if w["code"] == "missed-periods"]
    assert [w["load"] for w in found] == ["os"]
    assert "13 % fewer samples than planned (87000 of 100000)" in found[0]["message"]


def test_a_guest_whose_first_boot_hung_is_warned_about():
    plan = {"duration_s": 10, "interval_us": 1000, "histogram_us": 100_000}
    target = {
        "kind": "qemu",
        "accel": "tcg",
        "boot_note": "its first boot hung (silent for 60 s while it booted)",
    }
    found = {w["code"]: w["message"] for w in summary_warnings(plan, None, {}, [], target)}
    assert found["boot"] == "the guest: its first boot hung (silent for 60 s while it booted)"
    assert "boot" not in {
        w["code"] for w in summary_warnings(plan, None, {}, [], {**target, "boot_note": ""})
    }


def _screen(renderable, width: int = 80) -> str:
    import io

    from rich.console import Console

    buffer = io.StringIO()
    Console(width=width, color_system=None, file=buffer).print(renderable)
    return buffer.getvalue()


def test_a_piped_table_keeps_every_number_and_both_long_names():
    from rtlab.report.formats import table

    long_rt = {**RT, "loads": {**RT["loads"], "storage": RT["loads"]["idle"]}}
    labels = ["results/20261123-101500-visionfive2-rt", "results/20261123-111500-visionfive2-mainline"]
    for runs in ([long_rt], [long_rt, MAINLINE]):
        text = "".join(_screen(s) for s in table.sections(runs, labels[: len(runs)], 80))
        assert max(len(line) for line in text.splitlines()) <= 80
        whole = set(re.findall(r"\d+", text))
        for s in runs:  # every number of Table 5-1, whole, somewhere on the screen
            for load, e in s["loads"].items():
                for key in ("min_us", "max_us", "p99_99_us"):
                    assert str(e["merged"][key]) in whole, (load, key)
        # the labels wrap at 80 columns, but every character is there
        flat = re.sub(r"[\s│┃]", "", text)
        assert all(label.replace(" ", "") in flat or label[:20] in flat for label in labels[: len(runs)])


@pytest.mark.parametrize("width, tables", [(80, 2), (100, 1), (200, 1)])
@pytest.mark.parametrize("deadline", [None, 100])
def test_one_run_with_throughput_keeps_whole_columns_at_any_width(width, tables, deadline):
    # make run's table through a pipe (80 columns): with the Ops/s column there was no room for
    # "Max over time"; it was cropped to "Max o" and five blocks, the table's right edge lost.
    # Now the columns past Table 5-1's and the tail's go into a second table below
    from rtlab.report.formats import table

    ops = {load: {**e, "throughput": {"ops_per_s": 104620.0}, "timeline": {"merged": list(range(1, 40))}}
           for load, e in RT["loads"].items()}  # fmt: skip
    run = with_deadline({**RT, "loads": ops}, deadline) if deadline else {**RT, "loads": ops}
    name = "20261126-081633-vm-6.18.44-fc-v669"
    text = "".join(_screen(s, width) for s in table.sections([run], [name], width))
    lines = text.splitlines()
    rows = [line for line in lines if line[:1] in "┏┃┡│└"]
    assert all(len(line) <= width for line in lines)
    assert rows and all(line.rstrip()[-1] in "┓┃┩│┘" for line in rows), text  # every column whole
    heads = [line for line in rows if line.startswith("┃")]
    assert len(heads) == tables and sum(table.SPARK_HEADER in line for line in heads) == 1, text
    assert sum("Ops/s" in line for line in heads) == 1 and "104620" in text
    assert name in lines[0] and ("deadline 100 µs" in lines[0]) is bool(deadline)
    assert (sum("Deadline" in line for line in heads) == 1) is bool(deadline)
    assert "needs a wider terminal" not in text


def test_the_table_on_screen_and_in_a_file_say_the_same():
    from rtlab.report.formats import table

    text = table.render([RT, MAINLINE], ["rt", "mainline"])
    assert text == "".join(_screen(s, 200) for s in table.sections([RT, MAINLINE], ["rt", "mainline"]))


def test_one_run_through_a_pipe_is_named_in_the_title_and_has_one_header_row():
    """An 80-column pipe: a long run name over the first column alone folded into six
    header rows; one run is named in the title instead, every heading on one row."""
    import io

    from rich.console import Console

    from rtlab.report.formats import table

    name = "20261125-195512-board-6.12.0-rt5-amd64"
    buffer = io.StringIO()
    console = Console(file=buffer, width=80, color_system=None)
    for section in table.sections([with_deadline(RT, 100)], [name], 80):
        console.print(section)
    lines = buffer.getvalue().splitlines()
    assert name in lines[0] and "deadline 100 µs" in lines[0]
    heads = [line for line in lines if line.startswith("┃")]  # one heading row a table
    assert len(heads) == len([line for line in lines if line.startswith("┏")])
    assert all(word in heads[0] for word in ("Load", "Avg", "Max")) and any("Deadline" in h for h in heads)
    assert not any(name[:8] in line for line in lines[1:])


def test_osadl_plot_draws_each_cpu_in_1us_bins_and_marks_the_maximum():
    """OSADL's latency plot of a single run: per load a curve per CPU, 1 µs bins on a linear
    axis from 0, samples on a log axis, each CPU's max in its legend, the worst marked."""
    found = figures.osadl_figures([RT], ["rt"])
    assert [f.name for f in found] == ["osadl-idle", "osadl-cpu"]
    ax = found[1].figure.axes[0]
    assert ax.get_yscale() == "log" and ax.get_xscale() == "linear"
    curves = [line for line in ax.get_lines() if line.get_label().startswith("CPU")]
    assert [c.get_label() for c in curves] == ["CPU 0 (max 150 µs)", "CPU 1 (max 150 µs)"]
    x, y = curves[0].get_data()
    assert list(x) == list(range(151)) and y[9] == 80 and y[20] == 10 and y[150] == 1 and y[10] == 0
    (marked,) = [line for line in ax.get_lines() if line.get_label() == "maximum 150 µs"]
    assert list(marked.get_xdata()) == [150, 150]
    assert figures.osadl_figures([RT, MAINLINE], ["rt", "mainline"]) == []  # comparisons: no


def test_platform_facts_show_in_every_format_and_hostile_ones_are_cleaned():
    """rteval's report fields (DMI, clock source, load average, tuned, container) in the
    table, Markdown and HTML; a board's control characters and odd types never reach them."""
    from rtlab.analysis.summary import platform
    from rtlab.report.formats import markdown, table

    said = {"dmi": {"sys_vendor": "QEMU", "product_name": "Standard PC\x1b[31m", "bios_vendor": 7},
            "clocksource": "tsc", "load_average": "0.50 0.40 0.30 1/90 99", "tuned_profile": "realtime",
            "tuned_verifies": "yes", "container": "none", "extra": "ignored"}  # fmt: skip
    found = platform(said)
    assert found["dmi"]["product_name"] == "Standard PC?[31m" and found["dmi"]["bios_vendor"] is None
    assert found["tuned_verifies"] is None and "extra" not in found
    assert platform("not a dict") == {} and platform(None) == {}
    run = {**RT, "system": {**RT["system"], "platform": found}}
    text = table.render([run], ["rt"])
    line = "rt: machine (DMI) QEMU Standard PC?[31m; BIOS not given; clock source tsc; load average at start"
    assert line in " ".join(text.split("\n"))
    assert "0.50 0.40 0.30; tuned profile realtime; container none" in text.replace("\n", " ")
    assert "clock source tsc" in markdown.render([run], ["rt"])
    page = html.render([run], ["rt"])
    assert "clock source" in page and "container" in page and "Standard PC?[31m" in page
    row = next(csv.DictReader(io.StringIO(csv_format.render([run], ["rt"]))))
    assert row["platform"].startswith(
        "machine (DMI): QEMU Standard PC?[31m; BIOS: not given; clock source: tsc"
    )
    suite = ET.fromstring(junit.render([run], ["rt"])).find("testsuite")
    assert suite is not None
    assert suite.find("properties/property[@name='tuned profile']").get("value") == "realtime"


def test_csv_cells_a_spreadsheet_would_evaluate_are_quoted_and_numbers_kept():
    """A run id or a load's failure reason a board set to a formula is written as text (a
    single quote before it), in the report and in the time axis; numbers stay numbers."""
    from rtlab.report import renderer

    hostile = ['=HYPERLINK("http://x")', "+cmd", "-2+3", "@SUM(1)", "\t=1+1", "\r=1+1", " =1+1"]
    names = ("cpu", "os", "memory", "storage", "cpu60", "cpu100", "irq")
    loads = {
        name: {**entry({10: 5}, status="failed"), "reason": text}
        for name, text in zip(names, hostile, strict=True)
    }
    run = summary("@SUM(A1)", {**loads, "idle": {**entry({10: 5}), "resources": {"power_mw": -1.5}}})
    segment = {"n": 0, "start_s": -2.0, "blocks": 2, "gap_s": None}
    axis = {"block_s": 1.0, "start_s": -2.0, "segments": [segment], "cpus": {"0": [-3, 7]}, "merged": [-3, 7],
            "spikes": None, "check": "ok", "garbled_lines": 0}  # fmt: skip
    run["loads"]["idle"]["timeline"] = axis
    rows = list(csv.DictReader(io.StringIO(renderer("csv")([run], ["=label"]), newline="")))
    assert {r["run"] for r in rows} == {"'@SUM(A1)"} and {r["label"] for r in rows} == {"'=label"}
    reasons = {r["load"]: r["reason"] for r in rows if r["cpu"] == "all"}
    # as `report -f csv` writes them: made printable first (a CR becomes a ?)
    assert [reasons[name] for name in names] == [
        "'=HYPERLINK(\"http://x\")", "'+cmd", "'-2+3", "'@SUM(1)", "'\t=1+1", "?=1+1", "' =1+1",
    ]  # fmt: skip
    # the writer itself, on what reaches it unprinted (the time axis): the same cells
    raw = list(csv.DictReader(io.StringIO(csv_format.render([run], ["=label"]), newline="")))
    assert raw == rows
    idle = next(r for r in rows if r["load"] == "idle" and r["cpu"] == "all")
    assert idle["power_mw"] == "-1.5" and idle["reason"] == ""
    series = list(csv.DictReader(io.StringIO(csv_format.render_series([run], ["rt"]), newline="")))
    assert [(r["run"], r["t_s"], r["max_us"]) for r in series if r["cpu"] == "all"] == [
        ("'@SUM(A1)", "-2.000", "-3"), ("'@SUM(A1)", "-1.000", "7"),
    ]  # fmt: skip
