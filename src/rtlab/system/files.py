"""/proc and /sys under a root path: the real one, or a fake tree made by tests."""

from __future__ import annotations

import os
from pathlib import Path


class Root:
    def __init__(self, root: Path | str | None = None):
        self.root = Path(root if root is not None else os.environ.get("RTLAB_ROOT") or "/")

    def path(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def read(self, path: str) -> str | None:
        """The file's text without its trailing newline; None when it is missing or unreadable."""
        try:
            return self.path(path).read_text(errors="replace").rstrip("\n")
        except OSError:
            return None

    def write(self, path: str, value: str) -> None:
        """Writes like `echo value > path` (one write, as sysfs wants)."""
        with self.path(path).open("w") as f:
            f.write(value + "\n")

    def glob(self, pattern: str) -> list[str]:
        """Absolute target paths (as the kernel names them) matching `pattern`."""
        base = self.root
        return sorted("/" + str(p.relative_to(base)) for p in base.glob(pattern.lstrip("/")))

    def exists(self, path: str) -> bool:
        return self.path(path).exists()
