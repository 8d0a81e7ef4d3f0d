"""The git side of a bisection: the range in order, a worktree of rtlab's own (the user's
checkout is never touched), in which the prepare command runs (measured.prepare)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from rtlab import children
from rtlab.boundary.untrusted import lines, printable
from rtlab.errors import UsageError


@dataclass(frozen=True)
class Revision:
    sha: str
    subject: str  # printable, one line

    @property
    def short(self) -> str:
        return self.sha[:12]


def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        done = children.run(["git", "-C", str(repo), *args], capture_output=True, text=True, errors="replace")
    except FileNotFoundError:
        raise UsageError("rtlab bisect needs git: apt-get install git") from None
    if check and done.returncode != 0:
        said = printable(lines(done.stderr.strip())[-1] if done.stderr.strip() else "", lines=False)
        raise UsageError(f"git {args[0]} in {repo} failed: {said}")
    return done


def commit(repo: Path, rev: str, option: str) -> str:
    """REV as a full commit id, or one line naming the option that gave it."""
    if _git(repo, "rev-parse", "--git-dir", check=False).returncode != 0:
        raise UsageError(f"--repo {repo} is not a git tree: give the tree the revisions are in")
    found = _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
    if found.returncode != 0:
        raise UsageError(
            f"{option} {printable(rev)!r} is not a commit of {repo}: give a commit, tag or branch"
        )
    return found.stdout.strip()


def between(repo: Path, good: str, bad: str) -> list[Revision]:
    """GOOD, then every revision on BAD's first-parent line after it, up to BAD: the order of
    the search. A merge is one step (it brought its branch in)."""
    if good == bad:
        raise UsageError("--good and --bad are the same commit: give a bad one that came after the good")
    if _git(repo, "merge-base", "--is-ancestor", good, bad, check=False).returncode != 0:
        raise UsageError("--good is not an ancestor of --bad: give a good revision that bad descends from")
    listed = _git(
        repo, "log", "--first-parent", "--reverse", "--format=%H%x00%P%x00%s", f"{good}..{bad}"
    ).stdout
    rows = [line.split("\0") for line in lines(listed) if line]
    if not rows or (rows[0][1].split() or [""])[0] != good:
        raise UsageError(
            "--good is not on --bad's first-parent line (it came in through a merge): give the merge's "
            "parent on that line as --good"
        )
    subject = _git(repo, "log", "-1", "--format=%s", good).stdout.strip()
    return [Revision(good, printable(subject, lines=False))] + [
        Revision(sha, printable(text, lines=False)) for sha, _, text in rows
    ]


class Worktree:
    """One worktree of the repository, in the bisection's folder, moved from revision to
    revision (checkout --force, no clean: what a build left there is reused, as an
    incremental build expects)."""

    def __init__(self, repo: Path, path: Path) -> None:
        self.repo, self.path = repo, path

    def checkout(self, sha: str) -> None:
        if not (self.path / ".git").exists():
            if self.path.exists():
                raise UsageError(f"{self.path} is in the way of the bisection's worktree: move it aside")
            _git(self.repo, "worktree", "add", "--detach", "--force", str(self.path), sha)
        _git(self.path, "checkout", "--quiet", "--detach", "--force", sha)

    def remove(self) -> bool:
        """The worktree removed and unregistered (forced: what a build left in it goes too);
        whether there was one."""
        there = (self.path / ".git").exists()
        if there:
            _git(self.repo, "worktree", "remove", "--force", str(self.path), check=False)
        _git(self.repo, "worktree", "prune", check=False)
        return there
