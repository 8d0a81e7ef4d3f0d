"""The POSIX sh agent that runs on every target, shipped as one script: assembled from its
parts (parts/*.sh, in name order), with the constants it shares with the host (constants.py), its
`run` options (contract.py) and the run folder's names and event kinds (names.py) generated after
the first part."""

from __future__ import annotations

import hashlib
import os
import tempfile
from functools import cache
from importlib import resources
from pathlib import Path

from rtlab.agent import constants, contract, names


@cache
def script() -> bytes:
    """The whole agent, as every target receives it."""
    parts = sorted(
        (p for p in resources.files(__name__).joinpath("parts").iterdir() if p.name.endswith(".sh")),
        key=lambda p: p.name,
    )
    texts = [p.read_text(encoding="utf-8") for p in parts]
    return "".join([texts[0], constants.part(), contract.part(), names.part(), *texts[1:]]).encode()


def script_path() -> Path:
    """The agent as a file, for a shell on this machine to run: in rtlab's cache, named by its
    content, written once (atomically: two rtlab at once write the same bytes)."""
    path = _written()
    if not path.is_file():  # the cache was cleaned while rtlab ran
        _written.cache_clear()
        path = _written()
    return path


@cache
def _written() -> Path:
    body = script()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rtlab" / "agent"
    name = f"agent-{hashlib.sha256(body).hexdigest()[:16]}.sh"
    try:
        return _write(base, name, body)
    except OSError:  # a read-only or full home: a folder of this process's own
        return _write(Path(tempfile.mkdtemp(prefix="rtlab-agent-")), name, body)


def _write(base: Path, name: str, body: bytes) -> Path:
    base.mkdir(parents=True, exist_ok=True)
    path = base / name
    if not path.is_file() or path.read_bytes() != body:
        fd, part = tempfile.mkstemp(dir=base, prefix=".agent-")
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        os.chmod(part, 0o755)
        os.replace(part, path)
    return path
