"""The contract between the host and the agent for `agent.sh run DIR [options]`, written once:
each option is named after the Plan's field it carries (duration_s: the agent's --duration
and $DURATION_S), with the agent's default. The host builds the command line from this
table (`argv`), and the agent's option parsing and defaults are generated from it (`part`),
so that neither side can spell an option the other does not know. The run folder's file
names (rundir/layout.py) and the event kinds (rundir/events.py's Kind) reach the agent the
same way (agent/names.py).

Adding a run option: a row here (the Plan's field, the agent's default, the plan's value, or
None when the plan leaves it out), then its use in the agent's parts as $FIELD.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from rtlab.agent.shell import quote

if TYPE_CHECKING:
    from rtlab.plan import Plan


@dataclass(frozen=True)
class Option:
    name: str  # the Plan's field it carries (or the agent's own setting): one name all the way
    default: str  # the agent's value when the option is not given
    value: Callable[[Plan], str | None] | None  # from the plan; None (or a None value): not given
    about: str
    switch: bool = False  # an option without a value: given, its variable is 1

    @property
    def flag(self) -> str:
        """agent.sh run's option: the name, its unit suffix left out (duration_s: --duration)."""
        return "--" + self.name.removesuffix("_s").replace("_", "-")

    @property
    def variable(self) -> str:
        """The agent's shell variable that holds it: the name (duration_s: DURATION_S)."""
        return self.name.upper()


def _if(given: object, value: str) -> str | None:
    return value if given else None


def _options() -> tuple[Option, ...]:
    from rtlab.bounds import DEFAULT_TRACE_SPIKES
    from rtlab.plan import GRACE_S

    return (
        Option("duration_s", "0", lambda p: str(p.duration_s), "how long each load is measured"),
        Option("settle_s", "0", lambda p: str(p.settle_s), "how long a load runs before measuring"),
        Option("governor", "performance", lambda p: p.governor, "cpufreq's governor, or keep"),
        Option("grace_s", str(GRACE_S), lambda p: str(GRACE_S),
               "seconds past its planned end before a tool is killed"),
        Option("segment_s", "0", lambda p: _if(p.segment_s, str(p.segment_s)),
               "a new cyclictest every this many seconds (0: one)"),
        Option("idle_after_boot_s", "0", lambda p: _if(p.idle_after_boot_s, str(p.idle_after_boot_s)),
               "wait until the system has been up this long"),
        Option("trace_s", "0", lambda p: _if(p.trace_us, str(p.trace_s)),
               "the trace pass's length per load (0: none)"),
        Option("trace_us", "0", lambda p: _if(p.trace_us, str(p.trace_us)), "a wake-up this late is traced"),
        Option("trace_spikes", str(DEFAULT_TRACE_SPIKES), lambda p: _if(p.trace_us, str(p.trace_spikes)),
               "at most this many traced spikes per load"),
        Option("trace_level", "auto", lambda p: _if(p.trace_us, p.trace_level),
               "rtla, tracefs or neither (a, b, c), or the best the target has"),
        Option("cgroup", "", None, "the cpuset partition cyclictest joins (given by tuning)"),
        Option("stream_results", "0", None,
               "each finished load's files on stdout (a target that cannot copy them back)", switch=True),
    )  # fmt: skip


@cache
def options() -> tuple[Option, ...]:
    return _options()


def argv(plan: Plan) -> list[str]:
    """`agent.sh run DIR`'s options for the plan, wherever the agent is started from."""
    found: list[str] = []
    for option in options():
        value = option.value(plan) if option.value else None
        if value is not None:
            found += [option.flag, value]
    return found


def part() -> str:
    """The agent's part that parses `run`'s options, with their defaults, as shell."""
    rows = options()
    lines = ["# --- agent.sh run's options, generated from rtlab.agent.contract ---------------", ""]
    lines += [f"{o.variable}={quote(o.default)} # {o.flag}: {o.about}" for o in rows]
    lines += ["", "run_options() {", "\twhile [ $# -gt 0 ]; do", "\t\tcase $1 in"]
    for o in rows:
        if o.switch:
            lines += [f"\t\t{o.flag})", f"\t\t\t{o.variable}=1", "\t\t\tshift", "\t\t\tcontinue", "\t\t\t;;"]
        else:
            lines += [f"\t\t{o.flag}) {o.variable}=$2 ;;"]
    lines += ['\t\t*) die "unknown option $1" ;;', "\t\tesac", "\t\tshift 2", "\tdone", "}", ""]
    return "\n".join(lines) + "\n"


def usage() -> str:
    """The options as the agent's usage line shows them."""
    return " ".join(f"[{o.flag}]" if o.switch else f"[{o.flag} {o.variable}]" for o in options())
