"""What the demo's Prometheus (``emulator.demo.prometheus``) reads of a query: a series selector,
and the API's times, steps and numbers, parsed the way Prometheus parses them.

A selector is a metric name and/or label matchers: ``node_load1``, ``node_load1{instance="db-01:9100"}``,
``{__name__=~"node_load.*", job!="x"}``. Matchers are ``=``, ``!=``, ``=~`` and ``!~`` (regexes
anchored at both ends, as Prometheus anchors them); values are quoted with ``"``, ``'`` or
backticks. Anything else (a function, an operator, a range ``[5m]``) is ``BadData`` saying what
the demo's Prometheus understands, in Prometheus's own error shape, so a model can correct itself.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

MAX_POINTS = 11_000  # Prometheus refuses a range query with more points per series
_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SELECTOR = re.compile(rf"\s*({_NAME})?\s*(?:\{{(.*)\}})?\s*", re.DOTALL)
_MATCHER = re.compile(
    r"""\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)\s*(?:,|$)""",
    re.DOTALL,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}
_DURATION = re.compile(r"(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?")
_DURATION_SECONDS = (365 * 86400, 7 * 86400, 86400, 3600, 60, 1, 0.001)


class BadData(ValueError):
    """A query or parameter Prometheus would refuse with ``errorType: bad_data``."""


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str
    value: str

    def matches(self, labels: Mapping[str, str]) -> bool:
        have = labels.get(self.label, "")
        if self.op == "=":
            return have == self.value
        if self.op == "!=":
            return have != self.value
        found = re.fullmatch(self.value, have) is not None
        return found if self.op == "=~" else not found


@dataclass(frozen=True)
class Selector:
    matchers: tuple[Matcher, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(matcher.matches(labels) for matcher in self.matchers)


def parse_selector(query: str) -> Selector:
    """The selector ``query`` is; ``BadData`` for anything else."""
    whole = _SELECTOR.fullmatch(query)
    if whole is None or (whole.group(1) is None and whole.group(2) is None):
        raise BadData(
            f"the demo's Prometheus evaluates series selectors only, such as "
            f'node_load1{{instance="db-01:9100"}}, not {query.strip()[:200]!r}'
        )
    matchers = [Matcher("__name__", "=", whole.group(1))] if whole.group(1) else []
    body = (whole.group(2) or "").strip()
    position = 0
    while position < len(body):
        found = _MATCHER.match(body, position)
        if found is None:
            raise BadData(f"parse error: unexpected {body[position:][:40]!r} in label matching")
        label, op, quoted = found.groups()
        value = _unquote(quoted)
        if op in ("=~", "!~"):
            try:
                re.compile(value)
            except re.error as error:
                raise BadData(f"parse error: invalid regular expression {value!r}: {error}") from None
        matchers.append(Matcher(label, op, value))
        position = found.end()
    if not any(not m.matches({}) for m in matchers):
        raise BadData("vector selector must contain at least one non-empty matcher")
    return Selector(tuple(matchers))


def _unquote(quoted: str) -> str:
    inner = quoted[1:-1]
    if quoted.startswith("`"):
        return inner
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), inner, flags=re.DOTALL)


def parse_time(text: str, name: str) -> float:
    """A time parameter: Unix seconds (``1700000000.5``) or RFC 3339 (``2025-05-01T12:00:00Z``)."""
    try:
        value = float(text)
        if math.isfinite(value):
            return value
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise BadData(
            f'invalid parameter "{name}": cannot parse "{text[:60]}" to a valid timestamp'
        ) from None


def parse_step(text: str) -> float:
    """A step: seconds (``30``, ``0.5``) or a duration (``30s``, ``1m30s``)."""
    try:
        seconds = float(text)
    except ValueError:
        found = _DURATION.fullmatch(text)
        if not text or found is None:
            raise BadData(
                f'invalid parameter "step": cannot parse "{text[:60]}" to a valid duration'
            ) from None
        seconds = sum(int(n) * unit for n, unit in zip(found.groups(), _DURATION_SECONDS, strict=True) if n)
    if not math.isfinite(seconds) or seconds <= 0:
        raise BadData(
            "zero or negative query resolution step widths are not accepted. Try a positive integer"
        )
    return seconds


def range_times(start: float, end: float, step: float) -> list[float]:
    """The evaluation times of a range query: ``start``, ``start + step`` ... up to ``end``, counted
    in milliseconds as Prometheus counts them (so ``end`` itself is one when the step divides the range)."""
    if end < start:
        raise BadData("end timestamp must not be before start time")
    first, last, every = round(start * 1000), round(end * 1000), max(1, round(step * 1000))
    if (last - first) // every >= MAX_POINTS:
        raise BadData(
            "exceeded maximum resolution of 11,000 points per timeseries. "
            "Try decreasing the query resolution (?step=XX)"
        )
    return [at / 1000 for at in range(first, last + 1, every)]


def sample_value(value: float) -> str:
    """A sample as Prometheus writes it: ``0.58``, ``1``, ``11.64``."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text
