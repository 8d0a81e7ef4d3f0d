"""One hostile run through every output format: what a board or a copied folder wrote into
a run (its id, its target's names, a load's failure reason, the kernel's and the machine's
strings) stays data in each of them. A spreadsheet evaluates no formula from the CSV, a
browser runs no script from the HTML, a Markdown table keeps its columns, a CI server parses
the JUnit XML, the JSON reads back as written, and the terminal obeys no escape sequence and
reads no console markup. The run is a synthetic one (evt_data.write_run): nothing measures.
"""

from __future__ import annotations

import csv
import io
import json
import re
import unicodedata
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import rtlab
from evt_data import write_run
from rtlab.boundary.untrusted import printable

# Each would start a formula in a spreadsheet, end a Markdown cell or row, run in a browser,
# colour or link a terminal, break XML 1.0, or reorder what a reader sees.
FORMULAS = ("=cmd|' /C calc'!A0", "+1", "-2+3", "@SUM(A1)")
HOSTILE = (
    " <script>alert(1)</script> | pipe | [red]markup[/red] [link=https://evil.example]x[/link]"
    " \x1b[31mansi \x00\x07\x0b\x0c \u2028 \u202e `tick` [a](javascript:alert(1)) https://evil.example"
    " \ud800\nsecond line hid\u200bden\u00ad \U000e0041\U000e0042 \ufeff"
)
RUN_ID = FORMULAS[0] + HOSTILE
FAILED = "x-2+3"  # a load's name is a folder's: only letters, digits and ._+- (still a formula's)
PROBE = "pi_stress"
FORMATS = ("table", "md", "csv", "json", "html", "junit")
# What no format but JSON (which escapes them) may print as it is.
# Asked of unicodedata, not copied from rtlab: every format character (zero-width ones, the
# soft hyphen, tag characters, the bidirectional marks) and line separator.
INVISIBLE = "".join(c for c in map(chr, range(0x110000)) if unicodedata.category(c) in ("Cf", "Zl", "Zp"))
CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff{re.escape(INVISIBLE)}]")
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def hostile_run(base: Path, seed: int) -> Path:
    """A run folder as rtlab writes it whose every string a report shows is hostile: one load
    measured, one failed with a hostile reason."""
    run = write_run(base, seed, 0.1, seconds=60)
    (run / "loads" / FAILED).mkdir()
    manifest = json.loads((run / "run.json").read_text())
    manifest.update(
        id=RUN_ID,
        reason=FORMULAS[3] + HOSTILE,
        target={"kind": "ssh", "name": FORMULAS[1] + HOSTILE, "host": FORMULAS[3] + HOSTILE},
        loads={"idle": {"status": "complete"}, FAILED: {"status": "failed", "reason": FORMULAS[2] + HOSTILE}},
    )
    manifest["plan"]["loads"] = ["idle", FAILED]
    (run / "run.json").write_text(json.dumps(manifest))
    info = {
        "hostname": FORMULAS[3] + HOSTILE,
        "kernel": {"release": FORMULAS[1] + HOSTILE, "machine": "x86_64", "version": FORMULAS[2] + HOSTILE,
                   "cmdline": FORMULAS[0] + HOSTILE},
        "cpus": {"count": 2, "model": FORMULAS[0] + HOSTILE, "governors": {"0": "[red]" + HOSTILE}},
        "platform": {"clocksource": FORMULAS[3] + HOSTILE, "load_average": HOSTILE,
                     "dmi": {"sys_vendor": FORMULAS[0] + HOSTILE, "product_name": HOSTILE}},
    }  # fmt: skip
    (run / "sysinfo.json").write_text(json.dumps(info))  # a lone surrogate as JSON's \ud800
    # the agent's own line of the failure, as a board can send it: one line, bytes (no surrogate)
    line = f"{FORMULAS[2]}{HOSTILE}".replace("\n", " ").replace("\ud800", "")
    with (run / "events").open("a") as f:
        f.write(f"@rtlab load-end t=70.00 load={FAILED} status=failed reason={line}\n")
    # a probe of the measured load that failed in the same words: a warning in every format, a
    # test case of its own in JUnit
    (run / "plan.probes").write_text(f"{PROBE}\n")
    (run / "loads" / "idle" / PROBE).mkdir()
    (run / "loads" / "idle" / PROBE / "probe.argv").write_text(f"{PROBE}\n--duration=60\n")
    with (run / "events").open("a") as f:
        f.write(f"@rtlab probe-start t=70.10 load=idle probe={PROBE} seconds=60\n")
        f.write(f"@rtlab probe-end t=70.20 load=idle probe={PROBE} status=failed reason={line}\n")
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("hostile-formats")
    return hostile_run(base, 1), hostile_run(base, 2)


