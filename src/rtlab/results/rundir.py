"""The run directory: raw results, written atomically, never edited by analysis.

    RUN/run.json                      manifest (plan, target, times, status per load)
    RUN/sysinfo.json                  what the agent found on the target
    RUN/events                        the agent's progress lines
    RUN/loads/<load>/cyclictest.json  exactly as cyclictest wrote it
    RUN/loads/<load>/stress.log       stress-ng's output and exit status
    RUN/summary.json                  the statistics, derived from the above

run.json is rewritten (atomically) as the run goes, so a run whose host died
still says how far it got: status `running` then means it never finished.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from rtlab.errors import UsageError
from rtlab.results import events

SCHEMA = "rtlab.run/1"
MANIFEST = "run.json"
# What the agent reads from a run folder (the plan); everything else in it the agent writes.
PLAN_FILES = ("plan.loads", "cyclictest.argv", "stress.argv")


def write_atomic(path: Path, text: str) -> None:
    """Readers see the old file or the new one, never half of either."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def read_json(path: Path) -> Any:
    with path.open(encoding="utf-8", errors="replace") as f:
        return json.load(f)


class RunDir:
    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def create(cls, path: Path) -> RunDir:
        """A new run directory; refuses one that holds anything, so nothing is overwritten."""
        if path.exists():
            if not path.is_dir():
                raise UsageError(f"{path} exists and is not a directory: choose another --out")
            if (path / MANIFEST).exists():
                raise UsageError(f"{path} already holds a run: choose another --out")
            if any(path.iterdir()):
                raise UsageError(f"{path} exists and is not an empty run directory: choose another --out")
        path.mkdir(parents=True, exist_ok=True)
        (path / "loads").mkdir(exist_ok=True)
        return cls(path)

    @classmethod
    def open(cls, path: Path) -> RunDir:
        if not (path / MANIFEST).is_file():
            raise UsageError(
                f"{path} is not an rtlab run (no {MANIFEST}): give a directory made by `rtlab run`"
            )
        return cls(path)

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    def manifest(self) -> dict[str, Any]:
        data: dict[str, Any] = read_json(self.manifest_path)
        return data

    def write_manifest(self, data: dict[str, Any]) -> None:
        write_json(self.manifest_path, data)

    def load_dir(self, load: str) -> Path:
        return self.path / "loads" / load

    def planned_loads(self) -> list[str]:
        path = self.path / "plan.loads"
        return [line for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []

    def sysinfo(self) -> dict[str, Any] | None:
        path = self.path / "sysinfo.json"
        return read_json(path) if path.is_file() else None

    def cyclictest(self, load: str) -> dict[str, Any] | None:
        """cyclictest's JSON for `load`, or None when it never finished writing it."""
        path = self.load_dir(load) / "cyclictest.json"
        if not path.is_file():
            return None
        try:
            data: dict[str, Any] = read_json(path)
        except json.JSONDecodeError:
            return None
        return data

    def events(self) -> list[events.Event]:
        path = self.path / "events"
        if not path.is_file():
            return []
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        return [e for e in map(events.parse, lines) if e is not None]
