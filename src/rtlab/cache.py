"""rtlab's download and build cache: $RTLAB_CACHE, else $XDG_CACHE_HOME/rtlab, else ~/.cache/rtlab."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    explicit = os.environ.get("RTLAB_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rtlab"
