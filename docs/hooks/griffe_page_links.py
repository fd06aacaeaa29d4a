"""A griffe extension for the API reference (mkdocs.yml): docstrings' ``docs/<page>.md`` as links.

A docstring names the guide page it defers to by its path in the repository, ``docs/dsl.md``,
optionally with a section, ``(docs/dsl.md, "Gradients")``: that reads the same in ``help()``, in
an editor and on the site, so the docstrings keep it as plain text. Before a docstring is parsed,
this extension turns each mention into a Markdown link to the page, and to the section's heading
when one is named: ``[docs/dsl.md](/dsl.md#gradients), "Gradients"``.

The link is written from the root of docs/ because a docstring does not know which page renders
it; mkdocs.yml's ``absolute_links: relative_to_docs`` makes it relative to that page and checks that
the target exists, so a mention of a page that is not there fails ``mkdocs build --strict``. mkdocs
does not check the anchors of links inside rendered docstrings, so the extension does: a named
section that is no heading of its page is a warning, which fails the strict build too. A section
is named by a heading's text, or by the part before its colon ("Moments" for "Moments: NaN and
infinities in a mean and a variance").

Mentions inside code (a backtick span, a doctest line and its output, a fenced block) stay text.
The guide pages themselves write the same mentions as Markdown links (README, "Documentation site").
"""
from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import griffe

DOCS = Path(__file__).resolve().parent.parent

logger = griffe.get_logger(__name__)

# A page's path under docs/, then an optional section name in one of the three forms docstrings
# use: ``docs/x.md, "Name"``, ``docs/x.md ("Name")``, ``docs/x.md's "Name"``. Not when the mention
# is part of a longer path or already a link (``[docs/x.md]`` or ``](docs/x.md)``).
_MENTION = re.compile(
    r"(?<![\w/.\[-])(?<!\]\()docs/(?P<page>[\w-]+(?:/[\w-]+)*\.md)\b"
    r"(?P<tail>(?:,\s+|\s+\(|'s\s+)\"(?P<section>[^\"]+)\")?")
_CODE_SPAN = re.compile(r"(`+).+?\1", re.DOTALL)
_FENCE = re.compile(r"^[ \t]*(```|~~~)")
_PROMPT = re.compile(r"^[ \t]*(>>>|\.\.\.)( |$)")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(?P<text>.+?)[ \t]*#*[ \t]*$")


def _slug(text: str) -> str:
    """The id Python-Markdown's toc extension gives a heading of ``text`` (mkdocs.yml keeps its
    default slugify)."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _plain(markdown: str) -> str:
    """A heading's text as rendered: links to their text, code and emphasis marks dropped."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    return re.sub(r"`|\*\*|__", "", text)


def _normal(name: str) -> str:
    return " ".join(name.split()).casefold()


def headings(page: str) -> dict[str, str]:
    """The section names of docs/``page`` -> their anchors; empty when the page does not exist
    (the link to the page is then what fails the build). Read at each mention, not cached, so
    that ``mkdocs serve`` sees a renamed heading."""
    path = DOCS / page
    if not path.is_file():
        return {}
    anchors: dict[str, str] = {}
    seen: dict[str, int] = {}
    in_fence = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        match = None if in_fence else _HEADING.match(line)
        if match is None:
            continue
        text = _plain(match["text"])
        slug = _slug(text)
        # toc's rule for a repeated id: the second is id_1, the third id_2.
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchor = slug if count == 0 else f"{slug}_{count}"
        for name in (text, text.partition(": ")[0]):
            anchors.setdefault(_normal(name), anchor)
    return anchors


def link_mentions(text: str, where: str = "") -> str:
    """``text`` with each ``docs/<page>.md`` outside code made a link to the page (and section)."""
    # The mentions are found in a copy of the text with its code blanked out, so that a section
    # name may run onto the next line while nothing inside code is touched.
    prose = _blank_code(text)
    out, start = [], 0
    for match in _MENTION.finditer(prose):
        out += [text[start:match.start()], _link(match, text, where)]
        start = match.end()
    return "".join([*out, text[start:]])


def _blank_code(text: str) -> str:
    """``text`` with fenced blocks, doctest lines and their output, and code spans turned to spaces
    (same length, same line ends)."""
    lines = text.split("\n")
    in_fence = in_doctest = False
    for i, line in enumerate(lines):
        fence = bool(_FENCE.match(line))
        # A doctest's output runs from its prompt to the next blank line.
        in_doctest = bool(_PROMPT.match(line)) or (in_doctest and line.strip() != "")
        if in_fence or fence or in_doctest:
            lines[i] = " " * len(line)
        if fence:
            in_fence = not in_fence
    return _CODE_SPAN.sub(lambda span: re.sub(r"[^\n]", " ", span[0]), "\n".join(lines))


def _link(match: re.Match, text: str, where: str) -> str:
    """The link for a mention ``match`` found in the blanked copy of ``text``."""
    page, tail = match["page"], text[match.start("tail"):match.end("tail")]
    section = match["section"] and text[match.start("section"):match.end("section")]
    target = f"/{page}"
    if section is not None:
        anchor = headings(page).get(_normal(section))
        if anchor is None:
            logger.warning("%s: docs/%s has no section %r (a heading's text, or its part before "
                           "the colon)", where or "a docstring", page, section)
        else:
            target += f"#{anchor}"
    return f"[docs/{page}]({target}){tail}"


class PageLinks(griffe.Extension):
    """Links each ``docs/<page>.md`` a docstring mentions to that page of the site."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None and "docs/" in obj.docstring.value:
            obj.docstring.value = link_mentions(obj.docstring.value, obj.path)
