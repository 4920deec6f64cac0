"""``prometheus_query`` and ``prometheus_range``: PromQL against the operator's Prometheus.

The model writes PromQL; it travels only as the ``query`` parameter of ``/api/v1/query`` or
``/api/v1/query_range`` (``Endpoint`` builds the URL), capped at ``MAX_QUERY_CHARS``. Prometheus
is told the tool's remaining time (its ``timeout`` parameter) so an expensive query stops there
too, and the request itself ends at the tool's deadline.

What comes back is summarised, never dumped: an instant vector is one line per series
(``up{instance="web-03:9100", job="node"} 1``), a range one line per series with min / avg / max
/ last and a trend, never raw points. At most ``MAX_SERIES_SHOWN`` (``MAX_RANGE_SERIES_SHOWN``)
series fit, within a character budget, and the result says how many more there were. A range
result carries the samples of exactly the series its text lists, in its order, beside the text
(``ToolResult.series``: the bot charts them; the model never reads them), at most
``MAX_CHART_POINTS`` per series. An answer above the body cap is decoded up to the cut
(``salvage_array``), and says that it was cut. Prometheus's own errors (``status: error``) are
``Error:`` results with its ``errorType`` and message, so the model can fix its query.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent.series import Point, Series, SeriesSet
from agent.tooling import ToolResult
from tools import http_client
from tools.base import FunctionTool, ToolContext, error_result
from tools.builtin.observability_endpoint import (
    Endpoint,
    cut_note,
    error_text,
    format_number,
    parse_number,
    quote,
    redacting,
    salvage_array,
    series_name,
)
from tools.errors import ToolCallError
from tools.placement import WORKER
from tools.text import shorten

MAX_QUERY_CHARS = 2000
MAX_SERIES_SHOWN = 50
MAX_RANGE_SERIES_SHOWN = 20
OUTPUT_BUDGET_CHARS = 3500
MAX_POINTS = 200
MAX_RANGE_MINUTES = 7 * 24 * 60
MAX_CHART_POINTS = 2000  # samples kept per series for the chart (a server may send more than asked)
# Steps a person reads easily; the smallest one giving at most MAX_POINTS points is used.
_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
_TIME = r"^(?:\d{1,10}(?:\.\d{1,3})?|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2}))$"
_RESULT_START = re.compile(r'"result"\s*:\s*\[')
_RESULT_TYPE = re.compile(r'"resultType"\s*:\s*"(\w+)"')
_NARROW = "narrow the query: a label filter, topk(10, ...), or sum by (...)"

Sort = Literal["highest", "lowest", "labels"]
Row = tuple[str, float | None, str, tuple[Point, ...]]
"""A series as listed: its name, the value it is ordered by, its line, its samples (a range)."""
_QUERY_DESCRIPTION = 'PromQL, e.g. up == 0 or sum by (instance) (rate(http_requests_total{code=~"5.."}[5m])).'
_SORT_DESCRIPTION = "Series order: highest value first (default), lowest first, or by labels."


class QueryArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description=_QUERY_DESCRIPTION)
    time: str | None = Field(
        default=None,
        pattern=_TIME,
        description="Evaluation time: RFC 3339 (2025-05-01T12:00:00Z) or Unix seconds; default now.",
    )
    sort: Sort = Field(default="highest", description=_SORT_DESCRIPTION)


class RangeArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description=_QUERY_DESCRIPTION)
    minutes: int = Field(
        default=60, ge=1, le=MAX_RANGE_MINUTES, description="How far back from now (up to a week)."
    )
    sort: Sort = Field(default="highest", description="Series order by their last value, or by labels.")


def prometheus_tools(endpoint: Endpoint) -> list[FunctionTool[Any]]:
    """``prometheus_query`` and ``prometheus_range`` against ``endpoint`` (read-only, parallel)."""
    return [
        FunctionTool(
            redacting(endpoint, _instant_query),
            QueryArgs,
            name="prometheus_query",
            description=(
                "Evaluate a PromQL expression now (or at a time) in Prometheus: one line per series "
                "with its labels and value, highest first. Use label filters, topk or sum by to focus."
            ),
            parallel=True,
            timeout=20,
            placement=WORKER,
        ),
        FunctionTool(
            redacting(endpoint, _range_query),
            RangeArgs,
            name="prometheus_range",
            description=(
                "Evaluate a PromQL expression over the last N minutes in Prometheus: per series its "
                "min, avg, max, last value and trend (rising, falling, flat), never raw points."
            ),
            parallel=True,
            timeout=30,
            placement=WORKER,
        ),
    ]


# -- the two queries --------------------------------------------------------------------------------


def _instant_query(endpoint: Endpoint, args: QueryArgs, ctx: ToolContext) -> ToolResult:
    params = [("query", args.query)]
    if args.time is not None:
        params.append(("time", args.time))
    answer = _ask(endpoint, "/api/v1/query", params, ctx)
    if isinstance(answer, ToolResult):
        return answer
    if answer.result_type in ("scalar", "string"):
        return ToolResult(f"{answer.result_type}: {_single_value(answer)}{answer.notes()}")
    if answer.result_type == "matrix":
        return ToolResult(_summarised(answer, args.sort, MAX_SERIES_SHOWN, "range vector")[0])
    rows: list[Row] = []
    for item in answer.items:
        if isinstance(item, dict):
            sample = item.get("value")
            value = parse_number(sample[1]) if isinstance(sample, list) and len(sample) == 2 else None
            name = series_name(item.get("metric"))
            rows.append((name, value, f"{name} {'?' if value is None else format_number(value)}", ()))
    ordered = _ordered(rows, args.sort)
    return ToolResult(_listing(answer, ordered, MAX_SERIES_SHOWN, _order_text(args.sort, "value"))[0])


def _range_query(endpoint: Endpoint, args: RangeArgs, ctx: ToolContext) -> ToolResult:
    seconds = args.minutes * 60
    step = choose_step(seconds)
    end = time.time()
    params = [
        ("query", args.query),
        ("start", f"{end - seconds:.3f}"),
        ("end", f"{end:.3f}"),
        ("step", str(step)),
    ]
    answer = _ask(endpoint, "/api/v1/query_range", params, ctx)
    if isinstance(answer, ToolResult):
        return answer
    if answer.result_type != "matrix":
        return error_result(f"Prometheus answered a {answer.result_type!r} to a range query")
    window = f"last {args.minutes} min, step {step}s"
    text, shown = _summarised(answer, args.sort, MAX_RANGE_SERIES_SHOWN, window)
    series = tuple(Series(name, points) for name, _, _, points in shown)
    return ToolResult(text, series=SeriesSet(args.query, window, series))


def choose_step(seconds: int) -> int:
    """The step (seconds) giving at most ``MAX_POINTS`` points over ``seconds``."""
    needed = math.ceil(seconds / MAX_POINTS)
    return next((step for step in _STEPS if step >= needed), needed)


# -- Prometheus's answer ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Answer:
    result_type: str
    items: list[Any]
    """The ``result`` array (series), or for a scalar / string its ``[time, value]`` pair."""
    cut: str | None = None
    """Why the series may be incomplete (the answer was larger than the cap)."""
    warnings: tuple[str, ...] = ()

    def notes(self) -> str:
        lines = [f"\nPrometheus warning: {quote(warning, 300)}" for warning in self.warnings[:5]]
        if self.cut:
            lines.append(f"\n{self.cut}: {_NARROW}")
        return "".join(lines)


def _ask(
    endpoint: Endpoint, path: str, params: list[tuple[str, str]], ctx: ToolContext
) -> _Answer | ToolResult:
    # Prometheus stops evaluating at its own timeout: a query we gave up on does not run on there.
    limit = f"{max(1, math.floor(ctx.remaining()))}s"
    response = endpoint.request(
        "GET", path, params=[*params, ("timeout", limit)], timeout=ctx.remaining(), tool_timeout=ctx.timeout
    )
    if response.truncated:
        return _salvaged(response)
    try:
        parsed = json.loads(response.body)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than a parser goes
        parsed = None
    if not isinstance(parsed, dict):
        return error_result(f"Prometheus did not answer with its API's JSON: {error_text(response)}")
    if parsed.get("status") != "success":
        kind = " ".join(str(parsed.get("errorType", "error")).split())
        message = " ".join(str(parsed.get("error", error_text(response))).split())
        return error_result(f"Prometheus refused the query ({shorten(kind, 40)}): {shorten(message, 800)}")
    data = parsed.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        raise ToolCallError("Prometheus answered without a result")
    warnings = parsed.get("warnings")
    return _Answer(
        result_type=str(data.get("resultType", "")),
        items=data["result"],
        warnings=tuple(str(w) for w in warnings) if isinstance(warnings, list) else (),
    )


def _salvaged(response: http_client.HttpResponse) -> _Answer | ToolResult:
    """The series before the cut of a body larger than the cap (Prometheus writes ``status`` and
    ``resultType`` before ``result``, so they are there)."""
    start = _RESULT_START.search(response.body)
    kind = _RESULT_TYPE.search(response.body)
    if start is None or kind is None or kind.start() > start.start():
        return error_result(f"Prometheus's answer is too large to read ({cut_note(response)}): {_NARROW}")
    return _Answer(kind.group(1), salvage_array(response.body, start.end()), cut=cut_note(response))


def _single_value(answer: _Answer) -> str:
    pair = answer.items
    if len(pair) != 2:
        return "?"
    if answer.result_type == "string":
        return quote(pair[1], 1000)
    value = parse_number(pair[1])
    return "?" if value is None else format_number(value)


# -- presentation ----------------------------------------------------------------------------------


def _summarised(answer: _Answer, sort: Sort, cap: int, window: str) -> tuple[str, list[Row]]:
    """The listing of a matrix, and the rows (series) it shows, in its order."""
    rows: list[Row] = []
    for item in answer.items:
        if isinstance(item, dict) and isinstance(item.get("values"), list):
            pairs = [pair for pair in item["values"] if isinstance(pair, list) and len(pair) == 2]
            numbers = [parse_number(pair[1]) for pair in pairs]
            finite = [value for value in numbers if value is not None and math.isfinite(value)]
            name = series_name(item.get("metric"))
            line = f"{name}: {summarise(finite)}"
            rows.append((name, finite[-1] if finite else None, line, _points(pairs, numbers)))
    ordered = _ordered(rows, sort)
    return _listing(answer, ordered, cap, f"{window}; {_order_text(sort, 'last value')}")


def _points(pairs: list[list[Any]], numbers: list[float | None]) -> tuple[Point, ...]:
    """The samples with a numeric time (a value that is none is NaN: a gap), at most
    ``MAX_CHART_POINTS`` of them, evenly spread."""
    points = [
        (when, math.nan if value is None else value)
        for pair, value in zip(pairs, numbers, strict=True)
        if (when := parse_number(pair[0])) is not None and math.isfinite(when)
    ]
    stride = math.ceil(len(points) / MAX_CHART_POINTS) if points else 1
    return tuple(points[::stride])


def summarise(values: Sequence[float]) -> str:
    """``min 1 avg 2.5 max 4 last 4, rising (first third avg 1.5 -> last third avg 3.5), 4 points``."""
    if not values:
        return "no numeric samples"
    stats = (
        f"min {format_number(min(values))} avg {format_number(sum(values) / len(values))} "
        f"max {format_number(max(values))} last {format_number(values[-1])}"
    )
    points = f"{len(values)} point" + ("s" if len(values) != 1 else "")
    return f"{stats}, {trend(values)}, {points}"


def trend(values: Sequence[float]) -> str:
    """Rising, falling or flat: the last third's average against the first third's, judged
    against the series' spread (noise around a level is flat, a step or a slope is not)."""
    if len(values) < 3:
        return "too few points for a trend"
    third = len(values) // 3
    first = sum(values[:third]) / third
    last = sum(values[-third:]) / third
    spread = max(values) - min(values)
    detail = f"(first third avg {format_number(first)} -> last third avg {format_number(last)})"
    if spread == 0 or abs(last - first) <= 0.1 * spread:
        return f"flat {detail}"
    return f"{'rising' if last > first else 'falling'} {detail}"


