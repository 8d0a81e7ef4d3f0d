"""With --tune: the target tuned for the measurement and put back afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rtlab.plan import Plan
from rtlab.rundir import disk
from rtlab.rundir.disk import RunDir, write_json
from rtlab.system import tune
from rtlab.system.knobs import CpusetPartition
from rtlab.targets.base import Target


@contextmanager
def tuned(target: Target, plan: Plan, run: RunDir) -> Iterator[list[str]]:
    """With --tune: the target tuned for the measurement and put back afterwards, both recorded
    in RUN/tuning.json with what each file read after the change. Yields more agent options."""
    if not plan.tune:
        yield []
        return
    files = target.files()
    cpus = tune.cpu_plan(files, plan.rt_cpus, plan.housekeeping_cpus)
    changes, unavailable = tune.plan(files, cpus)
    record: dict[str, Any] = {
        "schema": "rtlab.tuning/1",
        "unavailable": unavailable,
        "applied": tune.readback(files, tune.apply(files, cpus, changes)),
    }
    write_json(run.path / disk.TUNING, record)
    partition = CpusetPartition.group
    try:
        yield ["--cgroup", partition] if files.exists(f"{partition}/cgroup.procs") else []
    finally:
        record["reverted"] = tune.readback(files, tune.revert(files)) if changes else []
        write_json(run.path / disk.TUNING, record)
