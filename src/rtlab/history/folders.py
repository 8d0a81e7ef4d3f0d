"""The run folders the history store reads under a path: a study's runs, a campaign's
repeats, or the run itself, each with where it sits (history/index.py: Context).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from rtlab.campaigns import study
from rtlab.errors import UsageError
from rtlab.history.index import Context
from rtlab.rundir import readback
from rtlab.rundir.disk import UnreadableFile, read_json


def runs_in(path: Path) -> Iterator[tuple[Path, Context, str]]:
    """The run folders under PATH with where they sit: a study's runs (each maybe repeated),
    a campaign's repeats (as `report` reads them: readback.repeat_folders), or the run itself;
    each with why it is skipped ("" when it is read): a folder that is a link, a damaged
    repeats.json."""
    if (path / study.FILE).is_file():
        try:
            doc = read_json(path / study.FILE)
            cells = doc["runs"]
            name = str(doc.get("study") or path.name)
        except (UnreadableFile, ValueError, KeyError, TypeError):
            yield path, Context(), ""  # reported as damaged: no run.json
            return
        for folder, cell in cells.items() if isinstance(cells, dict) else []:
            where = path / str(folder)
            parts = Path(str(folder)).parts
            if Path(str(folder)).is_absolute() or ".." in parts:
                continue
            if where.is_symlink():
                yield where, Context(), f"{where} is a link: rtlab reads no links in a run"
                continue
            if not where.is_dir():
                continue
            stage = str(cell.get("stage")) if isinstance(cell, dict) else None
            for run, context, why in runs_in(where):
                yield run, Context(name, stage, context.repeat), why
        return
    try:
        found = readback.repeat_folders(path)
    except UsageError as e:
        yield path, Context(), str(e)
        return
    if found is None:
        yield path, Context(), ""
        return
    for k, (folder, why) in enumerate(found, start=1):
        if why or folder.is_dir():  # a repeat not begun yet (an interrupted campaign) is not there
            yield folder, Context(repeat=k), why
