"""The agent's constants part, generated from the Python that owns each fact, so that the
agent and the host cannot disagree on them: its time limits and target folder, the runtime
files and kernel options it records, cyclictest's flags it adds to an argv or reads back."""

from __future__ import annotations

from rtlab.agent.shell import quote


def part() -> str:
    from rtlab.plan import CYCLICTEST_FLAGS, DEFAULT_TARGET_DIR, STOP_GRACE_S
    from rtlab.plan.loads import PREPARE_LIMIT_S
    from rtlab.plan.probes import RTLA_START_S
    from rtlab.system.kernel import RECORDED_CONFIG_RE
    from rtlab.system.knobs import RUNTIME_FILES

    values = {
        "STOP_GRACE": (str(STOP_GRACE_S), "rtlab.plan.STOP_GRACE_S"),
        "PREPARE_LIMIT": (str(PREPARE_LIMIT_S), "rtlab.plan.loads.PREPARE_LIMIT_S"),
        "RTLA_START": (str(RTLA_START_S), "rtlab.plan.probes.RTLA_START_S"),
        "CONFIG_RE": (quote(RECORDED_CONFIG_RE), "rtlab.system.kernel.RECORDED_CONFIG"),
        "RUNTIME_FILES": (quote(" ".join(RUNTIME_FILES)), "rtlab.system.knobs.RUNTIME_FILES"),
        "CT_HISTOGRAM_FLAG": (quote(CYCLICTEST_FLAGS["histogram_us"]), "rtlab.plan.CYCLICTEST_FLAGS"),
    }
    lines = ["# --- constants, generated from rtlab's Python (rtlab.agent.constants) -----------", ""]
    for name, (value, owner) in values.items():
        lines += [f"# {owner}", f"{name}={value}"]
    lines += ["# rtlab.plan.DEFAULT_TARGET_DIR, unless $RTLAB_TARGET_DIR says otherwise",
              f"BASE_DIR=${{RTLAB_TARGET_DIR:-{DEFAULT_TARGET_DIR}}}", "",
              "# ct_duration SECONDS: cyclictest's duration option, one argument a line (an argv file's);",
              "# cyclictest takes the last one given (rtlab.plan.CYCLICTEST_FLAGS)",
              f"ct_duration() {{ printf '%s\\n%s\\n' {quote(CYCLICTEST_FLAGS['duration_s'])} \"$1\"; }}",
              ""]  # fmt: skip
    return "\n".join(lines) + "\n"
