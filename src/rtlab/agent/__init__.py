"""The POSIX sh agent that runs on every target (see agent.sh)."""

from importlib import resources
from pathlib import Path


def script_path() -> Path:
    return Path(str(resources.files(__name__) / "agent.sh"))
