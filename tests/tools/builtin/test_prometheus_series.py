"""``prometheus_range`` attaches the samples of exactly the series its text lists (``ToolResult.series``),
in its order, whatever the server sends: more series than fit, odd samples, secrets in labels.
The server is a local socket whose answers the test writes (``HostileServer``)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest

from agent.series import SeriesSet
from tests.support.observability import HostileHandler, HostileServer, build_tools
from tools.builtin.prometheus import MAX_CHART_POINTS, MAX_RANGE_SERIES_SHOWN

START = 1_780_000_000.0


@pytest.fixture
def server() -> Iterator[HostileServer]:
    hostile = HostileServer()
    yield hostile
    hostile.close()


def answering(server: HostileServer, result: list[dict[str, Any]]) -> None:
    body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()

    def answer(handler: HostileHandler) -> None:
        handler.reply(200, body)

    server.answer = answer


def ranged(server: HostileServer, **arguments: Any) -> tuple[str, SeriesSet]:
    tools = build_tools(prometheus_url=server.url, headers={"Authorization": "Bearer ${T}"}, env={"T": TOKEN})
    result = tools["prometheus_range"].execute(json.dumps({"query": "up", **arguments}), timeout=10)
    assert not result.is_error and result.series is not None, result.output
    return result.output, result.series


def listed(output: str) -> list[str]:
    """The series names the text lists, in its order."""
    return [line.rsplit(": min ", 1)[0].rsplit(": no numeric", 1)[0] for line in output.splitlines()[1:]
            if not line.startswith("...")]  # fmt: skip


TOKEN = "tok-8d1e22f0c4"


def test_the_series_are_exactly_the_listed_ones_in_their_order(server: HostileServer) -> None:
    answering(server, [{"metric": {"i": str(i)}, "values": [[START, str(i)]]} for i in range(30)])
    output, found = ranged(server)
    names = [s.name for s in found.series]
    assert len(names) == MAX_RANGE_SERIES_SHOWN and names == listed(output)
    assert names[0] == '{i="29"}'  # highest last value first, as the text
    _, by_labels = ranged(server, sort="labels")
    assert [s.name for s in by_labels.series][:3] == ['{i="0"}', '{i="1"}', '{i="10"}']


def test_a_listing_cut_by_its_character_budget_carries_only_what_it_shows(server: HostileServer) -> None:
    long = "x" * 110
    answering(
        server, [{"metric": {"a": long, "b": long, "i": str(i)}, "values": [[START, "1"]]} for i in range(20)]
    )
    output, found = ranged(server)
    assert "more series" in output.splitlines()[-1]
    assert [s.name for s in found.series] == listed(output) and len(found.series) < 20


def test_odd_samples_become_gaps_and_bad_times_are_dropped(server: HostileServer) -> None:
    values = [
        [START, "NaN"],
        [START + 1, "+Inf"],
        [START + 2, "2"],
        ["soon", "3"],
        [START + 3, None],
        [None, "4"],
        "x",
    ]
    answering(server, [{"metric": {"s": "odd"}, "values": values}])
    _, found = ranged(server)
    [odd] = found.series
    assert [when for when, _ in odd.points] == [START, START + 1, START + 2, START + 3]
    nan, inf, two, none = (value for _, value in odd.points)
    assert math.isnan(nan) and inf == math.inf and two == 2.0 and math.isnan(none)


def test_samples_are_bounded_evenly(server: HostileServer) -> None:
    answering(server, [{"metric": {}, "values": [[START + i, "1"] for i in range(10_000)]}])
    _, found = ranged(server)
    [series] = found.series
    assert len(series.points) <= MAX_CHART_POINTS and series.points[-1][0] >= START + 9_990


def test_a_header_secret_in_a_label_is_redacted_in_the_series_too(server: HostileServer) -> None:
    answering(server, [{"metric": {"echo": f"Bearer {TOKEN}"}, "values": [[START, "1"]]}])
    output, found = ranged(server)
    assert TOKEN not in output and TOKEN not in found.series[0].name
    assert found.series[0].name == listed(output)[0]


def test_an_empty_answer_carries_no_series(server: HostileServer) -> None:
    answering(server, [])
    output, found = ranged(server)
    assert output.startswith("no series match") and found.series == ()
