"""The chart's PNG, title and alt text: any data draws (a property test over hostile floats and text),
the texts are inert and within Slack's limits, the bench's size holds, the axes read well."""

from __future__ import annotations

import io
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from agent.series import Series
from bot.runs.charts import Chart
from bot.slack.delivery.charts import chart_comment
from bot.slack.rendering.chart import (
    ALT_TEXT_LIMIT,
    TITLE_LIMIT,
    WIDTH,
    chart_alt_text,
    chart_file_name,
    chart_texts,
    chart_title,
    inert,
    render_png,
)
from bot.slack.rendering.chart_axes import MAX_TICKS, number_text, time_axis, value_axis

START = 1_780_000_000.0


def chart(*series: Series, query: str = "up", more: int = 0) -> Chart:
    return Chart("E7", "prometheus_range", query, "last 60 min, step 15s", series, more)


def drawn(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    assert image.format == "PNG" and image.size[0] == WIDTH
    return image


def wave(name: str, points: int, phase: float = 0.0) -> Series:
    return Series(name, tuple((START + 5 * i, 50 + 20 * math.sin(i / 30 + phase)) for i in range(points)))


floats = st.floats(allow_nan=True, allow_infinity=True)
names = st.text(max_size=300)  # any code point: controls, bidi overrides, surrogates' neighbours
series = st.builds(Series, names, st.lists(st.tuples(floats, floats), max_size=40).map(tuple))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(series, min_size=1, max_size=6), names)
def test_any_data_and_any_text_draw_a_png_with_texts_in_bounds(found: list[Series], query: str) -> None:
    subject = chart(*found, query=query)
    drawn(render_png(subject))
    title, alt = chart_title(subject), chart_alt_text(subject)
    assert len(title) <= TITLE_LIMIT and len(alt) <= ALT_TEXT_LIMIT
    for text in (title, alt, *chart_texts(subject)):
        assert "\n" not in text and "\u202e" not in text and "\u200b" not in text


def test_four_series_of_720_points_fit_the_size_target() -> None:
    four = chart(*(wave(f'node_load1{{instance="web-0{h}:9100"}}', 720, h) for h in range(4)))
    data = render_png(four)
    assert len(data) <= 120 * 1024  # the bench's target (bench/charts.py measures the time)
    assert drawn(data).size == (WIDTH, 408)


def test_odd_series_draw_and_say_what_they_lack() -> None:
    odd = chart(
        Series("empty", ()),
        Series("one", ((START, 5.0),)),
        Series(
            "gaps", ((START, math.nan), (START + 5, math.inf), (START + 10, 1.0), (START + 15, -math.inf))
        ),
        Series("huge", ((START, 1.7e308), (START + 5, -1.7e308), (START + 10, 5e-324))),
        Series("times", ((math.inf, 1.0), (math.nan, 2.0), (-1e300, 3.0), (START, 4.0))),
        more=3,
    )
    drawn(render_png(odd))
    texts = chart_texts(odd)
    assert "empty  no numeric samples" in texts and "… and 3 more series, not drawn" in texts
    assert "3 more series not drawn" in chart_alt_text(odd)


def test_nothing_numeric_at_all_is_said_on_the_plot() -> None:
    empty = chart(Series("a", ((START, math.nan),)))
    drawn(render_png(empty))
    assert "no numeric samples" in chart_texts(empty)


def test_a_long_series_costs_its_width_and_keeps_its_spike() -> None:
    points = [(START + i, 1.0) for i in range(100_000)]
    points[54_321] = (START + 54_321, 1000.0)
    spiky = chart(Series("spiky", tuple(points)))
    drawn(render_png(spiky))
    assert "spiky  last 1" in chart_texts(spiky) and "1k" in chart_texts(spiky)


def test_texts_are_inert_and_shortened() -> None:
    assert inert("a\nb\u202ec\u200bd\x00e\tf") == "a bcd e f"
    hostile = chart(Series("x" * 5000, ((START, 1.0),)), query="q\n" * 500)
    texts = chart_texts(hostile)
    assert all(len(text) < 200 for text in texts)
    assert chart_title(hostile).endswith("…") and chart_title(hostile).startswith(
        "E7 · prometheus_range: q q"
    )


def test_the_file_is_named_by_the_evidence_id_only() -> None:
    assert chart_file_name(chart(wave("a", 3))) == "chart-E7.png"
    nameless = Chart("", "prometheus_range", "up", "w", (wave("a", 3),))
    assert chart_file_name(nameless) == "chart-series.png" and chart_title(nameless) == "prometheus_range: up"


def test_value_axes_read_well_whatever_the_range() -> None:
    assert value_axis([0.0, 97.0]).labels == ("0", "20", "40", "60", "80")
    assert value_axis([1200.0, 5400.0]).labels == ("2k", "3k", "4k", "5k")
    assert value_axis([3.0, 3.0]).labels == ("2.8", "3", "3.2")
    assert value_axis([]).labels == ()
    for values in ([-1e300, 1e300], [5e-324, 0.0], [1e16, 1e16 + 2], [0.1, 0.1 + 1e-17]):
        axis = value_axis(values)
        assert 1 <= len(axis.ticks) <= MAX_TICKS and axis.high > axis.low


def test_time_axes_are_utc_and_as_precise_as_their_step() -> None:
    hour = time_axis([START, START + 3600], 720)
    assert hour.labels[0] == "20:30" and all(len(label) == 5 for label in hour.labels)
    assert time_axis([START, START + 120], 720).labels[0].count(":") == 2
    week = time_axis([START, START + 7 * 86400], 720)
    assert week.labels[0] == "2026-05-29"
    assert time_axis([1e300, 2e300], 720).labels  # no calendar time: numbers, no error


def test_numbers_are_short() -> None:
    texts = [number_text(v) for v in (0, 850, 12.5, 1234, 3.4e9, 1.5e18, 0.00004, -2500)]
    assert texts == ["0", "850", "12.5", "1.23k", "3.4G", "1.5e+18", "4e-05", "-2.5k"]


def test_the_message_with_the_chart_carries_no_text_from_the_data_or_the_model() -> None:
    hostile = Chart("E7", "prometheus_range", "<!channel> *now*", "w", (Series("<@U0ADMIN> <!here>", ()),))
    assert chart_comment(hostile) == ":chart_with_upwards_trend: E7 · prometheus_range: 1 series"
    odd_tool = Chart("", "tool<!channel>", "q", "w", (Series("a", ()), Series("b", ())), more=1)
    assert chart_comment(odd_tool) == ":chart_with_upwards_trend: tool&lt;!channel&gt;: 3 series"
