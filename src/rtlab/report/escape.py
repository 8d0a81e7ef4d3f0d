"""Every output format's escaping, in one place: one function per format.

A run's strings (its id, load names, failure reasons, warnings, what the board reported about
itself) are a target's words, so in every format they are data: a spreadsheet never evaluates
them, a browser never runs them, a Markdown table keeps its columns, a CI server parses the
XML, and a terminal neither obeys an escape sequence nor reads console markup in them. Each
renderer passes outside text through its format's function here and nowhere else, so a fix to
one format's escaping is made once and holds for every report, comparison and table.

Control characters become '?' as everywhere in rtlab (untrusted.printable); so do lone
surrogates, which a board can send as a JSON "\\ud800" escape and which no UTF-8 output can
encode (the report would stop with a traceback). XML and JSON write them as escapes instead:
the first so a CI log still shows what it was, the second so the document reads back as it
was written.
"""

from __future__ import annotations

import html as _html
import json as _json
import re
from typing import Any
from xml.etree import ElementTree
from xml.sax.saxutils import escape as _xml_escape
from xml.sax.saxutils import quoteattr

from jinja2 import Environment, PackageLoader
from markupsafe import Markup
from rich.text import Text

from rtlab.boundary.untrusted import INVISIBLE, escaped, printable

_SURROGATE = re.compile("[\ud800-\udfff]")


def plain(text: object, lines: bool = False) -> str:
    """TEXT without control characters, line separators, bidirectional overrides or lone
    surrogates, each a '?'; tabs and newlines become spaces unless LINES keeps them."""
    return _SURROGATE.sub("?", printable(str(text), lines=lines))


def plain_tree(value: Any) -> Any:
    """VALUE (JSON-like: a summary) with every string, keys included, made plain (newlines
    kept): what every format but JSON reads, figures included (matplotlib cannot lay out a
    lone surrogate and stops with a traceback)."""
    if isinstance(value, str):
        return plain(value, lines=True)
    if isinstance(value, dict):
        return {plain_tree(k): plain_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_tree(v) for v in value]
    return value


# --- CSV ---------------------------------------------------------------------------------

# A cell a spreadsheet would read as a formula ("=HYPERLINK(...)", "@SUM(...)", "-2+3" in a
# run id or a load's failure reason, which a board or a copied folder can set) is written
# with a single quote before it, as OWASP advises: shown as text, never evaluated. A cell made
# printable keeps its tabs and newlines, and an import that trims white space would bring a
# formula after them back: the first character after white space counts too. Numbers stay
# numbers: only strings are quoted, and a string that is just a decimal number (a time
# written with its decimals, -1.500) is no formula.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # OWASP's list
_DECIMAL = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")


def csv(value: object) -> object:
    """VALUE as a CSV cell a spreadsheet shows and never evaluates. A string is made printable
    first, whichever writer it reaches: a CR, which Python's csv leaves unquoted when lines end
    in LF, would split the row where a spreadsheet reads it."""
    if not isinstance(value, str):
        return value
    value = plain(value, lines=True)
    if _DECIMAL.fullmatch(value):
        return value
    if value.startswith(_FORMULA_START) or value.lstrip().startswith(_FORMULA_START):
        return "'" + value
    return value


# --- Markdown ----------------------------------------------------------------------------

# What means something inside a line; a name never starts a line here, so # + - do not.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~$])")
# GitHub and GitLab make a link of a bare "https://..." or "www...." in text: a backslash
# before its colon or dot (punctuation CommonMark lets be escaped) leaves the text as it reads
# and gives the autolinker nothing to match.
_AUTOLINK = re.compile(r"(?i)(?<=[a-z0-9])(:)(?=//)|(?<=www)(\.)")


def markdown(text: object) -> str:
    """TEXT as one Markdown table cell or list item shows it literally: on one line (a newline
    would end the table's row), HTML characters as entities (renderers pass raw HTML through:
    `<script>` would run), every character with a meaning inline (| ending the cell, backticks,
    [link](...) brackets, emphasis) backslashed, and no bare address made a link."""
    one = " ".join(plain(text, lines=True).split())
    one = _MD_SPECIAL.sub(r"\\\1", _html.escape(one, quote=False))
    return _AUTOLINK.sub(lambda m: "\\" + m[0], one)


# --- HTML --------------------------------------------------------------------------------


