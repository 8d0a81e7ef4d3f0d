"""Reports, all reading the same summaries: the formats (formats/, one module each, picked by
renderer()) and what single commands show (views/: compare's verdicts, worst, causes, check,
scan, bisect, sweep, history). escape.py, cells.py and figures.py serve both; a format may use
a view (the HTML report holds compare's verdicts), a view never a format.

render(summaries, labels) -> str

A format's module (html brings matplotlib) is imported only when that format is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

from rtlab.boundary.summary_shapes import Summary
from rtlab.errors import UsageError

Renderer = Callable[[Sequence[Summary], Sequence[str]], str]

# format name -> the module under rtlab.report.formats whose render() writes it
FORMATS: dict[str, str] = {
    "table": "table",
    "md": "markdown",
    "csv": "csv_format",
    "json": "json_format",
    "html": "html",
    "junit": "junit",
}


def renderer(name: str) -> Renderer:
    """The format's render(); but for JSON (which escapes them), the summaries' strings and the
    labels reach it plain (escape.plain: no control character, no lone surrogate): a target's
    strings are data, never terminal escapes. Each format escapes them further (escape.py)."""
    if name not in FORMATS:
        raise UsageError(f"unknown format {name!r}: choose from {', '.join(FORMATS)}")
    render: Renderer = importlib.import_module(f"{__name__}.formats.{FORMATS[name]}").render
    if name == "json":
        return render
    from rtlab.report import escape  # brings jinja2 and rich: only once a format is asked for

    return lambda summaries, labels: render(
        [escape.plain_tree(s) for s in summaries], [escape.plain(label) for label in labels]
    )
