"""Every exchange with a server (LAVA's REST API, SQUAD, any later one) under one policy,
its answer read as hostile input:

- one deadline for the whole exchange: connecting, sending, every redirect and the whole
  answer, not each read (a server that sends a byte now and then is cut off as well);
- a cap on the answer's size, read as it streams;
- a credential never crosses an origin: a redirect to another scheme, host or port is refused
  while a credential is sent (it would follow the redirect), and followed without one;
- what the server said is made printable before it reaches a terminal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yarl

from rtlab.boundary import untrusted
from rtlab.errors import RunFailed, UsageError
from rtlab.units import read_user_file

CONNECT_S = 30  # the longest wait for a connection
DEADLINE_S = 600  # the longest for a whole exchange: a job's log of a long soak is megabytes
BODY_BYTES = 256 << 20  # the largest answer rtlab takes: a job's log
REDIRECTS = 5
_REDIRECT = (301, 302, 303, 307, 308)


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


def request(method: str, url: str, *, credential: Mapping[str, str] | None = None,
            deadline_s: float = DEADLINE_S, json: Any = None,
            fields: Mapping[str, str] | None = None) -> Answer:  # fmt: skip
    """METHOD URL's answer under the policy above. CREDENTIAL: the headers that carry one
    (sent to URL's origin only); JSON: a body; FIELDS: a multipart form of text fields.
    UsageError when the server cannot be reached, RunFailed when it breaks the policy."""
    try:
        return asyncio.run(_exchange(method, url, dict(credential or {}), deadline_s, json, fields))
    except (aiohttp.ClientError, ValueError) as e:  # first: a connect timeout is a ClientError too
        raise _unreachable(url, e) from None
    except TimeoutError:  # the exchange's own deadline (an OSError: before the next line)
        raise RunFailed(f"{url} took more than {deadline_s:g} s to answer: try again later") from None
    except OSError as e:
        raise _unreachable(url, e) from None


def _unreachable(url: str, e: Exception) -> UsageError:
    said = untrusted.printable(str(e))[:200]
    return UsageError(f"cannot reach {url} ({type(e).__name__}: {said}): check --url and the network")


def origin(url: str | yarl.URL) -> tuple[str, str, int | None]:
    u = yarl.URL(str(url))
    return (u.scheme.lower(), (u.host or "").lower(), u.port)


async def _exchange(method: str, url: str, credential: dict[str, str], deadline_s: float, body: Any,
                    fields: Mapping[str, str] | None) -> Answer:  # fmt: skip
    home = origin(url)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_S)
    async with asyncio.timeout(deadline_s), aiohttp.ClientSession(timeout=timeout, trust_env=True) as session:
        for _ in range(REDIRECTS + 1):
            headers = credential if origin(url) == home else {}
            data = _form(fields) if fields is not None else None
            async with session.request(
                method, url, headers=headers, json=body, data=data, allow_redirects=False
            ) as answer:
                if answer.status in _REDIRECT and "Location" in answer.headers:
                    url = str(answer.url.join(yarl.URL(answer.headers["Location"])))
                    if credential and origin(url) != home:
                        raise RunFailed(
                            f"the server sent rtlab to another origin ({untrusted.printable(url)[:120]}): "
                            "rtlab sends no credential across origins; give that address as --url"
                        )
                    if answer.status == 303 or (answer.status in (301, 302) and method == "POST"):
                        method, body, fields = "GET", None, None
                    continue
                return Answer(answer.status, str(answer.reason or ""), await _body(answer, url))
    raise RunFailed(f"{url} redirected more than {REDIRECTS} times: check --url")


def _form(fields: Mapping[str, str]) -> aiohttp.FormData:
    form = aiohttp.FormData()
    for name, value in fields.items():  # a content type makes it multipart, as SQUAD's API reads
        form.add_field(name, value, content_type="application/json")
    return form


async def _body(answer: aiohttp.ClientResponse, where: str) -> bytes:
    """The answer's body, as it streams: no more than BODY_BYTES."""
    body = bytearray()
    async for chunk in answer.content.iter_any():
        body += chunk
        if len(body) > BODY_BYTES:
            raise RunFailed(
                f"{where} sent more than {BODY_BYTES >> 20} MiB: not a server's answer rtlab takes"
            )
    return bytes(body)


def shown(value: Any) -> str:
    """What a server said, as one printable line of at most 300 characters."""
    return untrusted.printable(value if isinstance(value, str) else repr(value))[:300]


def read_token(path: Path | None, option: str = "--token-file") -> str | None:
    """The API token in the file PATH (None without one): one word, never in arguments."""
    if path is None:
        return None
    try:
        token = read_user_file(path, option).strip()
    except OSError as e:
        raise UsageError(
            f"cannot read {option} {path}: {e.strerror}: give the file holding the API token"
        ) from None
    if not token or any(c.isspace() for c in token):
        raise UsageError(f"{option} {path} does not hold one token: write only the token in it")
    return token
