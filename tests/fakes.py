"""Misbehaving cyclictest and stress-ng for what the real ones cannot be made to do on cue:
crash in the middle of writing, hang ignoring SIGTERM, write damaged JSON, end early.

Each is a small sh script first in PATH. It misbehaves only while measuring the load named
in FAKE_LOAD (its working directory is that load's folder) and otherwise runs the real
tool, so preflight checks and the other loads are real measurements.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

CYCLICTEST_MODES = {
    # partial JSON, then a real SIGSEGV: what a crash in the middle of the write leaves
    "segv": 'printf \'{"file_version": 1, "thread": {"0": {"histogram": {"7": 3\' > "$json"; kill -SEGV $$',
    "truncated": 'printf \'{"file_version": 1, "thread": {"0": {"histo\' > "$json"; exit 0',
    "null": 'printf null > "$json"; exit 0',
    # what real cyclictest writes for a thread that measured 0 cycles
    "nan": 'printf \'{"file_version": 1, "num_threads": 1, "thread": {"0": {"histogram": {}, '
    '"cycles": 0, "min": 1000000, "max": 0, "avg": -nan, "cpu": 0, "node": 0}}}\' > "$json"; exit 0',
    "bad-key": 'printf \'{"thread": {"0": {"histogram": {"abc": 1}, "cycles": 1, "min": 5, "max": 5, '
    '"avg": 5.0, "cpu": 0}}}\' > "$json"; exit 0',
    "bad-cpu": 'printf \'{"thread": {"0": {"histogram": {"5": 1}, "cycles": 1, "min": 5, "max": 5, '
    '"avg": 5.0, "cpu": "zero"}}}\' > "$json"; exit 0',
    "thread-list": 'printf \'{"thread": {"0": [5, 5, 5]}}\' > "$json"; exit 0',
    # never ends, and SIGTERM does not change that
    "hang": "trap '' TERM; while :; do sleep 1; done",
}

STRESS_MODES = {
    "ignore-term": "trap '' TERM; while :; do sleep 1; done",
    "die-after-2s": "sleep 2; echo 'stress-ng: error: [1] matrix: worker died' >&2; exit 1",
}


def _script(real: str, mode: str, misbehave: str, json_from_args: bool) -> str:
    find_json = (
        'json=\nfor a in "$@"; do case $a in --json=*) json=${a#--json=} ;; esac; done\n'
        if json_from_args
        else ""
    )
    return f"""#!/bin/sh
# fake ({mode}) in front of {real}
{find_json}case $PWD in
*/loads/"$FAKE_LOAD") ;;
*) exec {real} "$@" ;;
esac
case " $* " in
*" --json="* | *" --timeout "*) ;;
*) exec {real} "$@" ;;
esac
{misbehave}
"""


def install(folder: Path, cyclictest: str | None = None, stress: str | None = None) -> dict[str, str]:
    """Writes the fakes into `folder`; returns the environment that puts them first in PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    for tool, mode, modes in (
        ("cyclictest", cyclictest, CYCLICTEST_MODES),
        ("stress-ng", stress, STRESS_MODES),
    ):
        if mode is None:
            continue
        real = shutil.which(tool)
        assert real, f"{tool} is installed by make setup"
        path = folder / tool
        path.write_text(_script(real, mode, modes[mode], json_from_args=tool == "cyclictest"))
        path.chmod(0o755)
    return {"PATH": f"{folder}:{os.environ['PATH']}"}
