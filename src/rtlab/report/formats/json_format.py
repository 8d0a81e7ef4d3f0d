"""JSON: the summary itself (one run), or every summary with its label (a comparison)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rtlab.boundary.summary_shapes import Summary
from rtlab.report import escape


def render(summaries: Sequence[Summary], labels: Sequence[str]) -> str:
    if len(summaries) == 1:
        document: Any = summaries[0]
    else:
        document = {
            "schema": "rtlab.compare/1",
            "runs": [{**s, "label": label} for s, label in zip(summaries, labels, strict=True)],
        }
    return escape.json(document)