def said(*args: str) -> tuple[str, str]:
    """What rtlab printed (stdout, stderr); AssertionError unless it ended well."""
    done = rtlab(*args)
    assert done.returncode == 0 and "Traceback" not in done.stderr, (
        f"rtlab {args[0]} {args[-1]}: {done.stderr[-800:]}"
    )
    return done.stdout, done.stderr


@pytest.fixture(scope="module")
def outputs(runs, tmp_path_factory) -> dict[tuple[str, str], str | AssertionError]:
    """Each command's output in each format, (command, what) -> its text; or why the command
    failed, for that format's test alone to report (out())."""
    a, b = runs
    found: dict[tuple[str, str], str | AssertionError] = {}
    folder = tmp_path_factory.mktemp("outputs")
    for command, paths in (("report", [a]), ("compare", [a, b])):
        for fmt in (*FORMATS, "table file"):
            junit = folder / f"verdicts-{fmt}.xml"
            table = folder / f"{command}.txt"
            more = ["--junit", str(junit)] if command == "compare" else []
            more += ["--output", str(table)] if fmt == "table file" else []
            try:
                text, errors = said(command, *map(str, paths), *more, "--format", fmt.split()[0])
            except AssertionError as e:
                found[command, fmt] = found[command, f"{fmt} stderr"] = e
                found[command, f"verdicts {fmt}"] = e
                continue
            found[command, fmt] = table.read_text(encoding="utf-8") if fmt == "table file" else text
            found[command, f"{fmt} stderr"] = errors
            if command == "compare":
                found[command, f"verdicts {fmt}"] = junit.read_text(encoding="utf-8")
    return found


def out(outputs: dict[tuple[str, str], str | AssertionError], command: str, what: str) -> str:
    found = outputs[command, what]
    if isinstance(found, AssertionError):
        pytest.fail(str(found))
    return found


COMMANDS = ("report", "compare")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


@pytest.mark.hostile
@pytest.mark.parametrize("command", COMMANDS)
def test_csv_cells_a_spreadsheet_would_evaluate_start_with_a_quote(outputs, command):
    text = out(outputs, command, "csv")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    evaluated = [
        cell
        for row in rows
        for cell in row
        if cell.lstrip(" ").startswith(FORMULA_START) and not re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", cell)
    ]
    assert evaluated == []
    assert {row[0] for row in rows[1:]} == {"'" + CONTROL.sub("?", RUN_ID)}
    reasons = [r["reason"] for r in csv.DictReader(io.StringIO(text, newline="")) if r["load"] == FAILED]
    assert reasons and all(r.startswith("'-2+3 ") for r in reasons)
    assert len({len(row) for row in rows}) == 1  # no row split by a newline or a CR
    assert not CONTROL.search(text.replace("\n", ""))


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.scripts = 0
        self.data: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.scripts += tag == "script"

    def handle_data(self, data: str) -> None:
        self.data.append(data)


@pytest.mark.hostile
@pytest.mark.parametrize("command", COMMANDS)
def test_html_runs_nothing_from_the_run_and_shows_its_text_escaped(outputs, command):
    page = out(outputs, command, "html")
    parsed = _Elements()
    parsed.feed(page)
    parsed.close()
    assert parsed.scripts == 0
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert(1)</script>" in "".join(parsed.data)  # shown as text
    assert "[red]markup[/red]" in page and "javascript:alert(1)" not in re.findall(r'href="([^"]*)"', page)
    assert not CONTROL.search(page.replace("\n", "").replace("\t", ""))


def _tables(text: str) -> list[list[str]]:
    blocks: list[list[str]] = [[]]
    for line in text.split("\n"):
        if line.startswith("|"):
            blocks[-1].append(line)
        elif blocks[-1]:
            blocks.append([])
    return [b for b in blocks if b]


@pytest.mark.hostile
@pytest.mark.parametrize("command", COMMANDS)
def test_markdown_tables_keep_their_columns_and_nothing_in_them_is_live(outputs, command):
    text = out(outputs, command, "md")
    tables = _tables(text)
    assert len(tables) >= (2 if command == "compare" else 1)
    for rows in tables:
        columns = {len(re.findall(r"(?<!\\)\|", row)) for row in rows}
        assert len(columns) == 1, rows
    assert "<script" not in text and "&lt;script&gt;" in text
    assert "\\`tick\\`" in text and "\\[a\\](javascript" in text and "\\[red\\]markup" in text
    assert "https://" not in text  # no bare address for a renderer to make a link
    assert not CONTROL.search(text.replace("\n", ""))
    notes = [line for line in text.split("\n") if line.startswith("- ") and FAILED in line]
    assert notes and all("second line" in line for line in notes)  # the newline kept it one line


