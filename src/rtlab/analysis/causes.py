"""Why spikes happened: each traced spike broken into what held its CPU. Pure: parsed traces
and counters in, the summary's `causes` out.

Level b (tracefs, driven by the agent): cyclictest -b broke at a sample of L µs and marked
the trace; its wake-up was due at most L µs before the mark. The window runs from then to
the moment the measured thread got its CPU back, and every traced source inside it on that
CPU is a cause: other threads (the one running when the measured thread woke is *blocking*
it; others interfere), hard interrupt handlers, the local timer, softirqs, NMIs, and idle (the
timer's interrupt came late while the CPU slept: idle-state exit or, in a VM, the host). What
no event covers is reported as unattributed, never guessed.

Level c (no tracefs): spikes' times from cyclictest --spike and the interrupt counters read
once a second; a source far busier than usual in a spike's second is a suspect, not a cause.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence

from rtlab.analysis.timeline import event_time
from rtlab.boundary.summary_shapes import CauseJSON, CausesJSON, SuspectJSON, TopCauseJSON, TracedSpikeJSON
from rtlab.rundir.disk import TraceCapture
from rtlab.rundir.events import Event, Kind
from rtlab.rundir.ftrace import (
    AutoAnalysis,
    CounterSample,
    Record,
    Trace,
    parse,
    parse_auto_analysis,
    parse_counters,
)

NOTE_A = (
    "level a: rtla timerlat's auto-analysis of each spike (rtla's own threads at the measurement's "
    "priority and period), in a pass after the measurement; rtla prints no time, so a spike's time "
    "is when rtla said it hit, less half of its one-second check: within about a second on an "
    "idle target, up to two on a busy or emulated one"
)
NOTE_B = (
    "level b: the kernel's scheduler, interrupt and softirq events on the spiking CPU, traced in "
    "a pass after the measurement (tracing adds latency of its own: the pass explains, it does "
    "not measure)"
)
NOTE_C = (
    "level c: no tracefs on the target, so no causes: spike times with the interrupt sources far "
    "busier than usual in their second (suspects). The kernel options that give causes: "
    "CONFIG_FTRACE=y with tracefs mounted (level b); CONFIG_TIMERLAT_TRACER=y and "
    "CONFIG_OSNOISE_TRACER=y with rtla 6.3 or later (level a)"
)
TOP_CAUSES = 5


def _spike(**given: object) -> TracedSpikeJSON:
    """A traced spike with nothing known yet but what is `given`."""
    out: TracedSpikeJSON = {
        "n": 0, "t_s": None, "phase": "trace", "cpu": None, "latency_us": None, "window_us": None,
        "top": None, "causes": [], "unattributed_us": None, "suspects": [], "trace": None, "problem": None,
        "refused": [],
    }  # fmt: skip
    out.update(given)  # type: ignore[typeddict-item]
    return out


def _interval_union(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def explain(trace: Trace) -> TracedSpikeJSON:
    """One capture of level b: the spike cyclictest marked, and what filled its window.
    Times in the result are the trace clock's; the caller places them on the campaign's."""
    out = _spike()
    marks = [r for r in trace.records if r.event == "tracing_mark_write" and "latency" in r.fields]
    if not marks:
        out["problem"] = "the trace holds no cyclictest mark (the buffer was overwritten, or tracing failed)"
        return out
    mark = marks[-1]
    latency = int(mark.fields["latency"])
    out.update({"cpu": mark.cpu, "latency_us": latency, "t_s": mark.ts})
    mine = [r for r in trace.records if r.cpu == mark.cpu and r.ts <= mark.ts]
    marked = mark.ts - latency / 1e6  # when the wake-up was due, as the mark says
    if not mine or mine[0].ts > marked:
        out["problem"] = (
            f"the trace starts {max(mine[0].ts - marked, 0) * 1e6 if mine else 0:.0f} µs after the spike's "
            "window began: the buffer was too small for it"
        )
    due, back, woke = _window(mine, mark, latency)
    spans, roles = _spans(mine, mark.pid, due, back, woke)
    window = max(back - due, 0.0)
    causes: list[CauseJSON] = [
        {"kind": k, "name": n, "duration_us": round(_interval_union(s) * 1e6, 1), "role": roles[(k, n)]}
        for (k, n), s in spans.items()
    ]
    causes.sort(key=lambda c: -c["duration_us"])
    covered = _interval_union([span for s in spans.values() for span in s])
    out.update(
        {
            "window_us": round(window * 1e6, 1),
            "causes": causes,
            "top": causes[0] if causes else None,
            "unattributed_us": round(max(window - covered, 0.0) * 1e6, 1),
        }
    )
    return out


def _window(mine: list[Record], mark: Record, latency: int) -> tuple[float, float, float | None]:
    """The spike's window on its CPU: (due, back, woke): when the wake-up was due, when the
    thread ran again, and its wake-up (None: not in the trace)."""
    due = mark.ts - latency / 1e6
    back = next(
        (r.ts for r in reversed(mine) if r.event == "sched_switch" and int(r.fields["next_pid"]) == mark.pid),
        mark.ts,
    )
    if back < due:  # it ran on, unscheduled, since before its wake-up was due: its own code
        back = mark.ts
    # Its wake-up: cyclictest stamps the latency before it writes the mark, so the due time
    # computed from the mark is late by that much; a wake-up just before it starts the window.
    woke = next(
        (
            r.ts
            for r in reversed(mine)
            if r.event == "sched_waking" and int(r.fields["pid"]) == mark.pid and r.ts <= back
        ),
        None,
    )
    if woke is not None and due - (mark.ts - back) <= woke < due:
        due = woke
    return due, back, woke


def _spans(
    mine: list[Record], pid: int, due: float, back: float, woke: float | None
) -> tuple[dict[tuple[str, str], list[tuple[float, float]]], dict[tuple[str, str], str]]:
    """What ran on the CPU within [due, back], by (kind, name): its spans, and its role
    (blocking: the task running when the thread woke; else interference)."""
    spans: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    roles: dict[tuple[str, str], str] = {}

    def add(kind: str, name: str, start: float, end: float, role: str = "") -> None:
        a, b = max(start, due), min(end, back)
        if b > a:
            spans[(kind, name)].append((a, b))
            if role == "blocking" or (kind, name) not in roles:
                roles[(kind, name)] = role

    def task(task_pid: int, comm: str, prio: str, start: float, end: float) -> None:
        if task_pid == pid:
            return
        if task_pid == 0:
            add("idle", "CPU idle", start, end)
            return
        role = "blocking" if woke is not None and start <= woke <= end else "interference"
        add("thread", f"{comm}:{task_pid}" + _policy(prio), start, end, role)

    # Who ran: the task of each line, switched at each sched_switch.
    current: tuple[int, str, str] | None = None  # pid, comm, prio
    since = mine[0].ts if mine else due
    opened: dict[str, tuple[float, str]] = {}  # handler key -> (entry time, its name)
    for r in mine:
        if current is None:
            current = (r.pid, r.comm, "")
        if r.event == "sched_switch":
            task(*current, since, r.ts)
            current = (int(r.fields["next_pid"]), r.fields["next_comm"], r.fields["next_prio"])
            since = r.ts
        elif r.event.endswith("_entry") and r.event in _HANDLERS:
            opened[_key(r)] = (r.ts, _name(r))
        elif r.event.endswith("_exit") and r.event in _HANDLERS and _key(r) in opened:
            start, name = opened.pop(_key(r))
            add(_HANDLERS[r.event], name, start, r.ts)
        elif r.event == "nmi_handler":
            add("nmi", r.fields["handler"], r.ts - int(r.fields["delta_ns"]) / 1e9, r.ts)
    if current is not None:
        task(*current, since, back)
    return spans, roles


def _policy(prio: str) -> str:
    """The kernel's prio as users set it: 0..99 are real-time (rt 99 is prio 0), 100..139 nice."""
    if not prio.lstrip("-").isdigit():
        return ""
    value = int(prio)
    return f" (rt {99 - value})" if value < 100 else f" (nice {value - 120})"


