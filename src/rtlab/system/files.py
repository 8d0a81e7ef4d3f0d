"""/proc and /sys of a target, for tuning: read and written locally under a root path
(the real one, or a fake tree made by tests) or through the agent on any other target.
"""

from __future__ import annotations

import base64
import binascii
import errno
import fnmatch
import os
import re
from pathlib import Path
from typing import Protocol

from rtlab.boundary import untrusted
from rtlab.rundir.disk import write_atomic

_GLOB = re.compile(r"[*?\[\\]")  # what makes a word a pattern in sh


class Agent(Protocol):
    """What AgentFiles asks of a target (targets.base.Target has it): its agent, its name."""

    name: str

    def agent(self, args: list[str]) -> tuple[int, str]: ...


class Files(Protocol):
    def read(self, path: str) -> str | None:
        """The file's text without its trailing newline; None when missing or unreadable."""
        ...

    def write(self, path: str, value: str) -> None:
        """`echo value > path`: one write, as sysfs wants. OSError when the kernel refuses."""
        ...

    def glob(self, pattern: str) -> list[str]: ...

    def exists(self, path: str) -> bool: ...

    def read_all(self, patterns: list[str]) -> dict[str, str | None]:
        """What the glob PATTERNS match, each file read as `read` reads it (None: there but
        not readable as a file, a folder too), in one call to the target. OSError when the
        call failed (a caller reads file by file then, as before)."""
        ...

    def write_text(self, path: str, text: str) -> None:
        """A whole file, replaced atomically, its folder made if needed (rtlab's own state)."""
        ...

    def remove(self, path: str) -> None: ...

    def mkdir(self, path: str) -> None: ...

    def rmdir(self, path: str) -> None: ...

    def describe(self, path: str) -> str:
        """Where `path` is, for messages."""
        ...


class Root:
    """Files on this machine under a root path ($RTLAB_ROOT or /)."""

    def __init__(self, root: Path | str | None = None):
        self.root = Path(root if root is not None else os.environ.get("RTLAB_ROOT") or "/")

    def path(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def read(self, path: str) -> str | None:
        try:
            return self.path(path).read_text(errors="replace").rstrip("\n")
        except OSError:
            return None

    def write(self, path: str, value: str) -> None:
        with self.path(path).open("w") as f:
            f.write(value + "\n")

    def glob(self, pattern: str) -> list[str]:
        return sorted("/" + str(p.relative_to(self.root)) for p in self.root.glob(pattern.lstrip("/")))

    def exists(self, path: str) -> bool:
        return self.path(path).exists()

    def read_all(self, patterns: list[str]) -> dict[str, str | None]:
        found = (p for pattern in patterns for p in self.glob(pattern) if _matches(pattern, p))  # as sh would
        return {p: None if self.path(p).is_dir() else self.read(p) for p in found}

    def write_text(self, path: str, text: str) -> None:
        self.path(path).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path(path), text)

    def remove(self, path: str) -> None:
        self.path(path).unlink(missing_ok=True)

    def mkdir(self, path: str) -> None:
        self.path(path).mkdir()

    def rmdir(self, path: str) -> None:
        self.path(path).rmdir()

    def describe(self, path: str) -> str:
        return str(self.path(path))


class AgentFiles:
    """Files on a target, through `agent.sh file ...` (a QEMU guest, a board)."""

    CHUNK = 1500  # base64 characters a call: a serial console line holds 4096 bytes

    def __init__(self, target: Agent):
        self.target = target

    def _call(self, op: str, path: str, *arg: str) -> tuple[int, str]:
        return self.target.agent(["file", op, "/" + path.lstrip("/"), *arg])

    def _must(self, op: str, path: str, *arg: str) -> str:
        status, out = self._call(op, path, *arg)
        if status != 0:
            raise OSError(
                errno.EIO, untrusted.lines(out.strip())[-1] if out.strip() else f"{op} failed", path
            )
        return out

    def read(self, path: str) -> str | None:
        status, out = self._call("read", path)
        return out.rstrip("\n") if status == 0 else None

    def write(self, path: str, value: str) -> None:
        self._must("write", path, value)

    def glob(self, pattern: str) -> list[str]:
        status, out = self._call("glob", pattern)
        return sorted(line for line in untrusted.lines(out) if line.startswith("/")) if status == 0 else []

    def exists(self, path: str) -> bool:
        return self._call("exists", path)[0] == 0

    def read_all(self, patterns: list[str]) -> dict[str, str | None]:
        """`file dump PATTERN ...`, as many patterns a call as CHUNK allows; what a pattern of
        the call did not ask for is not kept."""
        found: dict[str, str | None] = {}
        batch: list[str] = []
        for pattern in ["/" + p.lstrip("/") for p in patterns] + [""]:
            if batch and (not pattern or sum(map(len, batch)) + len(pattern) > self.CHUNK):
                out = self._must("dump", *batch)
                found.update((p, v) for p, v in _dumped(out).items() if any(_matches(b, p) for b in batch))
                batch = []
            batch.append(pattern)
        return found

    def write_text(self, path: str, text: str) -> None:
        self.write_texts({path: text})

    def write_texts(self, texts: dict[str, str]) -> None:
        """Whole files as write_text writes each, the small ones together in as few calls as
        CHUNK allows (put64 PATH BASE64 ...): each call costs a shell on the target, 0.2 s in
        an emulated guest."""
        batch: list[str] = []
        for path, text in texts.items():
            encoded = base64.b64encode(text.encode()).decode()
            if len(encoded) > self.CHUNK:
                self._write_chunked(path, encoded)
                continue
            pair = ["/" + path.lstrip("/"), encoded]
            if batch and sum(map(len, batch + pair)) > self.CHUNK:
                self._put(batch)
                batch = []
            batch += pair
        if batch:
            self._put(batch)

    def _put(self, pairs: list[str]) -> None:
        status, out = self.target.agent(["file", "put64", *pairs])
        if status != 0:
            said = untrusted.lines(out.strip())[-1] if out.strip() else "put64 failed"
            raise OSError(errno.EIO, said, " ".join(pairs[::2]))

    def _write_chunked(self, path: str, encoded: str) -> None:
        partial = path + ".part"
        self._call("remove", partial)
        for i in range(0, len(encoded), self.CHUNK):
            self._must("append64", partial, encoded[i : i + self.CHUNK])
        self._must("rename", partial, path)

    def remove(self, path: str) -> None:
        self._must("remove", path)

    def mkdir(self, path: str) -> None:
        self._must("mkdir", path)

    def rmdir(self, path: str) -> None:
        self._must("rmdir", path)

    def describe(self, path: str) -> str:
        return f"{path} on {self.target.name}"


