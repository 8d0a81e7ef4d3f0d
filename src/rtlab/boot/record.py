"""A boot's record on the host, a folder as a run is one (written as the boot goes, each file
replaced whole, so a reader never sees half of one):

    BOOT/boot.json     schema, method, target, kernel (path, release, version), cmdline asked
                       and found, verdict and its evidence, the splats dmesg named, the files
                       added on the board, each state's start and seconds, the way back taken
    BOOT/console.log   what --console captured (absent without it)
    BOOT/dmesg.txt     the booted kernel's messages, as the board printed them (escaped)

Nothing the board said reaches these files unescaped (disk.write_note, untrusted)."""

from __future__ import annotations

import datetime as dt
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rtlab import __version__
from rtlab.boundary import untrusted
from rtlab.errors import UsageError
from rtlab.rundir.disk import write_json, write_note

SCHEMA = "rtlab.boot/1"
BOOT_JSON = "boot.json"
CONSOLE = "console.log"
DMESG = "dmesg.txt"


def default_folder(target: str, release: str, now: dt.datetime | None = None) -> Path:
    """boots/<UTC time>-<board>-<release>: one folder per boot, never one reused."""
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%d-%H%M%S")
    host = re.sub(r"[^A-Za-z0-9._-]+", "_", target.removeprefix("ssh://")).strip("_.") or "board"
    return Path("boots") / f"{stamp}-{host}-{re.sub(r'[^A-Za-z0-9._-]+', '_', release)}"


@dataclass
class Record:
    folder: Path
    data: dict[str, Any] = field(default_factory=dict)
    _started: dict[str, float] = field(default_factory=dict)

    @classmethod
    def create(cls, folder: Path, **fields: Any) -> Record:
        """A new record in FOLDER, which must not hold one already (a boot is never rewritten)."""
        if (folder / BOOT_JSON).exists():
            raise UsageError(f"{folder} already holds a boot's record: give another --out")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"cannot make {folder}: {e.strerror}") from None
        record = cls(folder)
        record.data = {
            "schema": SCHEMA,
            "rtlab": __version__,
            "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "verdict": "unfinished",
            "states": [],
            "files_added": [],
            **fields,
        }
        record.save()
        return record

    def save(self) -> None:
        write_json(self.folder / BOOT_JSON, self.data)

    def state(self, name: str) -> None:
        """NAME begins now; the one before it ends."""
        now = time.monotonic()
        self.close_state(now)
        self._started[name] = now
        self.data["states"].append(
            {"state": name, "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
        )
        self.save()

    def close_state(self, now: float | None = None) -> None:
        states = self.data["states"]
        if states and "seconds" not in states[-1]:
            began = self._started.get(states[-1]["state"])
            if began is not None:
                states[-1]["seconds"] = round((now or time.monotonic()) - began, 1)

    def added(self, path: str) -> None:
        if path not in self.data["files_added"]:
            self.data["files_added"].append(path)
            self.save()

    def set(self, **fields: Any) -> None:
        self.data.update(fields)
        self.save()

    def finish(self, verdict: str, lines: list[str]) -> None:
        self.close_state()
        self.data["verdict"] = verdict
        self.data["evidence"] = [untrusted.printable(line) for line in lines]
        self.data["ended"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        self.data["seconds"] = round(sum(s.get("seconds", 0.0) for s in self.data["states"]), 1)
        self.save()

    def note(self, name: str, text: str) -> None:
        """console.log or dmesg.txt: what the board or its console said, escaped line by line."""
        write_note(self.folder / name, text if text.endswith("\n") or not text else text + "\n")