_HANDLERS = {
    "irq_handler_entry": "irq", "irq_handler_exit": "irq",
    "softirq_entry": "softirq", "softirq_exit": "softirq",
    "local_timer_entry": "timer-irq", "local_timer_exit": "timer-irq",
}  # fmt: skip


def _key(r: Record) -> str:
    """What pairs a handler's entry with its exit."""
    return f"{_HANDLERS[r.event]} {r.fields.get('irq') or r.fields.get('vec') or r.fields.get('vector')}"


def _name(r: Record) -> str:
    if r.event == "irq_handler_entry":
        return f"irq {r.fields['irq']} {r.fields['name']}"
    if r.event == "softirq_entry":
        return r.fields["action"]
    return f"local timer (vector {r.fields['vector']})"


# rtla's sections, as causes: (kind, role) of its entries, or of the section itself
_AA_KINDS = {
    "Blocking thread": ("thread", "blocking"),
    "Thread interference": ("thread", "interference"),
    "IRQ interference": ("irq", ""),
    "Softirq interference": ("softirq", ""),
    "NMI interference": ("nmi", ""),
}
_AA_OWN = {
    "IRQ handler delay": ("irq-delay", "IRQ handler delay"),  # IRQs off, or the timer late
    "Timerlat IRQ duration": ("timer-irq", "timerlat IRQ"),
    "Previous IRQ interference": ("irq", "previous IRQ"),
}
AA_TIME_ERROR_S = 0.55  # rtla checks for the stop once a second: the hit lies within a second before


