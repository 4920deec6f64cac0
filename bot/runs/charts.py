"""What a chart of one tool result shows: ``Chart``, built from the loop's ``ToolEnd`` by ``chart_for``.

A tool that summarises time series (``prometheus_range``) attaches the samples of exactly the
series its text lists (``agent.series``); the loop passes them on only when the model read that
text. ``chart_for`` turns them into what people see, and is the one place they are redacted: the
query and every series name go through the run's redactor (whole, before anything shortens
them, so no cut can split a secret the redactor would have found). Presenters draw the chart
(``Presenter.show_chart``; Slack's: a PNG in the thread) and may redact again, never less.

Bounds: at most ``MAX_CHART_SERIES`` series are drawn (the tool lists at most 20), the rest are
counted; at most ``MAX_CHART_POINTS`` samples per series, evenly spread (``prometheus_range``
keeps 2,000; the renderer thins them further to its width).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from agent.events import ToolEnd
from agent.evidence import REF
from agent.series import Series

MAX_CHART_SERIES = 20
MAX_CHART_POINTS = 5000


@dataclass(frozen=True)
class Chart:
    """One tool result's series as people see them: the names and the query already redacted."""

    evidence: str  # the result's evidence id (``E3``); empty when the run gives none
    tool: str
    query: str
    window: str
    series: tuple[Series, ...]
    more: int = 0  # series of the result beyond ``MAX_CHART_SERIES``, not drawn

    @property
    def label(self) -> str:
        """``E3 · prometheus_range``: what the chart is of (the id, then the tool)."""
        return f"{self.evidence} · {self.tool}" if self.evidence else self.tool

    def redacted(self, redact: Callable[[str], str]) -> Chart:
        """The same chart with its query, window and every series name passed through ``redact``."""
        return replace(
            self,
            query=redact(self.query),
            window=redact(self.window),
            series=tuple(replace(s, name=redact(s.name)) for s in self.series),
        )


def chart_for(event: ToolEnd, redact: Callable[[str], str]) -> Chart | None:
    """The chart of a finished call whose result listed series the model read (``None``: none)."""
    found = event.series
    if found is None or not found.series or not event.executed or event.is_error:
        return None
    evidence = event.evidence if event.evidence and REF.fullmatch(event.evidence) else ""
    chart = Chart(
        evidence=evidence,
        tool=event.call.name,
        query=found.query,
        window=found.window,
        series=tuple(_bounded(s) for s in found.series[:MAX_CHART_SERIES]),
        more=max(0, len(found.series) - MAX_CHART_SERIES),
    )
    return chart.redacted(redact)


def _bounded(series: Series) -> Series:
    stride = math.ceil(len(series.points) / MAX_CHART_POINTS)
    return series if stride <= 1 else replace(series, points=series.points[::stride])
