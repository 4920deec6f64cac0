"""Where a call's argument values came from: text a person wrote, or only text the bot read.

For each mutating or destructive call the runtime works out, value by value, whether the model
could have taken it from a person (**requested**) or only from what it read (**derived**): a log
line, a web page, a runbook, an MCP result or an alert's annotation can say "run cleanup_old_logs
on db-01 /", and the card must not look like a change somebody asked for (issue 36).

* **Requested text** is handed in by the caller, never taken from the model: the request (a
  mention's text, an alert's target and labels as the operator's routes gave them) and the thread
  replies that reached the run (Refute and Focus arrive as replies). The model's own messages,
  its tool-call arguments and a condensed summary it wrote never count.
* **Read text** is every tool result, by its evidence id (``E<n>``, ``agent.evidence``), and the
  parts of the opening message nobody wrote for this run (``None`` as its id).

**Matching** (docs/POLICY.md): a value and every text are normalised the same way (Unicode NFKC,
zero-width and other format characters removed, case-folded, ``\\`` read as ``/``, repeated
slashes as one, a path's trailing slashes dropped, whitespace runs as one space); the value's
own surrounding quotes and backticks are taken off. A value *occurs* in a text when it is a
substring that begins and ends on a boundary: the text's start or end, whitespace, a quote or
backtick, or ``,;()[]{}<>|=@``; a ``:`` before it (``host:db-01``); a sentence's ``.:!?`` after
it when whitespace or the end follows. So ``/`` does not occur in "/var/log", nor ``db-01`` in "db-012", but ``DB-01``,
`` `db-01` `` and ``db-01`` with a zero-width space inside are all ``db-01``.

Which values are checked: every string (in lists and objects too) except the runtime's own
(``confirmed_by``, ``approved_plan``); numbers, booleans and strings that are only a number are
not (a replica count is not where injected changes hide). A checked value that a person wrote is
requested; any other is derived, with the evidence ids of the results it occurs in (none: it
occurs in no tool output, so the model took it from the opening material or made it up).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

RUNTIME_ARGUMENTS = frozenset({"confirmed_by", "approved_plan", "approval_grant"})
# Arguments that name what a change acts on: a destructive call with one of these derived needs an
# approver more than its rule asks when no ``derived:`` key says otherwise (bot.policy.rules).
KEY_ARGUMENTS = frozenset(
    {
        "target",
        "host",
        "hostname",
        "path",
        "paths",
        "directory",
        "dir",
        "file",
        "service",
        "unit",
        "namespace",
    }
)
_BOUNDARY = frozenset(" \"'`,;()[]{}<>|=@")
_LEFT_ONLY = frozenset(":")  # "path:/var/log", "host:db-01"; on the right it is a port or a sentence's end
_SENTENCE_END = frozenset(".:!?")
_QUOTES = "\"'`\u201c\u201d\u2018\u2019\u00ab\u00bb"  # ASCII quotes, curly quotes, guillemets
_NUMBER = re.compile(r"[+-]?[0-9]+(\.[0-9]+)?")
# A path's trailing slashes (after a path character: ``/`` alone, or quoted, stays).
_TRAILING_SLASHES = re.compile(
    r"(?<=[^\s/\"'`,;()\[\]{}<>|=@])/+(?=[\s\"'`,;()\[\]{}<>|=@]|[.:!?](?:\s|$)|$)"
)


class Origin(StrEnum):
    REQUESTED = "requested"
    DERIVED = "derived"


def normalised(text: str) -> str:
    """The form values and texts are compared in (see the module's docstring)."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")  # zero-width, bidi marks
    text = " ".join(text.casefold().replace("\\", "/").split())
    text = re.sub(r"/{2,}", "/", text)
    return _TRAILING_SLASHES.sub("", text)


def value_form(value: str) -> str:
    """A value as it is looked for: normalised, its own surrounding quotes and backticks off."""
    form = normalised(value)
    while len(form) >= 2 and form[0] in _QUOTES and form[-1] in _QUOTES:
        form = form[1:-1].strip()
    if len(form) > 1:
        form = form.rstrip("/") or "/"
    return form


def occurs(form: str, text: str, *, as_directory: bool = False) -> bool:
    """Whether the value form ``form`` occurs in the normalised ``text`` on boundaries.

    ``as_directory``: a path also occurs as the directory of a longer path (``/var/log/api`` in
    "/var/log/api/api.log.4"). Only for telling which result a derived value was read from: a
    person who names a file has not asked for its directory, so requested text is never matched so;
    and only where the value occurs nowhere as itself (the result that names it is the source)."""
    if not form:
        return False
    directory = as_directory and "/" in form and form != "/"
    start = text.find(form)
    while start != -1:
        end = start + len(form)
        if _left_ok(text, start) and (_right_ok(text, end) or (directory and text[end] == "/")):
            return True
        start = text.find(form, start + 1)
    return False


def _left_ok(text: str, start: int) -> bool:
    before = text[start - 1] if start else " "
    return before in _BOUNDARY or before in _QUOTES or before in _LEFT_ONLY


def _right_ok(text: str, end: int) -> bool:
    if end == len(text) or text[end] in _BOUNDARY or text[end] in _QUOTES:
        return True
    return text[end] in _SENTENCE_END and (end + 1 == len(text) or text[end + 1] == " ")


def checked_values(arguments: Mapping[str, object]) -> Iterator[tuple[str, str]]:
    """``(argument, value)`` for every string value that is checked, in argument order."""
    for name, value in arguments.items():
        if name in RUNTIME_ARGUMENTS:
            continue
        for found in _strings(value):
            if found.strip() and not _NUMBER.fullmatch(found.strip()):
                yield name, found


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


@dataclass(frozen=True)
class ArgumentOrigin:
    """One checked value of a call and where it came from."""

    argument: str
    value: str
    origin: Origin
    evidence: tuple[str, ...] = ()  # the results it occurs in, when derived

    @property
    def key(self) -> bool:
        """It names what the change acts on (target, path, service, ...)."""
        return self.argument in KEY_ARGUMENTS


@dataclass(frozen=True)
class Provenance:
    """Every checked value of one call, in argument order."""

    values: tuple[ArgumentOrigin, ...] = ()

    @property
    def derived(self) -> tuple[ArgumentOrigin, ...]:
        return tuple(v for v in self.values if v.origin is Origin.DERIVED)

    @property
    def is_derived(self) -> bool:
        return bool(self.derived)

    @property
    def key_derived(self) -> bool:
        """A target, path or service (``KEY_ARGUMENTS``) is derived."""
        return any(v.key for v in self.derived)

    @property
    def evidence(self) -> tuple[str, ...]:
        """The evidence ids the derived values occur in, each once, in order."""
        return tuple(dict.fromkeys(ref for v in self.derived for ref in v.evidence))

    def to_json(self) -> str:
        return json.dumps(
            [
                {
                    "argument": v.argument,
                    "value": v.value,
                    "origin": v.origin.value,
                    "evidence": list(v.evidence),
                }
                for v in self.values
            ],
            separators=(",", ":"),
            ensure_ascii=True,
        )

    @classmethod
    def from_json(cls, text: str) -> Provenance:
        """The stored form back; ``""`` (a record proposed before provenance): nothing checked."""
        if not text:
            return cls()
        return cls(
            tuple(
                ArgumentOrigin(
                    str(item["argument"]),
                    str(item["value"]),
                    Origin(item["origin"]),
                    tuple(str(ref) for ref in item.get("evidence", ())),
                )
                for item in json.loads(text)
            )
        )


def provenance_of(
    arguments: Mapping[str, object],
    requested: Sequence[str],
    read: Sequence[tuple[str | None, str]],
) -> Provenance:
    """Where each checked value of ``arguments`` came from. ``requested``: the texts people wrote;
    ``read``: ``(evidence id or None, text)`` of everything the bot read."""
    people = [normalised(text) for text in requested]
    sources = [(ref, normalised(text)) for ref, text in read]
    found: list[ArgumentOrigin] = []
    for name, value in checked_values(arguments):
        form = value_form(value)
        if any(occurs(form, text) for text in people):
            found.append(ArgumentOrigin(name, value, Origin.REQUESTED))
            continue
        refs = tuple(dict.fromkeys(ref for ref, text in sources if ref and occurs(form, text)))
        if not refs:  # only as the directory of a listed path: those results are where it was read
            refs = tuple(
                dict.fromkeys(ref for ref, text in sources if ref and occurs(form, text, as_directory=True))
            )
        found.append(ArgumentOrigin(name, value, Origin.DERIVED, refs))
    return Provenance(tuple(found))
