"""The agent's progress lines: `@rtlab KIND key=value ...` (see agent.sh)."""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "@rtlab "


@dataclass(frozen=True)
class Event:
    kind: str
    fields: dict[str, str]

    def get(self, key: str, default: str = "") -> str:
        return self.fields.get(key, default)


def parse(line: str) -> Event | None:
    """The event on `line`, or None for any other output."""
    line = line.rstrip("\n")
    if not line.startswith(PREFIX):
        return None
    kind, _, rest = line[len(PREFIX) :].partition(" ")
    fields: dict[str, str] = {}
    while rest:
        key, eq, rest = rest.partition("=")
        if not eq:
            break
        # `reason` carries free text and is always the last field.
        if key == "reason":
            fields[key] = rest
            break
        value, _, rest = rest.partition(" ")
        fields[key.strip()] = value
    return Event(kind, fields)
