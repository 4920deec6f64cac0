"""Alertmanager label matchers from the model, parsed with a strict grammar.

A matcher is a label name (``[A-Za-z_][A-Za-z0-9_]*``), one of ``=``, ``!=``, ``=~``, ``!~``, and a
value that is either plain (letters, digits and ``_.:/@%+*?^$|()[]-``: enough for ``web-.*`` or
``web-0[1-3]``) or double-quoted. In a quoted value ``\\"``, ``\\\\`` and ``\\n`` are escapes and any
other backslash stays a backslash (Alertmanager's own rules, so ``"web-\\d+"`` is the regex
``web-\\d+``); raw control characters, commas between matchers, braces and shell text outside
quotes are refused. A regex must compile on RE2, whose syntax Alertmanager's Go regexes share.

``Matcher.text()`` renders a parsed matcher back, its value always quoted and escaped: that, not
what the model wrote, is what reaches Alertmanager.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

from tools.alert_matchers import Matcher
from tools.alert_matchers import parse_matcher as parse_one
from tools.errors import MatcherSyntaxError

MAX_MATCHER_CHARS = 300
_MATCHER = re.compile(
    r"(?P<name>[A-Za-z_][A-Za-z0-9_]*) *(?P<op>=~|!~|!=|=) *"
    r'(?P<value>"(?:[^"\\\x00-\x1f\x7f]|\\[^\x00-\x1f\x7f])*"|[A-Za-z0-9_.:/@%+*?^$|()\[\]-]*)'
)
_MATCHER_HELP = 'write name="value", name!="value", name=~"regex" or name!~"regex"'


def parse_matcher(text: str) -> Matcher:
    """One matcher from the model; ``ValueError`` saying what is wrong.

    The stricter front (the module docstring) only decides what a model may write; the value is
    parsed, and the regex compiled, by the one grammar every matcher goes through
    (``tools.alert_matchers``).
    """
    found = _MATCHER.fullmatch(text.strip(" "))
    if found is None:
        raise ValueError(f"{text[:80]!r} is not a matcher: {_MATCHER_HELP}")
    try:
        return parse_one(text.strip(" "))
    except MatcherSyntaxError as exc:
        raise ValueError(f"{text[:80]!r}: {exc}") from None


def _check_matcher(text: str) -> str:
    parse_matcher(text)
    return text


MatcherText = Annotated[
    str, Field(min_length=1, max_length=MAX_MATCHER_CHARS), AfterValidator(_check_matcher)
]
