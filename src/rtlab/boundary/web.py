"""A server's answers (LAVA's REST API, SQUAD), read as hostile input: each whole within a
deadline and a cap on its size, streamed, and what the server said made printable."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
import urllib3

from rtlab.boundary import untrusted
from rtlab.errors import RunFailed, UsageError

TIMEOUT_S = 60  # the longest wait for one read of an answer
DEADLINE_S = 600  # the longest for a whole answer: a job's log of a long soak is megabytes
BODY_BYTES = 256 << 20  # the largest answer rtlab takes: a job's log


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

    def message(self) -> str:
        """What the server said of it, as one printable line."""
        try:
            body = self.json()
        except RunFailed:
            return shown(self.text.strip()) or untrusted.printable(self.reason)
        if isinstance(body, dict):
            return shown(body.get("message") or body.get("detail") or body)
        return shown(body)


def request(session: requests.Session, method: str, url: str, deadline_s: float = DEADLINE_S,
            **kwargs: Any) -> Answer:  # fmt: skip
    """METHOD URL's answer; UsageError when the server cannot be reached."""
    try:
        with session.request(method, url, timeout=TIMEOUT_S, stream=True, **kwargs) as streamed:
            return Answer(streamed.status_code, str(streamed.reason), _body(streamed, url, deadline_s))
    except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as e:
        raise UsageError(f"cannot reach {url} ({type(e).__name__}): check --url and the network") from None


def _body(response: requests.Response, where: str, deadline_s: float) -> bytes:
    """The answer's body, streamed: no more than BODY_BYTES, no longer than DEADLINE_S in all
    (a server that sends a byte now and then is cut off too)."""
    deadline = time.monotonic() + deadline_s
    body = bytearray()
    # read1: what has come, up to 64 kB, so the deadline is checked however slowly bytes come
    while chunk := response.raw.read1(1 << 16, decode_content=True):
        body += chunk
        if len(body) > BODY_BYTES:
            raise RunFailed(
                f"{where} sent more than {BODY_BYTES >> 20} MiB: not a server's answer rtlab takes"
            )
        if time.monotonic() > deadline:
            raise RunFailed(f"{where} took more than {deadline_s:g} s to answer: try again later")
    return bytes(body)


def shown(value: Any) -> str:
    """What a server said, as one printable line of at most 300 characters."""
    return untrusted.printable(value if isinstance(value, str) else repr(value))[:300]


def read_token(path: Path | None, option: str = "--token-file") -> str | None:
    """The API token in the file PATH (None without one): one word, never in arguments."""
    if path is None:
        return None
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as e:
        raise UsageError(
            f"cannot read {option} {path}: {e.strerror}: give the file holding the API token"
        ) from None
    if not token or any(c.isspace() for c in token):
        raise UsageError(f"{option} {path} does not hold one token: write only the token in it")
    return token
