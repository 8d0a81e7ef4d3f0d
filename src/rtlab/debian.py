"""Debian packages (for guests, and the 6.12 source package for kernel builds), fetched with
apt into rtlab's cache.

Each (release, architecture) gets an apt configuration directory of its own, with
an empty package database, so a foreign architecture (riscv64 from trixie) is
fetched without touching the host's apt. Packages are verified by apt against
Debian's archive keyring, downloaded once and never rebuilt per run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rtlab import children
from rtlab.boundary import paths, untrusted
from rtlab.cache import writing
from rtlab.errors import UsageError

KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
DEFAULT_MIRROR = "http://deb.debian.org/debian"


def host_mirror() -> str:
    """The Debian mirror the host's apt already uses (so a local proxy or mirror keeps working)."""
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        for uri in re.findall(r"(?:URIs:\s*|^deb\s+(?:\[[^\]]*\]\s+)?)(\S+/debian)/?\s", _read(path), re.M):
            return str(uri)
    return DEFAULT_MIRROR


def host_deb_src_files() -> tuple[tuple[str, str], ...]:
    """The host's Debian apt sources as deb-src entries: the same mirrors and suites (security too)."""
    debian = re.compile(r"\S+/debian(-security)?/?(\s|$)")
    one_line, deb822 = [], []
    lists = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*.list"))]
    for path in lists:
        for line in untrusted.lines(_read(path)):
            if line.startswith("deb ") and debian.search(line):
                one_line.append("deb-src " + line[4:] + "\n")
    for path in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for stanza in re.split(r"\n\s*\n", _read(path)):
            uris = re.search(r"^URIs:(.*)$", stanza, re.M)
            if uris and debian.search(uris.group(1).strip()):
                deb822.append(re.sub(r"^Types:.*$", "Types: deb-src", stanza.strip(), flags=re.M) + "\n")
    files = (("host.list", "".join(one_line)), ("host.sources", "\n".join(deb822)))
    return tuple((name, text) for name, text in files if text)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _run(argv: list[str], cwd: Path | None = None) -> str:
    done = children.run(argv, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        tail = untrusted.lines((done.stderr or done.stdout).strip())[-3:]
        # the tool and its command (apt-get update, apt-helper download-file), not its -o options
        words = [a for a in argv[1:] if not a.startswith("-") and "=" not in a][:1]
        raise UsageError(f"{' '.join([Path(argv[0]).name, *words])} failed: {' / '.join(tail)}")
    return done.stdout


UPDATE_TRIES = 3
UPDATE_PAUSE_S = 15
# apt-cache's answers are kept (Apt._ask) up to this size, far over any depends or show
ANSWER_BYTES = 1 << 20


@dataclass(frozen=True)
class Apt:
    """apt for one Debian release and architecture, confined to a folder of the cache."""

    root: Path
    release: str
    arch: str
    mirror: str = DEFAULT_MIRROR
    # (file name, text) for sources.list.d, instead of one release of `mirror`
    sources: tuple[tuple[str, str], ...] = ()
    suites: tuple[str, ...] = ()  # more suites of `mirror` beside `release` (backports)

    @classmethod
    def for_guest(cls, cache: Path, release: str, arch: str, suites: tuple[str, ...] = ()) -> Apt:
        for tool in ("apt-get", "dpkg-deb"):
            if shutil.which(tool) is None:
                raise UsageError(
                    f"{tool} is missing: QEMU targets fetch Debian packages with apt (Debian/Ubuntu hosts)"
                )
        return cls(cache / "apt" / f"{release}-{arch}", release, arch, host_mirror(), suites=suites)

    @classmethod
    def first_verified(
        cls, cache: Path, releases: tuple[str, ...], arch: str, suites: tuple[str, ...] = ()
    ) -> Apt:
        """apt for the first of `releases` whose index for `arch` apt verifies: one updated
        before is taken as it is; one that fails is asked once (a damaged index stays damaged
        for days, a mirror in sync for minutes) and the next tried."""
        failed = []
        for release in releases:
            apt = cls.for_guest(cache, release, arch, suites if release == releases[0] else ())
            if apt.updated():
                return apt
        for release in releases:
            apt = cls.for_guest(cache, release, arch, suites if release == releases[0] else ())
            try:
                apt.update(tries=1)
                return apt
            except UsageError as e:
                failed.append(f"{release}: {e}")
        raise UsageError(
            f"no Debian release of {', '.join(releases)} has a {arch} index apt verifies "
            f"({'; '.join(failed)}): try again later, or another mirror in /etc/apt/sources.list"
        )

    @classmethod
    def for_host_sources(cls, cache: Path) -> Apt:
        """apt over the host's mirrors and suites, for source packages only."""
        arch = _run(["dpkg", "--print-architecture"]).strip()
        return cls(cache / "apt" / "host-sources", "host", arch, sources=host_deb_src_files())

    def options(self) -> list[str]:
        r = self.root
        return [
            "-o", f"Dir={r}",
            "-o", f"Dir::State::status={r}/var/lib/dpkg/status",
            "-o", "Dir::Bin::Methods=/usr/lib/apt/methods",
            "-o", f"APT::Architecture={self.arch}",
            "-o", f"APT::Architectures={self.arch}",
            "-o", "APT::Install-Recommends=false",
            "-o", "Acquire::Languages=none",
            "-o", "Debug::NoLocking=true",
            "-o", "APT::Sandbox::User=root",
            "-o", "Acquire::Retries=3",  # a download cut short is fetched again
        ]  # fmt: skip

    def _listed(self) -> str:
        if self.sources:
            return ""
        return "".join(
            f"deb [arch={self.arch} signed-by={KEYRING}] {self.mirror} {suite} main\n"
            for suite in (self.release, *self.suites)
        )

    def updated(self) -> bool:
        """Whether apt has verified this release's index here before (for the same sources)."""
        sources_list = self.root / "etc/apt/sources.list"
        lists = self.root / "var/lib/apt/lists"
        same = sources_list.is_file() and sources_list.read_text() == self._listed()
        return same and any(lists.glob("*_Sources*" if self.sources else "*_Packages*"))

    def update(self, force: bool = False, tries: int = UPDATE_TRIES) -> None:
        lists = self.root / "var/lib/apt/lists"
        listed = self._listed()
        sources_list = self.root / "etc/apt/sources.list"
        if not force and self.updated():
            return
        (self.root / "etc/apt/apt.conf.d").mkdir(parents=True, exist_ok=True)
        (self.root / "etc/apt/preferences.d").mkdir(parents=True, exist_ok=True)
        (self.root / "var/lib/dpkg").mkdir(parents=True, exist_ok=True)
        (self.root / "var/lib/dpkg/status").touch()
        (self.root / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)
        lists.joinpath("partial").mkdir(parents=True, exist_ok=True)
        sources_list.write_text(listed)
        (self.root / "etc/apt/sources.list.d").mkdir(exist_ok=True)
        for name, text in self.sources:
            (self.root / "etc/apt/sources.list.d" / name).write_text(text)
        # A mirror being synced serves index files that disagree for a while ("Hash Sum
        # mismatch", "Some index files failed to download"): asked again a little later.
        for attempt in range(1, tries + 1):
            try:
                _run(["apt-get", *self.options(), "update"])
                return
            except UsageError:
                if attempt == tries:
                    raise
                time.sleep(UPDATE_PAUSE_S * attempt)

    def _ask(self, *question: str, fresh: bool = False) -> str:
        """What `apt-cache QUESTION` says, kept beside the index it read (FRESH: asked anew).
        apt-cache parses the whole index for every question (half a CPU-second each here; a
        guest's start asks two to four), and its answer changes only with the index: the
        answers live in a folder named after the index files' names, sizes and times, so an
        update (or a damaged index put back) leaves them behind, and they go once another
        index is asked. A kept answer is read back as any outside file (no link anywhere
        below the apt folder, a cap); where a link lies on the way, nothing is kept or
        removed."""
        answers = self.root / "var/cache/rtlab-answers"
        folder = answers / self._index_state()
        path = folder / hashlib.sha256("\0".join(question).encode()).hexdigest()
        if not fresh:
            with contextlib.suppress(OSError, untrusted.Damaged):  # none kept, or unreadable: asked
                return untrusted.read_text(path, ANSWER_BYTES, root=self.root)
        out = _run(["apt-cache", *self.options(), *question])
        if paths.link_along(self.root, folder) is not None or len(out.encode()) > ANSWER_BYTES:
            return out
        # a second rtlab may be reading or clearing the same folder: an answer not kept is
        # only asked again
        with contextlib.suppress(OSError):
            for old in answers.glob("*"):  # none yet: an empty list
                if old != folder:
                    shutil.rmtree(old, ignore_errors=True)  # a link among them: refused, left
            with writing(path) as part:
                part.write_text(out)
        return out

    def _index_state(self) -> str:
        """A name for the index apt-cache reads: its files' names, sizes, times and inodes (apt
        gives a file the archive's time and replaces it whole), and the sources list's."""
        lists = self.root / "var/lib/apt/lists"
        files = [self.root / "etc/apt/sources.list", self.root / "var/lib/dpkg/status"]
        with contextlib.suppress(OSError):
            files += sorted(path for path in lists.iterdir() if path.is_file())
        state = []
        for path in files:
            with contextlib.suppress(OSError):
                stat = path.stat()
                state.append([path.name, stat.st_size, stat.st_mtime_ns, stat.st_ino])
        return hashlib.sha256(json.dumps(state).encode()).hexdigest()[:32]

    def depends_on(self, package: str, prefix: str) -> str:
        """The package a metapackage points to, e.g. linux-image-rt-amd64 -> linux-image-6.1.0-28-rt-amd64.
        It becomes a folder of the cache: a kept answer that names no package (a cache
        someone wrote in) is asked of apt-cache anew."""
        for fresh in (False, True):
            out = self._ask("depends", package, fresh=fresh)
            named = [name for name in re.findall(r"Depends:\s*(\S+)", out) if name.startswith(prefix)]
            if named and paths.is_component(named[0]):
                return str(named[0])
        if named:
            shown = untrusted.printable(named[0])[:60]
            raise UsageError(f"apt-cache names {shown!r} as {package}'s {prefix}*: not a package name")
        raise UsageError(f"{package} has no {prefix}* dependency in Debian {self.release}/{self.arch}")

    def depends(self, package: str) -> list[str]:
        """The packages `package` depends on, by name."""
        out = self._ask("depends", package)
        return [str(name) for name in re.findall(r"^\s*\|?(?:Pre)?Depends:\s*(\S+)", out, re.M)]

    def version(self, package: str) -> str:
        out = self._ask("show", "--no-all-versions", package)
        match = re.search(r"^Version:\s*(\S+)", out, re.M)
        return match.group(1) if match else "unknown"

    def source_file(self, package: str, version: str, suffix: str) -> tuple[str, str, str]:
        """(URI, file name, "SHA256:...") of one file of a source package, from apt's signed index."""
        out = _run(["apt-get", *self.options(), "--print-uris", "source", f"{package}={version}"])
        for uri, name, _size, digest in re.findall(r"^'(\S+)' (\S+) (\d+) (\S+)$", out, re.M):
            if name.endswith(suffix):
                return uri, name, digest
        raise UsageError(f"Debian's {package} {version} source has no *{suffix}")

    def fetch(self, uri: str, into: Path, digest: str) -> None:
        """One file with apt's own downloader, checked against `digest` (e.g. from source_file)."""
        _run(["/usr/lib/apt/apt-helper", *self.options(), "download-file", uri, str(into), digest])

    def download(self, packages: list[str], into: Path) -> list[Path]:
        """The .deb files of `packages` (no dependencies) as apt fetched them this time, in
        INTO (see _fetch): never another .deb that lies there."""
        return self._fetch(["download", *packages], into)

    def download_with_dependencies(self, packages: list[str]) -> list[Path]:
        """The .deb files of `packages` and everything they depend on (not what they recommend),
        as apt fetched them this time (see _fetch)."""
        command = ["install", "--download-only", "-y", "-q", *packages]
        return self._fetch(command, self.root / "var/cache/apt/archives")

    def _fetch(self, command: list[str], into: Path) -> list[Path]:
        """What `apt-get COMMAND` fetches, into a folder of its own beside INTO, each file then
        checked (apt's exit status, the size and checksum apt's signed index gives for it,
        --print-uris) and moved into INTO whole. A .deb cut short (a kill, a full disk, an
        rtlab that downloaded in place) or one of another fetch that lies in INTO is neither
        resumed nor unpacked: only the files this fetch checked are returned."""
        into.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=into, prefix=".fetching-") as folder:
            fresh = Path(folder)
            (fresh / "partial").mkdir()  # apt's own for what it is fetching
            argv = ["apt-get", *self.options(), "-o", f"Dir::Cache::Archives={fresh}", *command]
            listed = _run([*argv, "--print-uris"], cwd=fresh)
            wanted = re.findall(r"^'\S+' (\S+\.deb) (\d+) (\S*)$", listed, re.M)
            _run(argv, cwd=fresh)
            for name, size, digest in wanted:
                _check(fresh / name, int(size), digest)
            found = []
            for name, _size, _digest in wanted:
                os.replace(fresh / name, into / name)
                found.append(into / name)
        return sorted(found)


# apt's names of the checksums it gives (--print-uris), as hashlib names them
_HASHES = {"SHA512": "sha512", "SHA256": "sha256", "SHA1": "sha1", "MD5Sum": "md5"}


def _check(path: Path, size: int, digest: str) -> None:
    """PATH is the package apt's index describes: its size, and its checksum where apt gives
    one; UsageError in one line when it is not (rtlab run again fetches it anew)."""
    what = f"{path.name} as apt fetched it"
    if not path.is_file() or path.is_symlink():
        raise UsageError(f"{what} is missing, though apt-get said it fetched it: run rtlab again")
    if path.stat().st_size != size:
        raise UsageError(
            f"{what} has {path.stat().st_size} bytes, not the {size} of Debian's index: run rtlab again"
        )
    kind, _, expected = digest.partition(":")
    if kind in _HASHES and expected:
        with path.open("rb") as f:
            got = hashlib.file_digest(f, _HASHES[kind]).hexdigest()
        if got != expected.lower():
            raise UsageError(f"{what} does not have the {kind} of Debian's index: run rtlab again")


def extract(debs: list[Path], into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    for deb in debs:
        _run(["dpkg-deb", "-x", str(deb), str(into)])