def explain_auto_analysis(aa: AutoAnalysis | None) -> TracedSpikeJSON:
    """One capture of level a: rtla's own breakdown, as the same causes as level b's."""
    out = _spike()
    latency = aa.sections.get("Thread latency") if aa else None
    if aa is None or latency is None:
        out["problem"] = "rtla printed no auto-analysis (it did not hit, or was cut off)"
        return out
    sums: dict[tuple[str, str, str], float] = defaultdict(float)
    for section, name, us in aa.entries:
        if section in _AA_KINDS:
            kind, role = _AA_KINDS[section]
            if kind == "irq" and name.startswith("local_timer"):
                kind = "timer-irq"
            sums[(kind, name, role)] += us
    for section, (kind, name) in _AA_OWN.items():
        if aa.sections.get(section):
            sums[(kind, name, "")] += aa.sections[section]
    # a part longer than the whole is rtla's arithmetic, not the kernel's (rtla 6.12 printed an
    # IRQ handler delay of 53854380 us, 13394 %, for a 402081 us latency in an emulated guest)
    impossible = {key: us for key, us in sums.items() if us > latency}
    out["refused"] = [
        f"rtla's {n} of {us:.0f} µs is longer than the latency it is part of ({latency:.0f} µs)"
        for (_, n, _), us in impossible.items()
    ]
    found: list[CauseJSON] = [
        {"kind": k, "name": n, "duration_us": round(us, 1), "role": r}
        for (k, n, r), us in sums.items()
        if us > 0 and (k, n, r) not in impossible
    ]
    found.sort(key=lambda c: -c["duration_us"])
    out.update(
        {
            "cpu": aa.cpu,
            "latency_us": round(latency),
            "window_us": round(latency, 1),
            "causes": found,
            "top": found[0] if found else None,
            "unattributed_us": round(max(latency - sum(c["duration_us"] for c in found), 0.0), 1),
        }
    )
    return out


# --- level c ----------------------------------------------------------------------


def suspects(samples: Sequence[CounterSample], t_uptime: float, cpu: int, top: int = 3) -> list[SuspectJSON]:
    """The sources far busier than their median in the second around `t_uptime`, on `cpu`."""
    pairs = list(zip(samples, samples[1:], strict=False))
    here = next(((a, b) for a, b in pairs if a.t <= t_uptime <= b.t), None)
    if here is None:
        return []

    def count(a: CounterSample, b: CounterSample, source: str) -> int | None:
        """How many in that interval on `cpu` (None: the source or the CPU is not in both)."""
        old, new = a.counts.get(source, ()), b.counts.get(source, ())
        return new[cpu] - old[cpu] if cpu < min(len(old), len(new)) else None

    found: list[tuple[float, SuspectJSON]] = []
    for source in here[1].counts:
        n = count(*here, source)
        if not n:
            continue
        rates = [c / max(b.t - a.t, 1e-3) for a, b in pairs if (c := count(a, b, source)) is not None]
        typical = statistics.median(rates)
        rate = n / max(here[1].t - here[0].t, 1e-3)
        if rate > 2 * typical + 5:
            found.append((rate - typical, {"source": source, "count": n, "typical": round(typical, 1)}))
    found.sort(key=lambda f: -f[0])
    return [s for _, s in found[:top]]


