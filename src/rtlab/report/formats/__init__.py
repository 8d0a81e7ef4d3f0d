"""The report formats, one module each: render(summaries, labels) -> str, picked by name
through rtlab.report.renderer. Nothing is imported here, so a format's libraries load only
when it is asked for."""