def _dumped(out: str) -> dict[str, str | None]:
    """What `file dump` printed: `F PATH` and its bytes in base64 on the lines after it, or
    `U PATH`. A file whose base64 does not decode is left out, as is a path that is not one."""
    records: list[tuple[str, str, list[str]]] = []
    for line in out.split("\n"):
        kind, _, path = line.partition(" ")
        if kind in ("F", "U") and path.startswith("/"):
            records.append((kind, path, []))
        elif records and untrusted.BASE64_LINE.match(line):  # not a kernel message on a console
            records[-1][2].append(line)
    found: dict[str, str | None] = {}
    for kind, path, lines in records:
        if untrusted.printable(path) != path:
            continue
        if kind == "U":
            found[path] = None
            continue
        try:
            data = base64.b64decode("".join(lines), validate=True)
        except binascii.Error:
            continue
        found[path] = data.decode(errors="replace").rstrip("\n")
    return found


def exactly(path: str) -> str:
    """A glob pattern that matches PATH alone (its *, ?, [ and \\ each in brackets)."""
    return re.sub(r"([*?\[\\])", r"[\1]", path)


def _matches(pattern: str, path: str) -> bool:
    """Whether the shell's pathname expansion of PATTERN can give PATH: part by part, `*` never
    crossing a `/` nor matching a leading dot."""
    wants, parts = pattern.strip("/").split("/"), path.strip("/").split("/")
    return len(wants) == len(parts) and all(map(_part_matches, wants, parts))


def _part_matches(want: str, part: str) -> bool:
    return fnmatch.fnmatchcase(part, want) and (want.startswith(".") or not part.startswith("."))


def _within(query: str, pattern: str) -> bool:
    """Whether all that QUERY (a path or a glob pattern) can match, PATTERN matches too: part
    by part, the same pattern, or a plain name PATTERN's part matches."""
    asked, wants = query.strip("/").split("/"), pattern.strip("/").split("/")
    return len(asked) == len(wants) and all(
        a == w or (not _GLOB.search(a) and _part_matches(w, a)) for a, w in zip(asked, wants, strict=True)
    )


class Snapshot:
    """The files PATTERNS match on a target, read in one call (read_all), answering read,
    glob and exists for them; anything else, and every change, goes to the target. A planner's
    view: tuning reads a file per CPU, interrupt and knob, each a shell on the target (47 for
    a 2-CPU guest's plan, 0.08 s each over SSH to an emulated board and more to a real one
    across a network) where one call reads them all. A file changed through it is read anew."""

    def __init__(self, inner: Files, patterns: list[str]):
        self.inner = inner
        self.patterns = [p.strip("/") for p in patterns]
        try:
            self.found = inner.read_all(patterns)
        except OSError:  # the call failed (a console's timeout): every read goes to the target
            self.found, self.patterns = {}, []

    def _covered(self, query: str) -> bool:
        return any(_within(query, p) for p in self.patterns)

    def read(self, path: str) -> str | None:
        path = "/" + path.lstrip("/")
        if path in self.found:
            return self.found[path]
        return None if self._covered(path) else self.inner.read(path)

    def glob(self, pattern: str) -> list[str]:
        if self._covered(pattern):
            return sorted(p for p in self.found if _matches(pattern, p))
        return self.inner.glob(pattern)

    def exists(self, path: str) -> bool:
        if "/" + path.lstrip("/") in self.found:
            return True
        return False if self._covered(path) else self.inner.exists(path)

    def read_all(self, patterns: list[str]) -> dict[str, str | None]:
        return self.inner.read_all(patterns)

    def _changed(self, path: str) -> None:
        self.found.pop("/" + path.lstrip("/"), None)
        self.patterns = [p for p in self.patterns if not _within(path, p)]

    def _forget(self) -> None:  # a folder made or removed: what is in it has changed
        self.found.clear()
        self.patterns = []

    def write(self, path: str, value: str) -> None:
        self._changed(path)
        self.inner.write(path, value)

    def write_text(self, path: str, text: str) -> None:
        self._changed(path)
        self.inner.write_text(path, text)

    def remove(self, path: str) -> None:
        self._changed(path)
        self.inner.remove(path)

    def mkdir(self, path: str) -> None:
        self._forget()
        self.inner.mkdir(path)

    def rmdir(self, path: str) -> None:
        self._forget()
        self.inner.rmdir(path)

    def describe(self, path: str) -> str:
        return self.inner.describe(path)
