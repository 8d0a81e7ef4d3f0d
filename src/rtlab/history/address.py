"""Where the history store is (--db, $RTLAB_HISTORY_DB, else a file in the user's data folder),
its address as SQLAlchemy takes it, and as every message shows it: no password, no secret.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from pathlib import Path

import sqlalchemy as sa

from rtlab.errors import UsageError

ENV = "RTLAB_HISTORY_DB"  # where the store is, when --db is not given


def default_url() -> str:
    if os.environ.get(ENV):
        return os.environ[ENV]
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local/share")
    return str(base / "rtlab" / "history.db")


def engine_url(given: str) -> str:
    """A path (SQLite) or a database URL; postgresql:// without a driver uses pg8000 (pure
    Python, nothing to compile on a lab's host). A malformed address is one line that never
    repeats its password."""
    if given.startswith(("postgresql://", "postgres://")):
        url = "postgresql+pg8000://" + given.split("://", 1)[1]
    elif "://" in given:
        if not given.startswith(("sqlite://", "postgresql+")):
            raise UsageError(
                f"--db {shown_url(given)}: give a file (SQLite) or a postgresql://USER@HOST/DB address"
            )
        url = given
    else:
        path = Path(given).expanduser()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"--db {given}: cannot create its folder: {e.strerror}") from None
        return f"sqlite:///{path}"
    try:
        parsed = sa.make_url(url)
        if parsed.port is not None and not 0 < parsed.port < 65536:
            raise ValueError("no such port")
    except (ValueError, sa.exc.ArgumentError):
        raise UsageError(
            f"--db {shown_url(given)} is not a database address: give postgresql://USER@HOST[:PORT]/DB"
        ) from None
    return url


# A user's part with a password: the user (which may hold an @, as a cloud's user@server does),
# then everything up to the URL's last @. SQLAlchemy's password may hold / and ? too, and an @
# written unencoded in a password would leave its end in what looks like the host: too much
# hidden (a database name with an @) is the price of never showing a password's end.
_USERINFO = re.compile(r"^([^:/?#]*://[^:/?#]*):.*@(?=[^@]*$)", re.DOTALL)
# A query parameter whose name holds one of these carries a secret (password, sslpassword,
# sslkey, passfile, a token): its value is never shown, nor said by a database's message.
SECRET_WORDS = ("pass", "secret", "token", "key")


def _secret_key(key: str) -> bool:
    name = urllib.parse.unquote_plus(key).lower()
    return any(word in name for word in SECRET_WORDS)


def shown_url(url: str) -> str:
    """URL as every message shows it: user@host, no password, each secret-looking query
    parameter's value as ***; the same for a malformed one."""
    url = _USERINFO.sub(r"\1@", url)
    base, mark, query = url.partition("?")
    if not mark:
        return url
    parts = []
    for part in query.split("&"):  # as SQLAlchemy splits it (parse_qsl)
        key, eq, _ = part.partition("=")
        parts.append(f"{key}=***" if eq and _secret_key(key) else part)
    return f"{base}?{'&'.join(parts)}"


def secrets_of(url: str) -> list[str]:
    """The secrets URL carries (its password, its secret-looking parameters' values), as a
    driver sees them: what a database's message must not repeat."""
    try:
        parsed = sa.make_url(url)
    except (ValueError, sa.exc.ArgumentError):
        return []
    found = [parsed.password] if parsed.password else []
    if parsed.host and "@" in parsed.host:  # a password's end after an @ written unencoded in it
        found.append(parsed.host.rpartition("@")[0])
    for key, value in parsed.query.items():
        if _secret_key(key):
            found += [value] if isinstance(value, str) else list(value)
    return sorted((str(s) for s in found if s), key=len, reverse=True)  # longest first: none cut