def _ordered(rows: list[Row], sort: Sort) -> list[Row]:
    """``rows`` in ``sort`` order; a missing value or NaN goes last whatever the direction, and
    ties are broken by the series' labels."""
    if sort == "labels":
        return sorted(rows, key=lambda row: row[0])
    sign = -1 if sort == "highest" else 1

    def key(row: Row) -> tuple[int, float, str]:
        name, value = row[0], row[1]
        if value is None or math.isnan(value):
            return (1, 0.0, name)
        return (0, sign * value, name)

    return sorted(rows, key=key)


def _order_text(sort: Sort, what: str) -> str:
    return {"highest": f"highest {what} first", "lowest": f"lowest {what} first", "labels": "by labels"}[sort]


def _listing(answer: _Answer, rows: list[Row], cap: int, order: str) -> tuple[str, list[Row]]:
    """A header, at most ``cap`` lines within the budget, and how many more there were; and the
    rows whose lines it shows."""
    if not rows:
        return f"no series match (an empty {answer.result_type}){answer.notes()}", []
    count = f"{len(rows)} series" + (" read before the cut" if answer.cut else "")
    shown: list[Row] = []
    used = 0
    for row in rows[:cap]:
        used += len(row[2]) + 1
        if shown and used > OUTPUT_BUDGET_CHARS:
            break
        shown.append(row)
    more = len(rows) - len(shown)
    tail = f"\n... and {more} more series ({_NARROW})" if more else ""
    text = f"{count} ({order}):\n" + "\n".join(row[2] for row in shown) + tail + answer.notes()
    return text, shown
