"""Charts in the thread, end to end: a scripted model calls the real ``prometheus_range`` against a
local Prometheus stand-in (its answers written by the test), the real web app and an RQ worker
run the mention, and the Slack emulator receives the upload (files.getUploadURLExternal, the
bytes, files.completeUploadExternal). What people get is read back from the emulator: the
thread's messages, the shared file's object and its bytes."""

from __future__ import annotations

import io
import json
import math
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from PIL import Image

from agent.events import ToolEnd
from agent.scripted import FunctionModel, ScriptItem, last_tool_output
from agent.tooling import ToolCategory
from agent.types import Request, ToolCall
from bot.runs.charts import Chart, chart_for
from bot.slack.rendering.chart import chart_texts, render_png
from tests.support.observability import HostileHandler, HostileServer, build_tools
from tests.support.slack_bot import SlackBot, drain_sender
from tools.safety import Redactor

QUERY = 'rate(node_cpu_seconds_total{mode="user"}[5m])'
SECRET = "Zq8-label-secret-4711"
START = 1_780_000_000.0
MAX_CHART_BYTES = 120 * 1024


def matrix(series: list[tuple[dict[str, str], list[list[Any]]]]) -> bytes:
    """Prometheus's answer to a range query: each series' labels and ``[time, "value"]`` samples."""
    result = [{"metric": labels, "values": values} for labels, values in series]
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()


def four_hosts(points: int = 240) -> bytes:
    return matrix(
        [
            (
                {"instance": f"web-0{host}:9100", "mode": "user"},
                [[START + 15 * i, str(10 * host + math.sin(i / 20))] for i in range(points)],
            )
            for host in range(1, 5)
        ]
    )


@pytest.fixture
def prometheus() -> Iterator[HostileServer]:
    """A Prometheus stand-in: ``server.body`` answers every query (set it before the run)."""
    server = HostileServer()
    server.body = four_hosts()  # type: ignore[attr-defined]

    def answer(handler: HostileHandler) -> None:
        handler.reply(200, server.body)  # type: ignore[attr-defined]

    server.answer = answer
    yield server
    server.close()


def range_model(query: str = QUERY, minutes: int = 60) -> FunctionModel:
    """Calls ``prometheus_range`` once, then answers with what it read."""

    def step(request: Request) -> ScriptItem:
        if any(m.role == "tool" for m in request.messages):
            return f"done: {(last_tool_output(request.messages) or '')[:200]}"
        arguments = json.dumps({"query": query, "minutes": minutes})
        return ToolCall(id="call_0", name="prometheus_range", arguments=arguments)

    return FunctionModel(step, model="range")


def charted_bot(
    make_bot: Callable[..., SlackBot], prometheus: HostileServer, **changes: Any
) -> tuple[SlackBot, str]:
    """A bot whose one tool is ``prometheus_range`` on ``prometheus``; runs one mention to its end."""
    tools = [build_tools(prometheus_url=prometheus.url)["prometheus_range"]]
    bot = make_bot(models=[range_model()], tools=tools)
    for name, value in changes.items():
        setattr(bot, name, value)
    ts = bot.mention("how busy are the web hosts?")
    bot.work()
    drain_sender([bot.run_id(ts)])
    return bot, ts


def shared_files(bot: SlackBot, ts: str) -> list[dict[str, Any]]:
    return [f for m in bot.bot_replies(ts) for f in m.get("files") or []]


def answer_of(bot: SlackBot, ts: str) -> str:
    return next(str(m["text"]) for m in bot.bot_replies(ts) if str(m["text"]).startswith("done:"))


def download(shared: dict[str, Any]) -> bytes:
    with urllib.request.urlopen(shared["url_private"], timeout=5) as response:
        assert response.headers["Content-Type"] == "image/png"
        data: bytes = response.read()
        return data


def expected_chart(prometheus: HostileServer, redact: Callable[[str], str]) -> Chart:
    """The chart of the same call made here, redacted with ``redact``: what the bot must draw."""
    tool = build_tools(prometheus_url=prometheus.url)["prometheus_range"]
    arguments = json.dumps({"query": QUERY, "minutes": 60})
    result = tool.execute(arguments, timeout=10)
    call = ToolCall(id="call_0", name="prometheus_range", arguments=arguments)
    end = ToolEnd(
        call, ToolCategory.READ_ONLY, result.output, False, 0.0, evidence="E1", series=result.series
    )
    chart = chart_for(end, redact)
    assert chart is not None
    return chart


# -- the chart --------------------------------------------------------------------------------------


