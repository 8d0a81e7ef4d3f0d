"""/proc and /sys of a target, for tuning: read and written locally under a root path
(the real one, or a fake tree made by tests) or through the agent on any other target.
"""

from __future__ import annotations

import base64
import errno
import os
from pathlib import Path
from typing import Protocol

from rtlab.boundary import untrusted
from rtlab.rundir.disk import write_atomic


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
