"""What a target, a log or a server sends, read with bounds: the one place for documents and
strings that cross the trust boundary (archives have unpack.py beside it).

A board runs experimental kernels and a farm is shared, so a file, a JSON or YAML document or
a line of text from one is hostile until checked: files are read without following links and
only up to a size named for them, documents are parsed with bounds on nesting, aliases and
integer digits, a parse error is one "damaged X: why" line (never a traceback), and every
string is made printable before it reaches a terminal, Markdown or CSV (JSON keeps it, escaped).
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:  # numpy is imported where an array is read: every command reads this module
    import numpy as np
    import numpy.typing as npt

MIB = 1 << 20
# A run's JSON documents are small (sysinfo, run.json: kB); cyclictest's is the largest: one
# "µs": count pair (up to 20 bytes) per histogram microsecond per CPU, 1 s x 1,000 CPUs at most.
DOCUMENT_BYTES = 16 * MIB
RESULT_BYTES = 512 * MIB
# What rtlab reads of a run's files at most: a load's log (a command's output over a soak) and
# one trace capture (the agent's 2 MB ring buffer per CPU printed as text is about 20 MB).
LOG_BYTES = 64 << 20
TRACE_BYTES = 32 << 20
MAX_DEPTH = 64  # cyclictest's JSON nests 4 deep, run.json 5, a LAVA log entry 4
MAX_INT_DIGITS = 40  # far above any count, µs or size; Python refuses 4,300 with a traceback
MAX_ALIASES = 16  # LAVA's logs use none; "billion laughs" needs many
# a line of base64 as a target sends it over a console (a load's archive, a dumped file):
# anything else on that console (a kernel message) is no part of it
BASE64_LINE = re.compile(r"^[A-Za-z0-9+/=]+$")


class Damaged(ValueError):
    """A file or document that cannot be used as it is: the message is one line saying why."""


# --- files -----------------------------------------------------------------------------------


def read_bytes(path: Path, cap: int, what: str | None = None, root: Path | None = None) -> bytes:
    """PATH's bytes if it is a regular file (not a link) of at most CAP bytes; else Damaged.
    With ROOT (a run folder), no part of PATH below ROOT may be a link either."""
    name = what or path.name
    try:
        if root is not None:
            fd = open_below(root, path)
        else:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        if e.errno == errno.ELOOP:  # O_NOFOLLOW met a link
            raise Damaged(f"{name} is a link: rtlab reads no links from a target") from None
        raise Damaged(f"{name} cannot be read: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise Damaged(f"{name} is not a regular file")
        if info.st_size > cap:
            raise Damaged(f"{name} has {info.st_size} bytes, more than the {cap} a run's file may hold")
        data = read_at_most(f, cap + 1)
    if len(data) > cap:  # grew while read
        raise Damaged(f"{name} has more than the {cap} bytes a run's file may hold")
    return data


def read_at_most(f: Any, limit: int) -> bytes:
    """Up to LIMIT bytes of the file object F, in chunks: read(LIMIT) would reserve all of
    LIMIT at once (512 MB for a cap of 512 MB, whatever the file holds)."""
    chunks, total = [], 0
    while total < limit and (chunk := f.read(min(1 << 20, limit - total))):
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def read_text(
    path: Path, cap: int = DOCUMENT_BYTES, what: str | None = None, root: Path | None = None
) -> str:
    return read_bytes(path, cap, what, root).decode("utf-8", errors="replace")


def read_tail(path: Path, limit: int, root: Path) -> bytes:
    """The whole lines in the last LIMIT bytes of PATH (all of it when it holds fewer), a
    regular file below ROOT reached without a link: where a tool says how it ended, whatever
    it printed before. A line cut by the limit is left out: its end is not what it said."""
    try:
        fd = open_below(root, path)
    except OSError as e:
        raise Damaged(f"{path.name} cannot be read: {e.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # before fdopen, which refuses a folder with IsADirectoryError
        os.close(fd)
        raise Damaged(f"{path.name} is not a regular file")
    start = max(0, info.st_size - limit)
    with os.fdopen(fd, "rb") as f:
        if start == 0:
            return read_at_most(f, limit)
        f.seek(start - 1)  # from the byte before: a line that begins at START is whole
        return read_at_most(f, limit + 1).partition(b"\n")[2]


def tail_text(path: Path, limit: int, root: Path) -> str:
    """read_tail's lines as text; "" where PATH is no file to read (missing, a link, a FIFO)."""
    try:
        return read_tail(path, limit, root).decode(errors="replace")
    except Damaged:
        return ""


