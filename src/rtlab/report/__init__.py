"""Report formats: one module each, all reading the same summaries.

render(summaries, labels) -> str
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rtlab.errors import UsageError
from rtlab.report import csv_format, html, json_format, junit, markdown, table

Renderer = Callable[[Sequence[dict[str, Any]], Sequence[str]], str]

FORMATS: dict[str, Renderer] = {
    "table": table.render,
    "md": markdown.render,
    "csv": csv_format.render,
    "json": json_format.render,
    "html": html.render,
    "junit": junit.render,
}


def renderer(name: str) -> Renderer:
    try:
        return FORMATS[name]
    except KeyError:
        raise UsageError(f"unknown format {name!r}: choose from {', '.join(FORMATS)}") from None
