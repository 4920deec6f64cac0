"""One runbook: Markdown with optional YAML front matter, parsed into what the index needs.

The front matter, between a first line ``---`` and the next ``---`` (or ``...``)::

    ---
    title: Disk almost full
    alerts: [HighDiskUsage, DiskWillFillIn4Hours]   # alert names (the ``alertname`` label)
    labels: {service: api, severity: '=~"critical|page"'}
    targets: [web-01, web-03]
    ---

``labels`` are Alertmanager matchers (``tools.alert_matchers``, the grammar the alert routes
use): a mapping ``name: value`` means ``name="value"``, a value starting with an operator
(``=~"api|web"``, ``!="dev"``) is that matcher; a list of matcher texts
(``['service=~"api|web"']``) is accepted too. Keys other than these four are ignored (runbook
repositories carry their own, such as ``owner``). Without a ``title``, the first heading is the
title, else the file name.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from tools.alert_matchers import Matcher, parse_matcher, parse_matcher_list
from tools.config_files import yaml_problem
from tools.errors import MatcherSyntaxError, RunbookFormatError

_FENCE = re.compile(r"^(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")
_MATCH_OPS = ("=~", "!=", "!~", "=")
MAX_LIST_ITEMS = 100
MAX_FIELD_CHARS = 200
_OUTLINE_HEADINGS = 40
_OUTLINE_CHARS = 120


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    line: int
    """Index of the heading's line in ``Runbook.lines``."""


@dataclass(frozen=True)
class Runbook:
    """One parsed runbook; ``id`` is its path relative to the folder (or its URL)."""

    id: str
    title: str
    body: str
    alerts: tuple[str, ...] = ()
    matchers: tuple[Matcher, ...] = ()
    targets: tuple[str, ...] = ()
    headings: tuple[Heading, ...] = ()
    terms: Counter[str] = field(default_factory=Counter, compare=False, repr=False)
    title_terms: frozenset[str] = frozenset()

    @property
    def lines(self) -> list[str]:
        return self.body.splitlines()

    def outline(self) -> str:
        """Title, id and headings: what an alert's run is told before it reads the runbook."""
        rows = [
            f"{'  ' * (h.level - 1)}- {h.text[:_OUTLINE_CHARS]}" for h in self.headings[:_OUTLINE_HEADINGS]
        ]
        if len(self.headings) > _OUTLINE_HEADINGS:
            rows.append(f"- ... and {len(self.headings) - _OUTLINE_HEADINGS} more headings")
        return "\n".join([f"Runbook: {self.title} (id: {self.id})", *rows])

    def section(self, wanted: str) -> str | None:
        """The section under the heading ``wanted`` (case and spacing ignored; else the one heading
        that contains it), up to the next heading of the same or a higher level; ``None``: none."""
        key = _norm(wanted)
        exact = [h for h in self.headings if _norm(h.text) == key]
        found = exact or [h for h in self.headings if key and key in _norm(h.text)]
        if len(found) != 1 and not exact:
            return None
        start = found[0]
        lines = self.lines
        end = next(
            (h.line for h in self.headings if h.line > start.line and h.level <= start.level), len(lines)
        )
        return "\n".join(lines[start.line : end]).strip()

    def matches_labels(self, labels: Mapping[str, str]) -> bool:
        """Whether this runbook names labels and ``labels`` satisfy all of its matchers."""
        return bool(self.matchers) and all(matcher.matches(labels) for matcher in self.matchers)


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def words(text: str) -> list[str]:
    """The lower-cased words full-text relevance counts (names like ``web-03`` stay whole)."""
    return [word.lower().strip(".:-") for word in _WORD.findall(text)]