def top_causes(spikes: Sequence[TracedSpikeJSON]) -> list[TopCauseJSON]:
    """The sources that topped most spikes (then the worst share of one window)."""
    tally: dict[tuple[str, str], TopCauseJSON] = {}
    for spike in spikes:
        top = spike["top"]
        if top is None:
            continue
        entry = tally.setdefault(
            (top["kind"], top["name"]),
            {"kind": top["kind"], "name": top["name"], "spikes": 0, "worst_us": 0.0},
        )
        entry["spikes"] += 1
        entry["worst_us"] = max(entry["worst_us"], top["duration_us"])
    return sorted(tally.values(), key=lambda e: (-e["spikes"], -e["worst_us"]))[:TOP_CAUSES]


# --- a load's causes ------------------------------------------------------------------


def build(
    load: str,
    captures: Sequence[TraceCapture],
    enabled: Sequence[str],
    events: Sequence[Event],
    origin_uptime: float,
    measured_cpus: Sequence[int],
) -> CausesJSON | None:
    """The load's `causes` from its trace pass; None when the load had none.
    `measured_cpus`: cyclictest's threads' CPUs in thread order (level c names a spike by thread)."""
    mine = [e for e in events if e.get("load") == load]
    start = next((e for e in mine if e.kind == Kind.TRACE_START), None)
    if start is None:
        return None
    end = next((e for e in mine if e.kind == Kind.TRACE_END), None)
    level, clock = start.get("level"), start.get("clock")
    marks = {e.get("n"): e for e in mine if e.kind == Kind.TRACE_SPIKE}
    spikes: list[TracedSpikeJSON] = []
    total: int | None = None
    if level in ("a", "b"):
        for capture in captures:
            event = marks.get(str(capture.n))
            if event is None:
                continue  # the pass ran out without a spike in this run of the tool
            spike = _explain_capture(level, capture)
            spike.update({"n": capture.n, "trace": capture.trace_path})
            at: float | None
            if level == "a":  # rtla prints no time: the middle of the second before the agent saw the hit
                hit = event.get("hit")
                at = float(hit) - AA_TIME_ERROR_S if _number(hit) else event_time(event)
            else:  # mono is the clock the agent's events count on; otherwise the agent's own stamp
                at = spike["t_s"] if clock == "mono" and spike["t_s"] is not None else event_time(event)
            spike["t_s"] = round(at - origin_uptime, 3) if at is not None else None
            spikes.append(spike)
    elif captures and captures[0].verbose is not None:  # level c: one cyclictest run
        verbose = captures[0].verbose
        samples = parse_counters(captures[0].counters or "")
        total = verbose.spikes_total
        for i, (thread, latency, mono_us) in enumerate(verbose.spikes, 1):
            cpu = measured_cpus[thread] if thread < len(measured_cpus) else thread
            spikes.append(
                _spike(n=i, t_s=round(mono_us / 1e6 - origin_uptime, 3), cpu=cpu, latency_us=latency,
                       suspects=suspects(samples, mono_us / 1e6, cpu))
            )  # fmt: skip
    return {
        "level": level,
        "threshold_us": int(start.get("threshold_us") or 0),
        "seconds": int(start.get("seconds") or 0),
        "clock": clock,
        "events": list(enabled),
        "spikes": spikes,
        "total": total if level == "c" else len(spikes),
        "top": top_causes(spikes),
        "note": {"a": NOTE_A, "b": NOTE_B}.get(level, NOTE_C),
        "reason": (end.get("reason") or None) if end is not None else "the trace pass never ended",
    }


def _explain_capture(level: str, capture: TraceCapture) -> TracedSpikeJSON:
    if level == "a":
        return explain_auto_analysis(parse_auto_analysis(capture.rtla_text or ""))
    if capture.trace_text is None:
        return _spike(problem="its trace is missing or cut off")
    return explain(parse(capture.trace_text))


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