def test_a_range_result_is_one_png_in_the_thread_titled_by_its_evidence_id_and_query(
    make_bot: Callable[..., SlackBot], prometheus: HostileServer
) -> None:
    bot, ts = charted_bot(make_bot, prometheus)
    [shared] = shared_files(bot, ts)
    assert shared["title"] == f"E1 · prometheus_range: {QUERY}"
    assert (shared["mimetype"], shared["filetype"], shared["name"]) == ("image/png", "png", "chart-E1.png")
    alt = shared["alt_txt"]
    assert alt.startswith(f"Line chart of E1 · prometheus_range (last 60 min, step 30s), query {QUERY}: ")
    assert all(f'instance="web-0{host}:9100"' in alt for host in range(1, 5)) and len(alt) <= 1000
    data = download(shared)
    assert len(data) <= MAX_CHART_BYTES
    image = Image.open(io.BytesIO(data))
    assert image.format == "PNG" and image.size == (shared["original_w"], shared["original_h"])
    # One upload, shared in the run's thread, with the bot's own line naming the evidence id.
    [asked] = bot.calls("files.getUploadURLExternal")
    [completed] = bot.calls("files.completeUploadExternal")
    assert asked["ok"] and completed["ok"] and completed["params"]["thread_ts"] == ts
    [message] = [m for m in bot.bot_replies(ts) if m.get("files")]
    assert message["text"] == ":chart_with_upwards_trend: E1 · prometheus_range: 4 series"
    assert answer_of(bot, ts).startswith("done: 4 series")
    # Exactly the series the model read, drawn as the renderer draws them.
    assert data == render_png(expected_chart(prometheus, lambda text: text))


def test_a_secret_in_a_label_is_redacted_in_the_image_title_and_alt_text(
    make_bot: Callable[..., SlackBot], prometheus: HostileServer
) -> None:
    """A label value holding one of the bot's secrets (a key that does not look secret: the tool's
    own redactor already hides ``token="..."``)."""
    prometheus.body = matrix(  # type: ignore[attr-defined]
        [
            (
                {"instance": "web-01:9100", "path": f"/reset/{SECRET}"},
                [[START + 15 * i, str(i)] for i in range(60)],
            ),
            ({"instance": "web-02:9100"}, [[START + 15 * i, str(2 * i)] for i in range(60)]),
        ]
    )
    redactor = Redactor(secrets=[SECRET])
    bot, ts = charted_bot(make_bot, prometheus, redact=redactor.redact)
    [shared] = shared_files(bot, ts)
    [message] = [m for m in bot.bot_replies(ts) if m.get("files")]
    for text in (shared["title"], shared["alt_txt"], shared["name"], message["text"]):
        assert SECRET not in text
    assert '{instance="web-01:9100", path="/reset/[REDACTED]"}' in shared["alt_txt"]
    redacted = expected_chart(prometheus, redactor.redact)
    drawn = " ".join(chart_texts(redacted))
    assert SECRET not in drawn and 'path="/reset/[REDACTED]"' in drawn
    data = download(shared)
    assert data == render_png(redacted)  # the image carries exactly the redacted texts
    assert data != render_png(expected_chart(prometheus, lambda text: text))


def test_odd_samples_still_make_a_chart_and_the_run_answers(
    make_bot: Callable[..., SlackBot], prometheus: HostileServer
) -> None:
    prometheus.body = matrix(  # type: ignore[attr-defined]
        [
            ({"s": "gaps"}, [[START, "NaN"], [START + 15, "+Inf"], [START + 30, "-Inf"], [START + 45, "1"]]),
            ({"s": "huge"}, [[START, "1e308"], [START + 15, "-1.7e308"], [START + 30, "4e-320"]]),
            ({"s": "one"}, [[START + 20, "42"]]),
            ({"s": "none"}, []),
            ({"s": "junk"}, [[START, "abc"], ["later", "1"], [START, None], "x", [1e300, "2"]]),
        ]
    )
    bot, ts = charted_bot(make_bot, prometheus)
    [shared] = shared_files(bot, ts)
    Image.open(io.BytesIO(download(shared))).verify()
    assert "no numeric samples" in shared["alt_txt"]
    assert answer_of(bot, ts).startswith("done: 5 series")


def test_slack_refusing_the_upload_loses_nothing_else(
    make_bot: Callable[..., SlackBot], prometheus: HostileServer
) -> None:
    bot = make_bot(
        models=[range_model()], tools=[build_tools(prometheus_url=prometheus.url)["prometheus_range"]]
    )
    bot.control.inject_fault("files.getUploadURLExternal", kind="error", error="file_uploads_disabled")
    ts = bot.mention("how busy are the web hosts?")
    bot.work()
    drain_sender([bot.run_id(ts)])
    assert shared_files(bot, ts) == []
    assert [c["error"] for c in bot.calls("files.getUploadURLExternal")] == ["file_uploads_disabled"]
    assert bot.calls("files.completeUploadExternal") == []
    assert answer_of(bot, ts).startswith("done: 4 series")  # the answer, as without a chart
    card = bot.bot_replies(ts)[0]
    assert "Done" in json.dumps(card["blocks"])
