"""Names that become file and folder names (a study's cells, parallel runs' folders, figure
files): letters, digits and ._- kept, each run of anything else one underscore."""

from __future__ import annotations

import re

_OTHER = re.compile(r"[^\w.-]+")  # \w: letters (any script), digits and _


def slug(text: str) -> str:
    name = _OTHER.sub("_", text).strip("_")
    return "_" if name in ("", ".", "..") else name  # never this folder or the one above it
