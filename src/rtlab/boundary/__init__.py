"""The trust boundary: everything a target, a log, a server or a run folder says crosses it here.

A board runs experimental kernels and a farm is shared, so what comes from one is hostile until
checked, each kind in one place:

    untrusted.py  files (no links, a size named for each), JSON and YAML (bounded nesting,
                  aliases and digits) and strings (made printable before a terminal)
    paths.py      an outside name becomes a path (one component, a known set, numbers as
                  numbers; no link anywhere below a run folder)
    values.py     outside numbers and strings become values (CPU lists and counts within what
                  Linux can have, rows within their columns, dates not in the future)
    unpack.py     archives (regular files and folders of a run's layout, within its caps)
    web.py        servers (one deadline a whole exchange, a size cap, no credential across
                  an origin change)
    shapes.py     the shapes every document is checked against before its values are used:
                  sysinfo.json's and run.json's (summary_shapes.py: summary.json's), and
                  shape_check.py the check against them

READERS lists every function that reads outside data; tests/test_readers.py holds a property
test (Hypothesis) for each, and fails when a reader here has none.
"""

# name -> (the reader, what it reads): every entry has its property test in tests/test_readers.py
READERS: dict[str, tuple[str, str]] = {
    "events": ("rtlab.rundir.events:parse", "the agent's progress lines (@rtlab KIND key=value)"),
    "cyclictest": ("rtlab.rundir.cyclictest:threads", "cyclictest's JSON"),
    "oslat": ("rtlab.plan.probes:parse", "oslat's JSON"),
    "cyclicdeadline": ("rtlab.plan.probes:parse", "cyclicdeadline's JSON"),
    "rt-tests-ipc": (
        "rtlab.plan.probes:parse",
        "pmqtest's, ptsematest's, sigwaittest's and svsematest's JSON",
    ),
    "rt-tests-signal-migrate": (
        "rtlab.plan.probes:parse",
        "signaltest's, rt-migrate-test's and pi_stress's JSON",
    ),
    "rtla": ("rtlab.plan.probes:parse", "rtla timerlat hist's table"),
    "timeline": ("rtlab.rundir.timeline:parse", "cyclictest's oscilloscope and spike lines"),
    "ftrace": ("rtlab.rundir.ftrace:parse", "a trace capture's text"),
    "rtla-analysis": ("rtlab.rundir.ftrace:parse_auto_analysis", "rtla's auto-analysis"),
    "hwlat": ("rtlab.runner.hwlat:_files", "the files the agent prints after a hwlat pass"),
    "placement": ("rtlab.analysis.placement:of", "sysinfo.json's SMT siblings of each CPU, against the plan"),
    "sysinfo": ("rtlab.rundir.disk:RunDir.sysinfo", "a run's sysinfo.json"),
    "run.json": ("rtlab.rundir.disk:RunDir.manifest", "a run's run.json"),
    "run-folder": ("rtlab.rundir.readback:summary", "a whole run folder, as report reads it"),
    "archive": ("rtlab.boundary.unpack:unpack", "a board's or guest's tar.gz of a run"),
    "lava-log": ("rtlab.farm.lava:bundle", "a LAVA job's log and the run bundle in it"),
    "history-index": ("rtlab.history.db:Store.add", "a run folder into the history store"),
    "history-lists": (
        "rtlab.boundary.untrusted:whole_numbers",
        "the history store's lists (histograms, maxima)",
    ),
    "history-histograms": (
        "rtlab.boundary.untrusted:whole_number_array",
        "the history store's histograms, read as arrays",
    ),
    "server-answer": ("rtlab.boundary.web:Answer.json", "a server's answer"),
    "kernel-image": ("rtlab.targets.qemu.pvh:unpack", "an x86 kernel's bzImage, unpacked on the host"),
}
