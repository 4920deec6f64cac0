"""Alertmanager's label matchers: ``team="sre"``, ``severity=~"critical|warning"``, ``{a="b", c!~"d"}``.

One grammar for every matcher chatops reads: the operator's alert routes (``bot.alerts.routing``)
and, behind a stricter front, the model's filters and silences (``tools.builtin.alertmanager_matchers``).

The syntax is the classic one of Alertmanager's ``pkg/labels`` (``ParseMatchers`` /
``ParseMatcher``), ported rule for rule so a matcher copied from an Alertmanager route means
the same here:

* a matcher is a label name (``[a-zA-Z_:][a-zA-Z0-9_:]*``), one of ``=``, ``!=``, ``=~``, ``!~``,
  and a value, with any whitespace around each part;
* the value may be double-quoted; inside it ``\\"`` is a quote, ``\\\\`` a backslash and ``\\n`` a
  line feed; any other backslash is literal; an unescaped ``"`` anywhere but at the ends is an
  error, and an empty value (``job=``) is the empty string;
* one text may hold a list: commas outside quotes separate matchers, one leading ``{`` and one
  trailing ``}`` are dropped, and a trailing comma is allowed (``{foo="bar", dings!="bums", }``).

Regexes are anchored the way Alertmanager anchors them (``^(?:regex)$``: the whole value must
match) and compiled with RE2 (``tools.patterns``), so an operator's ``(a+)+$`` takes time linear
in the label value instead of hanging the web process. RE2 has no backreferences or lookaround
(neither has Go's engine, which Alertmanager uses), so the same regexes compile in both.

A label the alert does not carry matches as the empty string, as in Alertmanager:
``severity!="critical"`` matches an alert without ``severity``, and ``severity=""`` too. The
newer UTF-8 matcher syntax (quoted label names) is not supported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from tools.errors import MatcherSyntaxError
from tools.patterns import SafePattern, compile_safe

MatchOp = Literal["=", "!=", "=~", "!~"]
# "=~" before "=" and "!=" before "!~" would not matter for "!", but "=~" must come before "=",
# or "name=~x" would read as name = "~x" (Alertmanager's order).
_OPERATORS: tuple[MatchOp, ...] = ("=~", "=", "!=", "!~")
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_GO_SPACE = " \t\n\f\r"  # Go's \s: what Alertmanager strips around each part
MAX_MATCHER_CHARS = 4096  # one matcher text in a config file; longer is a mistake, not a matcher
_SYNTAX = 'matchers are written name="value", name!="value", name=~"regex" or name!~"regex"'


@dataclass(frozen=True)
class Matcher:
    """One parsed matcher; ``matches`` tests an alert's labels against it."""

    name: str
    op: MatchOp
    value: str
    _pattern: SafePattern | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Built in code or parsed, a matcher obeys the same rules (and its regex is compiled once).
        if not _NAME.fullmatch(self.name):
            raise MatcherSyntaxError(f"{self.name!r} is not a label name ({_SYNTAX})")
        if self.op not in _OPERATORS:
            raise MatcherSyntaxError(f"{self.op!r} is not a match operator ({_SYNTAX})")
        if self.op in ("=~", "!~") and self._pattern is None:
            object.__setattr__(self, "_pattern", _compile(self.value))

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this matcher (a missing label is the empty string)."""
        return self.matches_value(labels.get(self.name, ""))

    def matches_value(self, value: str) -> bool:
        if self.op == "=":
            return value == self.value
        if self.op == "!=":
            return value != self.value
        assert self._pattern is not None  # compiled in __post_init__ for both regex operators
        found = self._pattern.search(value)
        return found if self.op == "=~" else not found

    @property
    def is_regex(self) -> bool:
        return self.op in ("=~", "!~")

    def text(self) -> str:
        """The matcher as Alertmanager prints it: ``name=~"value"``, the value always quoted and escaped."""
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'{self.name}{self.op}"{escaped}"'

    def __str__(self) -> str:
        return self.text()

    def api(self) -> dict[str, object]:
        """The matcher as Alertmanager's API v2 takes it (a silence's ``matchers``)."""
        return {
            "name": self.name,
            "value": self.value,
            "isRegex": self.is_regex,
            "isEqual": not self.op.startswith("!"),
        }


def parse_matchers(texts: Iterable[str]) -> list[Matcher]:
    """Every matcher of every text, in order; each text is one matcher or a (braced) list.

    Raises ``MatcherSyntaxError`` naming the matcher that does not parse.
    """
    matchers: list[Matcher] = []
    for text in [texts] if isinstance(texts, str) else texts:  # one text, not its characters
        matchers += parse_matcher_list(text)
    return matchers


def parse_matcher_list(text: str) -> list[Matcher]:
    """``{a="b", c=~"d"}`` or ``a=b, c=~d`` or one matcher: Alertmanager's ``ParseMatchers``."""
    if len(text) > MAX_MATCHER_CHARS:
        raise MatcherSyntaxError(f"a matcher text is longer than {MAX_MATCHER_CHARS} characters")
    return [parse_matcher(token) for token in _split_list(text)]


