"""The two ways rtlab stops early, each with its exit code (see the CLI contract)."""


class UsageError(Exception):
    """Bad input or a missing dependency: one line that names the fix, exit code 2."""

    exit_code = 2


class RunFailed(Exception):
    """The measurement itself failed or was interrupted: exit code 3."""

    exit_code = 3


class Stopped(RunFailed):
    """A signal (Ctrl-C, SIGTERM, a closed terminal) ended it: what was measured is kept."""


class GateClosed(RunFailed):
    """A gate before measuring found the system unfit (rtlab run --hwlat-gate): exit code 1,
    as for a missed deadline; nothing was measured."""

    exit_code = 1