def parse_runbook(runbook_id: str, text: str, *, default_title: str = "") -> Runbook:
    """The runbook ``text``, its front matter checked; ``RunbookFormatError`` says what is wrong."""
    meta, body = split_front_matter(text)
    title = _text_field(meta, "title")
    headings = _headings(body)
    if not title:
        title = headings[0].text if headings else (default_title or runbook_id)
    all_words = words(body) + words(title)
    return Runbook(
        id=runbook_id,
        title=title,
        body=body,
        alerts=_names(meta, "alerts"),
        matchers=_matchers(meta.get("labels")),
        targets=_names(meta, "targets"),
        headings=tuple(headings),
        terms=Counter(all_words),
        title_terms=frozenset(words(title)),
    )


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """The front matter as a mapping (empty without one) and the Markdown after it."""
    if not (text.startswith("---\n") or text.startswith("---\r\n")):
        return {}, text
    lines = text.splitlines(keepends=True)
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
    if end is None:
        raise RunbookFormatError("front matter: the opening '---' has no closing '---'")
    source = "\n" + "".join(lines[1:end])  # a leading newline: YAML's line numbers are the file's
    try:
        meta = yaml.safe_load(source)
    except yaml.YAMLError as exc:
        raise RunbookFormatError(f"front matter: {yaml_problem(exc)}") from None
    except RecursionError:
        raise RunbookFormatError("front matter: nested too deeply") from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise RunbookFormatError("front matter: must be a mapping (title, alerts, labels, targets)")
    return meta, "".join(lines[end + 1 :])


def _text_field(meta: Mapping[str, Any], key: str) -> str:
    value = meta.get(key)
    if value is None:
        return ""
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise RunbookFormatError(f"front matter: {key} must be text")
    text = " ".join(str(value).split())
    if len(text) > MAX_FIELD_CHARS:
        raise RunbookFormatError(f"front matter: {key} is longer than {MAX_FIELD_CHARS} characters")
    return text


def _names(meta: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = meta.get(key)
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) and item.strip() for item in items):
        raise RunbookFormatError(f"front matter: {key} must be a list of names, e.g. {key}: [a, b]")
    if len(items) > MAX_LIST_ITEMS:
        raise RunbookFormatError(f"front matter: {key} has more than {MAX_LIST_ITEMS} items")
    if any(len(item) > MAX_FIELD_CHARS for item in items):
        raise RunbookFormatError(
            f"front matter: an item of {key} is longer than {MAX_FIELD_CHARS} characters"
        )
    return tuple(dict.fromkeys(item.strip() for item in items))


def _matchers(value: object) -> tuple[Matcher, ...]:
    """``labels``: a mapping (``name: value`` or ``name: '=~"regex"'``) or matcher texts."""
    if value is None:
        return ()
    try:
        if isinstance(value, Mapping):
            if len(value) > MAX_LIST_ITEMS:
                raise RunbookFormatError(f"front matter: labels has more than {MAX_LIST_ITEMS} items")
            return tuple(_label_matcher(str(name), item) for name, item in value.items())
        texts = [value] if isinstance(value, str) else value
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            raise RunbookFormatError(
                "front matter: labels must be a mapping ({service: api}) or a list of matchers "
                "(['service=~\"api|web\"'])"
            )
        return tuple(matcher for text in texts for matcher in parse_matcher_list(text))
    except MatcherSyntaxError as exc:
        raise RunbookFormatError(f"front matter: labels: {exc}") from None


def _label_matcher(name: str, value: object) -> Matcher:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise RunbookFormatError(
            f"front matter: labels: {name} must be a value or a matcher such as '=~\"a|b\"'"
        )
    text = str(value)
    if text.startswith(_MATCH_OPS):
        return parse_matcher(name + text)
    return Matcher(name, "=", text)


def _headings(body: str) -> list[Heading]:
    """ATX headings outside fenced code blocks (a ``# comment`` in a shell block is no heading)."""
    headings: list[Heading] = []
    fenced = False
    for index, line in enumerate(body.splitlines()):
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        found = None if fenced else _HEADING.match(line)
        if found:
            headings.append(Heading(len(found.group(1)), found.group(2).strip(), index))
    return headings
