"""A LAVA server through its REST API (v0.2): submit a job, follow it to its end, read its log.

The token comes from a file and goes only into the Authorization header (`Token ...`, as
LAVA's API expects it): never into process arguments, run.json or any log rtlab writes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rtlab.boundary import untrusted, web
from rtlab.errors import RunFailed, UsageError

API = "api/v0.2"
POLL_S = 10.0  # how often a job's state is asked for while waiting
FINISHED = "Finished"  # the state of a job that ran (or could not), whatever its health


def read_token(path: Path | None) -> str | None:
    return web.read_token(path)


@dataclass
class Server:
    url: str
    token: str | None = None
    deadline_s: float = web.DEADLINE_S  # for a whole exchange

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise UsageError(f"--url {self.url}: give the server's address, e.g. https://lava.example.org")
        self.url = self.url.rstrip("/")

    def submit(self, definition: str) -> int:
        """The new job's id."""
        body = self._request("POST", "jobs/", json={"definition": definition}).json()
        ids = body.get("job_ids") if isinstance(body, dict) else None
        if not isinstance(ids, list) or not ids or not isinstance(ids[0], int) or isinstance(ids[0], bool):
            # a multinode job is several; rtlab's jobs are one board each
            raise RunFailed(f"{self.url} accepted the job but named no job id: {web.shown(body)}")
        return ids[0]

    def job(self, job_id: int) -> dict[str, Any]:
        """The job's record: state (Submitted ... Finished) and health (Complete, Incomplete, ...)."""
        body = self._request("GET", f"jobs/{job_id}/").json()
        if not isinstance(body, dict) or not isinstance(body.get("state"), str):
            raise RunFailed(f"{self.url}: job {job_id}'s record has no state: {web.shown(body)}")
        if not isinstance(body.get("health"), str | None):
            raise RunFailed(f"{self.url}: job {job_id}'s health is {web.shown(body['health'])}, not a word")
        return body

    def wait(self, job_id: int, on_state: Callable[[str], None], poll_s: float = POLL_S) -> dict[str, Any]:
        """The job's record once it is Finished; each new state is told on the way."""
        seen = None
        while True:
            record = self.job(job_id)
            if record["state"] != seen:
                seen = record["state"]
                on_state(untrusted.printable(seen)[:40])
            if seen == FINISHED:
                return record
            time.sleep(poll_s)

    def log(self, job_id: int) -> str:
        """The job's whole log as the server keeps it (a YAML list, one entry per line)."""
        return self._request("GET", f"jobs/{job_id}/logs/").text

    def job_url(self, job_id: int) -> str:
        return f"{self.url}/scheduler/job/{job_id}"

    def _request(self, method: str, path: str, **kwargs: Any) -> web.Answer:
        where = f"{self.url}/{API}/{path}"
        credential = {"Authorization": f"Token {self.token}"} if self.token is not None else None
        response = web.request(method, where, credential=credential, deadline_s=self.deadline_s, **kwargs)
        if response.status_code in (401, 403):
            how = "give a valid --token-file" if self.token else "give --token-file with the user's API token"
            raise UsageError(f"{self.url} refused {method} {path} (HTTP {response.status_code}): {how}")
        if response.status_code == 404:
            raise UsageError(f"{where} does not exist (HTTP 404): check --url and the job id")
        if response.status_code == 400:  # the job was refused: the server says why
            raise UsageError(f"{self.url} refused the job: {response.message()}")
        if not response.ok:
            raise RunFailed(
                f"{self.url}: {method} {path} failed with HTTP {response.status_code}: {response.message()}"
            )
        return response
