"""JUnit XML for CI (Jenkins, GitLab, LAVA): one test case per load and run, and one per
probe under a load (--probe: "idle pi_stress").

A load fails when its max latency exceeded the deadline (the message gives both),
and is an error when it has no complete measurement. Without a deadline a
complete load passes. A probe fails when it is a functional test that failed the kernel in its
own words (pi_stress's deadlock, rt-migrate-test's check: its `test_failed`), is an error when
it did not complete otherwise (it could not run, gave no result or stopped short: its reason
says which), skipped when its load ended before its turn, and passes otherwise, its figures as
properties. Each suite's properties hold the run's
platform facts and what ran where, as the other formats' facts lines say them. Every string
from the run goes through escape.xml: the file stays XML 1.0 a CI server parses.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence

from rtlab.analysis.summary import facts_lines
from rtlab.boundary.summary_shapes import ProbeJSON, Summary
from rtlab.report import cells
from rtlab.report.escape import xml as clean


def render(summaries: Sequence[Summary], labels: Sequence[str]) -> str:
    root = ET.Element("testsuites", name="rtlab")
    for summary, label in zip(summaries, labels, strict=True):
        duration = float(summary["plan"]["duration_s"] or 0)
        deadline = summary.get("deadline")
        label = clean(label)
        suite = ET.SubElement(root, "testsuite", name=f"rtlab {label}")
        facts = facts_lines(summary)
        if facts:
            said = ET.SubElement(suite, "properties")
            for name, fact in facts:
                ET.SubElement(said, "property", name=clean(name), value=clean(fact))
        failures = errors = 0
        for load in cells.loads_in_order([summary]):
            entry = summary["loads"][load]
            case = ET.SubElement(
                suite, "testcase", name=clean(load), classname=f"rtlab.{label}", time=f"{duration:.1f}"
            )
            merged = entry["merged"]
            verdict = deadline["loads"].get(load) if deadline else None
            if entry["status"] != "complete" or not merged:
                errors += 1
                why = f": {entry['reason']}" if entry["reason"] else ""
                ET.SubElement(case, "error", message=clean(f"{load}: measurement {entry['status']}{why}"))
            elif deadline and verdict and verdict["verdict"] == "miss" and verdict["margin_us"] is not None:
                failures += 1
                message = (
                    f"max latency {verdict['max_us']} µs exceeds the deadline "
                    f"{verdict.get('deadline_us', deadline['deadline_us'])} µs by {-verdict['margin_us']} µs"
                )
                ET.SubElement(case, "failure", message=message, type="DeadlineMissed").text = (
                    f"{message}\navg {merged['avg_us']} µs, p99 {merged['p99_us']} µs, "
                    f"p99.99 {merged['p99_99_us']} µs, {merged['samples']} samples"
                )
            props = ET.SubElement(case, "properties")
            for key in ("max_us", "avg_us", "p99_us", "samples"):
                value = merged.get(key) if merged else None
                if value is not None:
                    ET.SubElement(props, "property", name=key, value=str(value))
            failed, broke = _probes(suite, f"rtlab.{label}", load, entry.get("probes", {}), duration)
            failures, errors = failures + failed, errors + broke
        suite.set("tests", str(len(suite.findall("testcase"))))
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
        suite.set("skipped", str(len(suite.findall("testcase/skipped"))))
        suite.set("time", f"{duration * len(summary['loads']):.1f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _probes(
    suite: ET.Element, classname: str, load: str, probes: Mapping[str, ProbeJSON], duration: float
) -> tuple[int, int]:
    """A test case for each of LOAD's probes; how many are failures (a functional test that
    failed the kernel) and how many errors (a probe that could not run, or stopped short)."""
    failures = errors = 0
    for name, probe in probes.items():
        case = ET.SubElement(suite, "testcase", name=clean(f"{load} {name}"), classname=classname,
                             time=f"{duration:.1f}")  # fmt: skip
        why = f": {probe['reason']}" if probe["reason"] else ""
        if probe["status"] == "not-run":  # its load ended first: that load's own case is the error
            ET.SubElement(case, "skipped", message=clean(f"{load} {name}: not run{why}"))
        elif probe.get("test_failed"):
            failures += 1
            ET.SubElement(case, "failure", message=clean(f"{load} {name}: {probe['status']}{why}"),
                          type="TestFailed")  # fmt: skip
        elif probe["status"] != "complete":
            errors += 1
            ET.SubElement(case, "error", message=clean(f"{load} {name}: {probe['status']}{why}"))
        props = ET.SubElement(case, "properties")
        figures = [(f"{measure} {key}", stats[key]) for measure, stats in probe["merged"].items()
                   for key in ("max_us", "avg_us", "samples") if stats.get(key) is not None]  # fmt: skip
        for said, value in [*figures, *probe.get("counts", {}).items()]:
            ET.SubElement(props, "property", name=clean(said), value=clean(str(value)))
    return failures, errors
