"""HTML reduced to text for the model: headings kept as Markdown headings (so a fetched page has
an outline and sections like a file), paragraphs and list items on lines of their own, scripts,
styles and everything else that is not text dropped. Links become their words only: a page's
URLs are not the runbook's content."""

from __future__ import annotations

import re
from html.parser import HTMLParser

_SKIPPED = {"script", "style", "noscript", "template", "svg", "head"}
_BLOCKS = {"p", "div", "br", "tr", "table", "section", "article", "pre", "blockquote", "hr", "dd", "dt"}
_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_BLANK_LINES = re.compile(r"\n{3,}")


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title: list[str] = []
        self._skipping = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in _SKIPPED:
            self._skipping += 1
        elif tag in _HEADINGS:
            self.parts.append("\n\n" + "#" * _HEADINGS[tag] + " ")
        elif tag == "li":
            self.parts.append("\n- ")
        elif tag in _BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in _SKIPPED:
            self._skipping = max(0, self._skipping - 1)
        elif tag in _HEADINGS or tag in _BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title.append(data)
        if self._skipping:
            return
        self.parts.append(data)  # spacing is collapsed line by line afterwards


def html_to_text(html: str) -> tuple[str, str]:
    """The page's ``<title>`` and its text (Markdown-like headings, one block per line)."""
    parser = _Text()
    parser.feed(html)
    parser.close()
    lines = []
    for raw in "".join(parser.parts).splitlines():
        line = " ".join(raw.split())
        if line.startswith("#") and line.rstrip("#").strip() == "":
            continue  # an empty heading
        lines.append(line)
    text = _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()
    return " ".join("".join(parser.title).split()), text