def _html_value(value: Any) -> Any:
    """What a template prints, before autoescaping: text without control characters (a
    U+202E would reorder what a reader sees) or lone surrogates; markup svg() vouched for as
    it is."""
    if isinstance(value, Markup) or not isinstance(value, str):
        return value
    return plain(value, lines=True)


# Every HTML page rtlab writes comes from this environment: every {{ value }} is escaped
# (autoescape for every template, whatever its name), and no template marks a run's text safe.
templates = Environment(
    loader=PackageLoader("rtlab.report", "templates"), autoescape=True, finalize=_html_value
)

# What an inline figure may not hold: scripts and elements that embed other documents, and
# event handlers or links that lead anywhere but inside the figure itself.
_SVG_FORBIDDEN = {"script", "foreignobject", "iframe", "object", "embed", "a", "animate", "set"}
_SVG_LINK = re.compile(r"(?:#|data:image/(?:png|jpeg);)")


def svg(text: str) -> Markup:
    """A figure matplotlib drew as inline SVG, as markup for a template. Matplotlib escapes the
    text it draws (a run's label, a load's name); this checks what it wrote all the same, so
    that the one thing a page takes unescaped is known to be a figure: well-formed XML with no
    script, no embedded document, no event handler and no outside link (ValueError else)."""
    text = _xml_visible(text)
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as e:
        raise ValueError(f"a figure's SVG does not parse: {e}") from None
    for element in root.iter():
        tag = element.tag.rpartition("}")[2].lower()
        if tag in _SVG_FORBIDDEN:
            raise ValueError(f"a figure's SVG holds a <{tag}> element")
        for name, value in element.attrib.items():
            local = name.rpartition("}")[2].lower()
            if local.startswith("on") or (local == "href" and not _SVG_LINK.match(value)):
                raise ValueError(f"a figure's SVG holds a {local} attribute")
    return Markup(text)  # checked above: nothing in it runs or leads out


# --- XML (JUnit) -------------------------------------------------------------------------

# Characters XML 1.0 forbids even as references, and those it allows but a CI page would
# show invisibly or reorder (C1 controls, untrusted.INVISIBLE).
_NOT_XML = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff{INVISIBLE}]")


def _xml_visible(text: str) -> str:
    return _NOT_XML.sub(lambda found: escaped(found[0]), text)


def xml(text: object) -> str:
    """TEXT as an XML 1.0 document may hold it: each character XML forbids (or shows
    invisibly) written as its escape (\\x1b, \\u202e), so the file stays valid and still says
    what was there. ElementTree escapes & < > and quotes itself; xml_attr and xml_text are
    for XML written by hand."""
    return _xml_visible(str(text))


def xml_attr(text: object) -> str:
    """TEXT as a quoted XML attribute value, quotes included."""
    return quoteattr(xml(text))


def xml_text(text: object) -> str:
    """TEXT as an XML element's content."""
    return _xml_escape(xml(text))


# --- JSON --------------------------------------------------------------------------------

# Characters JSON allows raw in a string that a terminal or a browser would act on: C1
# controls (0x9b starts an escape sequence on some terminals), untrusted.INVISIBLE (line
# breaks to JavaScript before ES2019, bidirectional overrides, zero-width characters); and
# lone surrogates, which UTF-8 cannot encode. Outside strings a JSON text is ASCII, so each can
# only be inside a string, where JSON's own escape of it (a surrogate pair beyond the first
# plane) is the same character: the document reads back exactly as it was.
_JSON_RAW = re.compile(f"[\x7f-\x9f\ud800-\udfff{INVISIBLE}]")


def json(document: Any) -> str:
    """DOCUMENT as indented JSON text (non-ASCII letters kept as they are), a newline after."""
    text = _json.dumps(document, indent=2, ensure_ascii=False)
    return _JSON_RAW.sub(lambda m: _json.dumps(m[0])[1:-1], text) + "\n"


# --- terminal ----------------------------------------------------------------------------


def terminal(text: object, style: str = "", lines: bool = False) -> Text:
    """TEXT as a terminal shows it: a rich Text, never console markup ("[red]" and
    "[link=...]" are printed as written), without control characters (an escape sequence
    would clear the screen, set the clipboard or colour what follows) or lone surrogates;
    tabs and newlines as spaces unless LINES keeps the newlines."""
    return Text(plain(text, lines=lines).replace("\t", " "), style)
