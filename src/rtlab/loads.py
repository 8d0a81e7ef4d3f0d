"""The load catalogue of the StarFive study: each load is one stress-ng stressor.

`idle` runs no stress-ng at all. N (workers) is the target's online CPU count unless
the plan says otherwise.
"""

from rtlab.errors import UsageError

# name -> stress-ng stressor option (None: no load)
LOADS: dict[str, str | None] = {
    "idle": None,
    "cpu": "--matrix",
    "os": "--set",
    "memory": "--vm",
    "storage": "--dir",
}

# stress-ng is told to stop by itself this long after the measurement should have
# ended, so that even an agent killed with SIGKILL leaves nothing running.
STRESS_TIMEOUT_MARGIN_S = 30


def parse_loads(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in LOADS]
    if unknown or not names:
        raise UsageError(
            f"unknown load {', '.join(unknown) or '(none given)'}: choose from {','.join(LOADS)}"
        )
    if len(set(names)) != len(names):
        raise UsageError(f"load listed twice in {text!r}: name each load once")
    return names


def stress_argv(load: str, workers: int, timeout_s: int, temp_path: str | None = None) -> list[str] | None:
    """stress-ng's arguments for `load`, or None for a load that runs no stress-ng."""
    option = LOADS[load]
    if option is None:
        return None
    argv = [option, str(workers), "--timeout", f"{timeout_s}s"]
    if temp_path is not None:
        argv += ["--temp-path", temp_path]
    return argv
