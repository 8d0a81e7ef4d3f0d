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
import urllib3

from rtlab import untrusted
from rtlab.errors import RunFailed, UsageError
from rtlab.lava import LOG_BYTES

API = "api/v0.2"
TIMEOUT_S = 60  # the longest wait for one read of an answer
DEADLINE_S = 600  # the longest for a whole answer: a job's log of a long soak is megabytes
BODY_BYTES = LOG_BYTES  # the largest answer rtlab takes: a job's log
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
    deadline_s: float = DEADLINE_S  # for a whole answer
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
        if not isinstance(ids, list) or not ids or not isinstance(ids[0], int) or isinstance(ids[0], bool):
            # a multinode job is several; rtlab's jobs are one board each
            raise RunFailed(f"{self.url} accepted the job but named no job id: {_shown(body)}")
        return ids[0]

    def job(self, job_id: int) -> dict[str, Any]:
        """The job's record: state (Submitted ... Finished) and health (Complete, Incomplete, ...)."""
        body = self._request("GET", f"jobs/{job_id}/").json()
        if not isinstance(body, dict) or not isinstance(body.get("state"), str):
            raise RunFailed(f"{self.url}: job {job_id}'s record has no state: {_shown(body)}")
        if not isinstance(body.get("health"), str | None):
            raise RunFailed(f"{self.url}: job {job_id}'s health is {_shown(body['health'])}, not a word")
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

    def _request(self, method: str, path: str, **kwargs: Any) -> Answer:
        where = f"{self.url}/{API}/{path}"
        try:
            with self.session.request(method, where, timeout=TIMEOUT_S, stream=True, **kwargs) as streamed:
                response = Answer(
                    streamed.status_code, str(streamed.reason), _body(streamed, where, self.deadline_s)
                )
        except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as e:
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


@dataclass(frozen=True)
class Answer:
    """A server's answer, read whole within the deadline and the cap."""

    status_code: int
    reason: str
    content: bytes

    @property
    def ok(self) -> bool:
        return self.status_code < 400

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        try:
            return untrusted.json_loads(self.content, "answer")
        except untrusted.Damaged as e:
            raise RunFailed(f"the server's {e}") from None


def _body(response: requests.Response, where: str, deadline_s: float) -> bytes:
    """The answer's body, streamed: no more than BODY_BYTES, no longer than DEADLINE_S in all
    (a server that sends a byte now and then is cut off too)."""
    deadline = time.monotonic() + deadline_s
    body = bytearray()
    # read1: what has come, up to 64 kB, so the deadline is checked however slowly bytes come
    while chunk := response.raw.read1(1 << 16, decode_content=True):
        body += chunk
        if len(body) > BODY_BYTES:
            raise RunFailed(f"{where} sent more than {BODY_BYTES >> 20} MiB: not a LAVA server's answer")
        if time.monotonic() > deadline:
            raise RunFailed(f"{where} took more than {deadline_s:g} s to answer: try again later")
    return bytes(body)


def _message(response: Answer) -> str:
    try:
        body = response.json()
    except RunFailed:
        return _shown(response.text.strip()) or untrusted.printable(response.reason)
    if isinstance(body, dict):
        return _shown(body.get("message") or body.get("detail") or body)
    return _shown(body)


def _shown(value: Any) -> str:
    """What a server said, as one printable line of at most 300 characters."""
    return untrusted.printable(value if isinstance(value, str) else repr(value))[:300]
