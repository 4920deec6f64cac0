"""``chart_for``: which results make a chart, redaction before anything shortens, the bounds; and the
worker's events hand each chart to the presenter once."""

from __future__ import annotations

import math

import redis

from agent.events import ToolEnd
from agent.series import Series, SeriesSet
from agent.tooling import ToolCategory
from agent.types import ToolCall
from bot.keys import Keys
from bot.observability.audit import AuditLog
from bot.runs.charts import MAX_CHART_POINTS, MAX_CHART_SERIES, Chart, chart_for
from bot.runs.presenter import CardTracker, InMemoryPresenter, RunRef
from bot.runs.run_job import MAX_CHARTS_PER_SEGMENT, JobEvents
from tools.safety import Redactor

SECRET = "pX7-very-secret-label"
SERIES = SeriesSet(
    f'up{{path="/a/{SECRET}"}} or vector(1)',
    "last 5 min, step 2s",
    (Series(f'up{{path="/a/{SECRET}", job="api"}}', ((1.0, 1.0), (2.0, math.nan))),),
)


def end(series: SeriesSet | None = SERIES, *, is_error: bool = False, **changes: object) -> ToolEnd:
    call = ToolCall(id="c1", name="prometheus_range", arguments='{"query": "up"}')
    fields: dict[str, object] = {"executed": True, "evidence": "E4", "series": series, **changes}
    return ToolEnd(call, ToolCategory.READ_ONLY, "1 series", is_error, 0.1, **fields)  # type: ignore[arg-type]


def same(text: str) -> str:
    return text


def test_a_chart_names_the_evidence_id_the_tool_and_the_query() -> None:
    chart = chart_for(end(), same)
    assert chart == Chart("E4", "prometheus_range", SERIES.query, SERIES.window, SERIES.series)
    assert chart.label == "E4 · prometheus_range"


def test_names_query_and_window_go_through_the_redactor_whole() -> None:
    chart = chart_for(end(), Redactor(secrets=[SECRET]).redact)
    assert chart is not None
    texts = [chart.query, chart.window, *(s.name for s in chart.series)]
    assert all(SECRET not in text for text in texts)
    assert chart.series[0].name == 'up{path="/a/[REDACTED]", job="api"}'
    assert chart.series[0].points[0] == (1.0, 1.0) and math.isnan(chart.series[0].points[1][1])


def test_no_chart_without_series_the_model_read() -> None:
    assert chart_for(end(None), same) is None
    assert chart_for(end(SeriesSet("up", "w", ())), same) is None
    assert chart_for(end(executed=False), same) is None
    assert chart_for(end(is_error=True), same) is None


def test_an_evidence_id_that_is_not_one_is_left_out() -> None:
    chart = chart_for(end(evidence="E1 <!channel>"), same)
    assert chart is not None and chart.evidence == "" and chart.label == "prometheus_range"


def test_series_and_samples_are_bounded() -> None:
    many = tuple(Series(f"s{i}", tuple((float(t), 1.0) for t in range(12_000))) for i in range(25))
    chart = chart_for(end(SeriesSet("up", "w", many)), same)
    assert chart is not None and len(chart.series) == MAX_CHART_SERIES and chart.more == 5
    assert all(len(s.points) <= MAX_CHART_POINTS for s in chart.series)
    assert chart.series[0].points[-1][0] >= 11_997  # evenly spread to the end, not cut


def test_the_workers_events_show_one_redacted_chart_per_result(
    redis_client: redis.Redis, key_prefix: str
) -> None:
    presenter = InMemoryPresenter()
    run = RunRef("r" * 32, "C1", "1.0", "U_ALICE", card_ts="2.0")
    audit = AuditLog(redis_client, Keys(key_prefix), max_len=100)
    events = JobEvents(presenter, audit, run, CardTracker([]), redact=Redactor(secrets=[SECRET]).redact)
    events(end())
    events(end(None))
    events(end(is_error=True))
    [chart] = presenter.of("show_chart")
    assert chart.evidence == "E4" and SECRET not in chart.series[0].name


def test_a_segment_shows_a_bounded_number_of_charts(redis_client: redis.Redis, key_prefix: str) -> None:
    presenter = InMemoryPresenter()
    run = RunRef("r" * 32, "C1", "1.0", "U_ALICE", card_ts="2.0")
    events = JobEvents(presenter, AuditLog(redis_client, Keys(key_prefix), max_len=100), run, CardTracker([]))
    for n in range(MAX_CHARTS_PER_SEGMENT + 5):
        events(end(evidence=f"E{n + 1}"))
    charts = presenter.of("show_chart")
    assert [c.evidence for c in charts] == [f"E{n + 1}" for n in range(MAX_CHARTS_PER_SEGMENT)]