def parse_matcher(text: str) -> Matcher:
    """One matcher: Alertmanager's ``ParseMatcher``."""
    stripped = text.strip(_GO_SPACE)
    name_match = _NAME.match(stripped)
    rest = stripped[name_match.end() :].lstrip(_GO_SPACE) if name_match else ""
    op = next((candidate for candidate in _OPERATORS if rest.startswith(candidate)), None)
    if name_match is None or op is None:
        raise MatcherSyntaxError(f"bad matcher format: {_shown(text)} ({_SYNTAX})")
    raw_value = rest[len(op) :].lstrip(_GO_SPACE)
    return Matcher(name_match.group(), op, _unescape(raw_value, text))


def _split_list(text: str) -> list[str]:
    """The matcher texts of a list: commas outside double quotes separate them."""
    body = text.removeprefix("{").removesuffix("}")
    tokens: list[str] = []
    current: list[str] = []
    inside_quotes = escaped = False
    for char in body:
        if char == "," and not inside_quotes:
            tokens.append("".join(current))
            current = []
            continue
        if char == '"':
            inside_quotes = inside_quotes if escaped else not inside_quotes
            escaped = False
        elif char == "\\":
            escaped = not escaped
        elif char != ",":  # a comma inside quotes leaves a pending escape as it was (as Go does)
            escaped = False
        current.append(char)
    last = "".join(current).strip()
    if last:  # a trailing comma (and whitespace) ends the list without an empty matcher
        tokens.append(last)
    return tokens


def _unescape(raw: str, text: str) -> str:
    """The value with OpenMetrics escapes resolved; quotes allowed only around it."""
    quoted = raw.startswith('"')
    body = raw[1:] if quoted else raw
    value: list[str] = []
    closed = not quoted
    escaped = False
    for index, char in enumerate(body):
        last = index == len(body) - 1
        if escaped:
            escaped = False
            value.append({"n": "\n", '"': '"', "\\": "\\"}.get(char, "\\" + char))
        elif char == "\\" and not last:
            escaped = True
        elif char == '"':
            if closed or not last:
                raise MatcherSyntaxError(f"matcher value contains unescaped double quote: {_shown(text)}")
            closed = True
        else:
            value.append(char)  # a lone trailing backslash stays literal
    if not closed:
        raise MatcherSyntaxError(f"matcher value contains unescaped double quote: {_shown(text)}")
    return "".join(value)


def _compile(regex: str) -> SafePattern:
    try:
        return compile_safe(f"^(?:{regex})$")
    except ValueError as exc:
        raise MatcherSyntaxError(f"bad regex {_shown(regex)}: {exc}") from None


def _shown(text: str) -> str:
    """A hostile or huge matcher stays one short line in a message."""
    return repr(text[:120]) + ("..." if len(text) > 120 else "")
