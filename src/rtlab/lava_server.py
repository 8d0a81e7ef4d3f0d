"""A LAVA server through its REST API (v0.2): submit a job, follow it to its end, read its log.

The token comes from a file and goes only into the Authorization header (`Token ...`, as
LAVA's API expects it): never into process arguments, run.json or any log rtlab writes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from rtlab.errors import RunFailed, UsageError

API = "api/v0.2"
TIMEOUT_S = 60  # one request; a job's log of a long soak is megabytes
POLL_S = 10.0  # how often a job's state is asked for while waiting
FINISHED = "Finished"  # the state of a job that ran (or could not), whatever its health


def read_token(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as e:
        raise UsageError(
            f"cannot read --token-file {path}: {e.strerror}: give the file holding the API token"
        ) from None
    if not token or any(c.isspace() for c in token):
        raise UsageError(f"--token-file {path} does not hold one token: write only the token in it")
    return token


@dataclass
class Server:
    url: str
    token: str | None = None
    session: requests.Session = field(default_factory=requests.Session)

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise UsageError(f"--url {self.url}: give the server's address, e.g. https://lava.example.org")
        self.url = self.url.rstrip("/")
        if self.token is not None:
            self.session.headers["Authorization"] = f"Token {self.token}"

    def submit(self, definition: str) -> int:
        """The new job's id."""
        body = self._request("POST", "jobs/", json={"definition": definition}).json()
        ids = body.get("job_ids") if isinstance(body, dict) else None
        if not ids:  # a multinode job is several; rtlab's jobs are one board each
            raise RunFailed(f"{self.url} accepted the job but named no job id: {body!r}")
        return int(ids[0])

    def job(self, job_id: int) -> dict[str, Any]:
        """The job's record: state (Submitted ... Finished) and health (Complete, Incomplete, ...)."""
        body = self._request("GET", f"jobs/{job_id}/").json()
        if not isinstance(body, dict) or "state" not in body:
            raise RunFailed(f"{self.url}: job {job_id}'s record has no state: {body!r}")
        return body

    def wait(self, job_id: int, on_state: Callable[[str], None], poll_s: float = POLL_S) -> dict[str, Any]:
        """The job's record once it is Finished; each new state is told on the way."""
        seen = None
        while True:
            record = self.job(job_id)
            if record["state"] != seen:
                seen = record["state"]
                on_state(seen)
            if seen == FINISHED:
                return record
            time.sleep(poll_s)

    def log(self, job_id: int) -> str:
        """The job's whole log as the server keeps it (a YAML list, one entry per line)."""
        return self._request("GET", f"jobs/{job_id}/logs/").text

    def job_url(self, job_id: int) -> str:
        return f"{self.url}/scheduler/job/{job_id}"

    def _request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        where = f"{self.url}/{API}/{path}"
        try:
            response = self.session.request(method, where, timeout=TIMEOUT_S, **kwargs)
        except requests.RequestException as e:
            raise UsageError(
                f"cannot reach {self.url} ({type(e).__name__}): check --url and the network"
            ) from None
        if response.status_code in (401, 403):
            how = "give a valid --token-file" if self.token else "give --token-file with the user's API token"
            raise UsageError(f"{self.url} refused {method} {path} (HTTP {response.status_code}): {how}")
        if response.status_code == 404:
            raise UsageError(f"{where} does not exist (HTTP 404): check --url and the job id")
        if response.status_code == 400:  # the job was refused: the server says why
            raise UsageError(f"{self.url} refused the job: {_message(response)}")
        if not response.ok:
            raise RunFailed(
                f"{self.url}: {method} {path} failed with HTTP {response.status_code}: {_message(response)}"
            )
        return response


def _message(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason
    if isinstance(body, dict):
        return str(body.get("message") or body.get("detail") or body)[:300]
    return str(body)[:300]
