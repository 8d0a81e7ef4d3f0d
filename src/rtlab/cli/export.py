"""rtlab export: results where farms read them (KernelCI's KCIDB, Linaro's SQUAD)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rtlab.cli.options import Deadline
from rtlab.cli.screen import Output, emit, err
from rtlab.errors import RunFailed, UsageError
from rtlab.units import parse_latency

if TYPE_CHECKING:
    from rtlab.boundary.shapes import Sysinfo
    from rtlab.boundary.summary_shapes import Summary

app = typer.Typer(
    help="Results where farms read them: KernelCI's KCIDB, Linaro's SQUAD.", no_args_is_help=True
)


@app.command("kcidb")
def export_kcidb(
    runs: Annotated[list[Path], typer.Argument(metavar="RUN ...")],
    origin: Annotated[str, typer.Option(help="your CI system's name in KCIDB (a-z, 0-9, _)")] = "rtlab",
    output: Output = None,
    deadline: Deadline = None,
    worst_case: Annotated[
        bool, typer.Option("--worst/--no-worst", help="add the statistical worst case at 1e-9 (slower)")
    ] = True,
) -> None:
    """One KCIDB document (schema v5) for RUNs: checkouts and builds from what the targets
    reported, a test per load and per CPU with max and p99.99 in µs; validated with kcidb-io."""
    import jsonschema
    import kcidb_io

    from rtlab.export import kcidb
    from rtlab.rundir import readback

    if not kcidb.valid_origin(origin):
        raise UsageError(f"--origin {origin!r}: KCIDB origins are lowercase letters, digits and _")
    deadline_us = parse_latency(deadline) if deadline is not None else None
    found: list[tuple[Summary, Sysinfo | None, str]] = []
    for path in runs:
        summary, info, uid = readback.with_identity(path, deadline_us)
        if any(uid == seen for _, _, seen in found):
            raise UsageError(f"{path} is the same run (uid {uid}) as one before it: give each run once")
        found.append((summary, info, uid))
    document = kcidb.document(found, origin, with_worst=worst_case)
    try:
        kcidb_io.schema.LATEST.validate(document)
    except jsonschema.exceptions.ValidationError as e:  # rtlab's own fault: said, never sent
        raise RunFailed(f"the KCIDB document does not validate: {e.message}") from None
    emit(json.dumps(document, indent=2, ensure_ascii=False) + "\n", output)


@app.command("squad")
def export_squad(
    runs: Annotated[list[Path], typer.Argument(metavar="RUN ...")],
    url: Annotated[str, typer.Option(help="the SQUAD server, e.g. https://qa-reports.linaro.org")],
    team: Annotated[str, typer.Option(help="the SQUAD group")],
    project: Annotated[str, typer.Option(help="the SQUAD project")],
    build: Annotated[str | None, typer.Option(help="the build (default: the kernel release)")] = None,
    environment: Annotated[
        str | None, typer.Option(help="the environment (default: the board's hostname)")
    ] = None,
    token_file: Annotated[
        Path | None, typer.Option(help="a file holding your SQUAD token (sent only in its Auth-Token header)")
    ] = None,
    deadline: Deadline = None,
) -> None:
    """Each RUN to SQUAD as a test run: tests per load, metrics in µs per load and CPU."""
    from rtlab.boundary import web
    from rtlab.export import squad
    from rtlab.rundir import readback

    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--url {url}: give the server's address, e.g. https://qa-reports.linaro.org")
    team, project = squad.slug(team, "team"), squad.slug(project, "project")
    token = web.read_token(token_file)
    deadline_us = parse_latency(deadline) if deadline is not None else None
    for path in runs:
        summary, info, uid = readback.with_identity(path, deadline_us)
        where = squad.slug(build or summary["system"].get("kernel_release") or "unknown", "build")
        env = squad.slug(environment or summary["system"].get("hostname") or "board", "environment")
        squad.submit(url, token, team, project, where, env, squad.submission(summary, info, uid))
        err.print(
            f"{path}: sent to {url} as {team}/{project} build {where}, environment {env}", highlight=False
        )