@pytest.mark.hostile
@pytest.mark.parametrize("which", ["report junit", "compare junit", "compare verdicts junit"])
def test_junit_is_xml_10_a_ci_server_parses(outputs, which):
    command, _, fmt = which.partition(" ")
    text = out(outputs, command, fmt if fmt == "junit" else "verdicts junit")
    root = ET.fromstring(text.encode("utf-8"))
    assert not NOT_XML.search(text)
    assert "\\x1b[31mansi" in text or "?[31mansi" in text  # what was there, still visible
    if which == "report junit":
        error = next(c for c in root.iter("testcase") if c.get("name") == f"idle {PROBE}").find("error")
        said = error.get("message", "") if error is not None else ""
        assert said.startswith(f"idle {PROBE}: failed: -2+3 <script>"), said


@pytest.mark.hostile
@pytest.mark.parametrize("command", COMMANDS)
def test_json_reads_back_as_the_run_wrote_it(outputs, command):
    text = out(outputs, command, "json")
    document = json.loads(text)
    summaries = [document] if command == "report" else document["runs"]
    for summary in summaries:
        assert summary["run"] == RUN_ID
        assert summary["system"]["hostname"] == FORMULAS[3] + HOSTILE
        assert summary["loads"][FAILED]["reason"].startswith(
            FORMULAS[2] + " <script>alert(1)</script> | pipe"
        )
        probe = summary["loads"]["idle"]["probes"][PROBE]
        assert probe["status"] == "failed" and probe["reason"].startswith(FORMULAS[2] + " <script>")
        assert [w["code"] for w in summary["warnings"] if w["load"] == "idle"] == ["probe-failed"]
    if command == "compare":
        # a label is a column's heading in every format, so compare makes it printable first
        assert [s["label"] for s in summaries] == [printable(RUN_ID)] * 2
    assert not CONTROL.search(text.replace("\n", ""))  # all escaped: a terminal may show it


@pytest.mark.hostile
@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("where", ["table", "table file"])
def test_the_terminal_obeys_no_escape_and_reads_no_markup(outputs, command, where):
    text = out(outputs, command, where)
    shown = text + out(outputs, command, "table stderr")
    assert not CONTROL.search(shown.replace("\n", ""))
    assert "[red]markup[/red]" in shown.replace("\n", "")
    assert "[link=https://evil.example]x[/link]" in shown


@pytest.mark.unit
@pytest.mark.parametrize(
    "figure",
    [
        '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>',
        '<svg xmlns="http://www.w3.org/2000/svg"><foreignObject><p>x</p></foreignObject></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">'
        '<use xlink:href="https://evil.example/x.svg#a"/></svg>',
        "<svg><g>cut short",
    ],
)
def test_a_figure_that_could_run_or_lead_out_is_never_put_in_a_page(figure):
    from rtlab.report import escape

    with pytest.raises(ValueError, match="a figure's SVG"):
        escape.svg(figure)


@pytest.mark.unit
def test_each_formats_escape_on_its_own():
    from rtlab.report import escape

    inside = '<svg xmlns="http://www.w3.org/2000/svg"><defs><path id="a"/></defs><use href="#a"/></svg>'
    assert str(escape.svg(inside)) == inside  # matplotlib's own links, inside the figure
    assert json.loads(escape.json({"k": HOSTILE}))["k"] == HOSTILE
    assert not CONTROL.search(escape.json({"k": HOSTILE}))
    # beyond the first plane an escape is one character, never four digits and a letter
    tag = "a\U000e0041b\u200b"
    assert json.loads(escape.json([tag])) == [tag] and "\\udb40\\udc41" in escape.json([tag])
    assert escape.xml(tag) == "a\\U000e0041b\\u200b"
    assert escape.markdown("www.evil.example a|b") == "www\\.evil.example a\\|b"
    assert escape.csv("-2+3") == "'-2+3" and escape.csv("-1.500") == "-1.500" and escape.csv(7) == 7
    assert escape.xml_attr('"\x00"') == "'\"\\x00\"'"
    assert escape.terminal("[red]x[/red]\x1b[2J").plain == "[red]x[/red]?[2J"


@pytest.mark.hostile
def test_figures_of_a_hostile_run_are_drawn(runs, tmp_path):
    """--figures draws the runs as read (PNG): their names are plain text there too."""
    said("compare", *map(str, runs), "--figures", str(tmp_path), "--format", "csv")
    assert (tmp_path / "max-latency.png").stat().st_size > 0
