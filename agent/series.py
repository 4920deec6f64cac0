"""Time series a tool result lists, carried beside its text for a chart (``ToolResult.series``).

The model reads only the text; a tool that summarises series (``prometheus_range``: min, avg,
max, last per series) attaches the samples of exactly the series its text lists, in the same
order, so the bot can draw them without parsing, or trusting, any text. The loop passes them on
in ``ToolEnd.series`` only when the model read that text (not an error, not replaced by a loop
warning); they are never stored with the run nor sent to a model.

Names are label sets as the tool wrote them: data from the monitored system, untrusted, and
possibly secret. Whoever shows them redacts them first (``bot.runs.charts``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

Point = tuple[float, float]  # (Unix seconds, value); a value may be NaN or infinite


@dataclass(frozen=True)
class Series:
    """One series: its name (label set) and its samples in time order."""

    name: str
    points: tuple[Point, ...]


@dataclass(frozen=True)
class SeriesSet:
    """The series one result lists: what was asked (``query``), over what window, and the series."""

    query: str
    window: str  # the tool's own words, e.g. "last 60 min, step 15s"
    series: tuple[Series, ...]

    def redacted(self, redact: Callable[[str], str]) -> SeriesSet:
        """The same samples with the query and every name passed through ``redact``."""
        return replace(
            self,
            query=redact(self.query),
            series=tuple(replace(s, name=redact(s.name)) for s in self.series),
        )