def open_below(root: Path, path: Path) -> int:
    """A read-only descriptor of PATH, walked from ROOT one component at a time without
    following a link anywhere (openat with O_NOFOLLOW): Damaged naming the link, or OSError."""
    parts = path.relative_to(root).parts
    if not parts or any(p in ("..", ".") for p in parts):
        raise Damaged(f"{path} is not a file of {root}")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            flags = os.O_RDONLY | os.O_NOFOLLOW | (os.O_NONBLOCK if last else os.O_DIRECTORY)
            try:
                child = os.open(part, flags, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(fd, part):
                    where = "/".join(parts[: i + 1])
                    raise Damaged(f"{where} is a link: rtlab reads no links in a run") from None
                raise
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


# --- documents -------------------------------------------------------------------------------


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise Damaged(f"an integer of {len(text)} digits")
    return int(text)


def _float(text: str) -> float:
    if len(text) > 2 * MAX_INT_DIGITS:
        raise Damaged(f"a number of {len(text)} characters")
    value = float(text)
    if not math.isfinite(value):
        raise Damaged(f"{text} is not a finite number")
    return value


def _constant(text: str) -> Any:
    raise Damaged(f"{text} is not a number JSON allows")


def _depth(value: Any, limit: int) -> int:
    """The nesting of VALUE, stopping once it is beyond LIMIT."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            if deepest > limit:
                break
            todo.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


_WHOLE = rf"(?:-?[0-9]{{1,{MAX_INT_DIGITS}}}|null)"
_WHOLE_LIST = re.compile(rf"\[\s*(?:{_WHOLE}(?:\s*,\s*{_WHOLE})*)?\s*\]")


def whole_numbers(text: str, what: str) -> list[int | None]:
    """A flat JSON list of bounded whole numbers (or null), as the history store keeps
    histograms and maxima: its shape checked in one pass, then read. Nothing nested and no
    huge number gets through, at a fraction of json_loads' cost per number (a trend of a
    lab's years reads millions)."""
    if not _WHOLE_LIST.fullmatch(text):
        raise Damaged(f"damaged {what}: not a list of whole numbers")
    found: list[int | None] = json.loads(text)
    return found


# A histogram's list as the store writes it (json.dumps: "[1, 2, 3]"), numbers of at most 18
# digits (int64 holds them): read by numpy once this has matched.
_STORE_NUMBER = r"-?[0-9]{1,18}"
_STORE_LIST = re.compile(rf"\[(?:{_STORE_NUMBER}(?:, {_STORE_NUMBER})*)?\]")


def whole_number_array(text: str, what: str) -> npt.NDArray[np.int64]:
    """A flat list of whole numbers without null (a histogram's values or counts) as int64.
    The store's own spelling is matched in one pass and read by numpy in another (a trend of a
    lab's years reads tens of thousands of lists: this is under half of whole_numbers' cost);
    any other is read as whole_numbers reads it. Damaged when it is not such a list."""
    import numpy as np

    if _STORE_LIST.fullmatch(text):
        if len(text) == 2:
            return np.zeros(0, dtype=np.int64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # np.fromstring's text mode
            return np.fromstring(text[1:-1], dtype=np.int64, sep=",")
    found = whole_numbers(text, what)
    if any(v is None or abs(v) >= 10**18 for v in found):
        raise Damaged(f"damaged {what}: not a list of whole numbers of at most 18 digits")
    return np.asarray(found, dtype=np.int64)


def json_loads(text: str | bytes, what: str, depth: int = MAX_DEPTH) -> Any:
    """A JSON document with bounded numbers and nesting; Damaged("damaged WHAT: why") else."""
    try:
        data = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except Damaged as e:
        raise Damaged(f"damaged {what}: {e}") from None
    except RecursionError:
        raise Damaged(f"damaged {what}: nested deeper than {depth} levels") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise Damaged(f"damaged {what}: {printable(str(e))[:120]}") from None
    if _depth(data, depth) > depth:
        raise Damaged(f"damaged {what}: nested deeper than {depth} levels")
    return data


def json_file(
    path: Path, what: str | None = None, cap: int = DOCUMENT_BYTES, root: Path | None = None
) -> Any:
    name = what or path.name
    return json_loads(read_bytes(path, cap, name, root), name)


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader with a bound on aliases (each one can stand for a whole tree) and
    on nesting (its composer recurses once per level)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.aliases = 0
        self.depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise Damaged(f"more than {MAX_ALIASES} aliases")
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise Damaged(f"nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def yaml_loads(text: str, what: str) -> Any:
    """A YAML document with bounded aliases and nesting, safe tags only; Damaged else."""
    try:  # the reader refuses characters YAML does not allow (a NUL) as it is made
        loader = _BoundedLoader(text)
    except yaml.YAMLError as e:
        raise Damaged(f"damaged {what}: {printable(str(e))[:120]}") from None
    try:
        return loader.get_single_data()
    except Damaged as e:
        raise Damaged(f"damaged {what}: {e}") from None
    except (yaml.YAMLError, RecursionError, ValueError) as e:
        raise Damaged(f"damaged {what}: {printable(str(e))[:120]}") from None
    finally:
        loader.dispose()


# --- strings ---------------------------------------------------------------------------------

# What a reader cannot see or that changes what the rest of a line looks like, whichever format
# it ends up in: the line and paragraph separators (a line break to str.splitlines, YAML and
# JavaScript) and every format character (Unicode's Cf, as unicodedata 14.0 to 15.1 have
# them): the bidirectional overrides that reorder what a reader sees, and the invisible ones
# (zero-width spaces and joiners, the soft hyphen, the byte-order mark, the tag characters)
# that would hide words in a line that looks whole. One class for every escaper: printable and
# one_line here, report/escape.py's XML and JSON.
INVISIBLE = (
    "\u2028\u2029"
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
# C0 and C1 controls (ESC starts a terminal's escape sequences: screen clears, clipboard
# writes, links) and DEL, with the above.
_CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{INVISIBLE}]")
_LINE_BREAKS = re.compile("[\t\n]")
# What may not stand inside one line of events or a log: all of the above, tab and newline
# too. Every line break str.splitlines knows is among them (\n \r \x0b \x0c \x1c-\x1e \x85
# \u2028 \u2029), so no reader, however it splits, sees two lines where one was written.
_NOT_IN_A_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{INVISIBLE}]")


def printable(text: str, lines: bool = False) -> str:
    """TEXT without control characters, each replaced by '?'; tabs and newlines become spaces
    unless LINES keeps them."""
    cleaned = _CONTROL.sub("?", text)
    return cleaned if lines else _LINE_BREAKS.sub(" ", cleaned)


def escaped(char: str) -> str:
    """CHAR written as its escape, as Python reads it back: \\x1b, \\u2028, \\U000e0041 (eight
    digits beyond the first plane, so no digit after it is taken for part of it)."""
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def one_line(text: str) -> str:
    """TEXT as one line of events or a log: each control character and line break written as
    its escape (\\x1b, \\u2028), so what a board said stays visible and cannot end the line
    rtlab writes (a "@rtlab done status=complete" after a U+2028 would be a line of its own to
    str.splitlines). Every writer of events and log lines goes through this; nothing it
    returns changes when passed through it again."""
    return _NOT_IN_A_LINE.sub(lambda found: escaped(found[0]), text)


def each_one_line(text: str) -> str:
    """TEXT of several lines (a note, a log's message) with each line made one_line: its
    "\\n" kept, every other break and control character escaped."""
    return "\n".join(map(one_line, text.split("\n")))


def lines(text: str) -> list[str]:
    """TEXT's lines as rtlab wrote them, split at "\\n" only (a "\\r" before it dropped):
    str.splitlines also splits at U+2028, U+0085, VT, FF, FS, GS, RS and a lone CR, which
    a board can put inside what it sends to make one line read as two. A newline at the
    end starts no further line, as with splitlines."""
    found = [line.removesuffix("\r") for line in text.split("\n")]
    if found[-1] == "":
        found.pop()
    return found


def printable_tree(value: Any) -> Any:
    """VALUE (JSON-like) with every string, keys included, made printable (newlines kept)."""
    if isinstance(value, str):
        return printable(value, lines=True)
    if isinstance(value, dict):
        return {printable_tree(k): printable_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [printable_tree(v) for v in value]
    return value
