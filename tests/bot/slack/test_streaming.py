"""Streamed answers end to end: the web app, the Slack emulator, Redis and a real RQ worker.

A run's answer arrives as one streamed reply (``chat.startStream`` / ``appendStream`` /
``stopStream``) with its tool calls as ``task_update`` tasks and feedback buttons at the end; a
click on them is audited and counted once per person. A channel where ``chat.startStream`` is
refused gets the card and posted answer, and only that channel; hostile tool output and answers
cannot ping or spoof links in a stream; timeline updates are coalesced.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from slack_sdk import WebClient

from agent.redis_util import as_text
from agent.scripted import ScriptedModel, tool_call
from agent.tooling import ToolCategory, ToolResult
from agent.types import RunStatus, ToolDef
from bot.keys import Keys
from bot.observability.audit import AuditKind
from bot.observability.metrics import ANSWER_FEEDBACK, MetricsStore
from bot.runs.presenter import CardView, RunRef, Step, StepStatus
from bot.slack.delivery.presenter import SlackPresenter
from bot.slack.delivery.streaming import (
    APPEND_INTERVAL,
    LOADING_MESSAGES,
    MAX_STREAM_TEXT,
    AnswerStreams,
)
from bot.slack.handlers.feedback import ACTION_FEEDBACK, FeedbackOutcome
from bot.slack.rendering import render
from emulator.slack import SlackEmulator, SlackEmulatorClient
from tests.support.slack_bot import SlackBot
from tests.support.slack_workspace import BOT_USER, CHANNEL, TOKEN, suite_workspace
from tests.support.waiting import wait_for

OTHER = "C_RANDOM"
HOSTILE = (
    "<!channel> <@U_ALICE> @here @oncall #incident <https://evil.example|https://good.example> "
    "[the runbook](https://evil.example/phish) ![x](https://evil.example/i.png) [ref][1]\n[1]: https://evil.example"
)
UNSAFE_KINDS = {"broadcast", "user", "usergroup", "channel", "unknown", "date"}


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:
    """The bot is in two channels here: a fallback in one must leave the other streaming."""
    config = suite_workspace(
        bot_channels=(CHANNEL, OTHER),
    )
    with SlackEmulator(config) as slack:
        yield slack


@pytest.fixture
def streaming_bot(make_bot: Callable[..., SlackBot]) -> SlackBot:
    return make_bot(chatops_slack_streaming="auto")


class HostileTool:
    """A read-only tool whose output is an attack on the thread (and 200k characters long)."""

    name = "read_logs"
    category = ToolCategory.READ_ONLY
    parallel = False
    timeout = 30.0

    @property
    def definition(self) -> ToolDef:
        return ToolDef(name=self.name, description="Read the logs.")

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        return ToolResult(HOSTILE + " " + "A" * 200_000)

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        return None


def replies(bot: SlackBot, channel: str, ts: str) -> list[dict[str, Any]]:
    return [m for m in bot.control.thread(channel, ts)[1:] if m.get("user") == BOT_USER]


def streams(bot: SlackBot, channel: str, ts: str) -> list[dict[str, Any]]:
    return [m for m in replies(bot, channel, ts) if m.get("stream")]


def completed_streams(bot: SlackBot, ts: str, count: int) -> list[dict[str, Any]] | None:
    """The thread's streams once there are ``count`` of them, all stopped; else ``None``."""
    found = streams(bot, CHANNEL, ts)
    done = len(found) == count and all(m["stream"]["state"] == "completed" for m in found)
    return found if done else None


def stored(bot: SlackBot, channel: str, thread_ts: str) -> str:
    """The run id, once the web process has stored the mention (Slack delivers it asynchronously)."""
    key = bot.keys.slack("thread_last_run", channel, thread_ts)
    return wait_for(lambda: as_text(bot.redis.get(key)), what=f"a run in thread {thread_ts}")


def mention_in(bot: SlackBot, channel: str, text: str) -> str:
    return str(bot.control.post_message(channel, "U_ALICE", f"<@{BOT_USER}> {text}")["ts"])


def feedback_values(message: dict[str, Any]) -> list[str]:
    (block,) = [b for b in message["blocks"] if b["type"] == "context_actions"]
    (element,) = block["elements"]
    assert element["type"] == "feedback_buttons" and element["action_id"] == ACTION_FEEDBACK
    return [element["positive_button"]["value"], element["negative_button"]["value"]]


def counted(bot: SlackBot) -> dict[str, float]:
    raw = MetricsStore(bot.redis, bot.keys).read().get(ANSWER_FEEDBACK, {})
    return {json.loads(labels)[0]: float(value) for labels, value in raw.items()}


def test_the_answer_streams_with_tool_calls_as_tasks_and_feedback_buttons(streaming_bot: SlackBot) -> None:
    bot = streaming_bot
    ts = bot.mention("plan: check_health check_health")
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    card, answer = replies(bot, CHANNEL, ts)  # the run card (the durable record) and one stream
    assert card["stream"] is None and "Done" in json.dumps(card["blocks"])
    stream = answer["stream"]
    assert stream["state"] == "completed" and stream["recipient_user_id"] == "U_ALICE"
    assert [(t["title"], t["status"], t.get("output")) for t in stream["tasks"]] == [
        ("check_health", "complete", "check_health ok"),
        ("check_health", "complete", "check_health ok"),
    ]
    assert answer["text"] == "done: check_health ok"
    assert answer["blocks"][-1]["type"] == "context_actions"
    assert feedback_values(answer) == [f"positive:{run_id}", f"negative:{run_id}"]
    # The answer was not posted as well: the only chat.postMessage is the card.
    assert [c["params"].get("thread_ts") for c in bot.calls("chat.postMessage")] == [ts]
    statuses = bot.calls("assistant.threads.setStatus")
    first = statuses[0]["params"]
    assert first["status"] and first["loading_messages"] == list(LOADING_MESSAGES)  # sent as JSON

    clicked = bot.control.click(answer["ts"], "U_BOB", value=f"positive:{run_id}")
    assert clicked["status"] == 200
    bot.control.click(answer["ts"], "U_BOB", value=f"negative:{run_id}")  # a second click: not counted
    bot.control.click(answer["ts"], "U_ALICE", value=f"negative:{run_id}")
    entries = [e for e in bot.service.audit.entries(run_id) if e.kind is AuditKind.ANSWER_FEEDBACK]
    assert [(e.fields["user"], e.fields["value"]) for e in entries] == [
        ("U_BOB", "positive"),
        ("U_ALICE", "negative"),
    ]
    assert entries[0].fields["channel"] == CHANNEL and entries[0].fields["message_ts"] == answer["ts"]
    assert counted(bot) == {"positive": 1.0, "negative": 1.0}


def test_forged_feedback_counts_nothing(streaming_bot: SlackBot) -> None:
    bot = streaming_bot
    ts = bot.mention("plan: check_health")
    run_id = bot.run_id(ts)
    bot.work()
    from bot.slack.handlers.feedback import Feedback

    service = bot.service
    feedback = Feedback(bot.redis, bot.keys, service, service.audit, _metrics(bot), retention_seconds=60)
    assert (
        feedback.record(f"positive:{run_id}", "U_BOB", OTHER, "1.0") is FeedbackOutcome.REFUSED
    )  # wrong channel
    assert (
        feedback.record("positive:" + "0" * 32, "U_BOB", CHANNEL, "1.0") is FeedbackOutcome.REFUSED
    )  # no run
    assert feedback.record(f"positive:{run_id}x", "U_BOB", CHANNEL, "1.0") is FeedbackOutcome.REFUSED
    assert feedback.record(f"great:{run_id}", "U_BOB", CHANNEL, "1.0") is FeedbackOutcome.REFUSED
    assert feedback.record(f"positive:{run_id}", "<!channel>", CHANNEL, "1.0") is FeedbackOutcome.REFUSED
    assert feedback.record(f"positive:{run_id}", "U_BOB", CHANNEL, "1.0") is FeedbackOutcome.COUNTED
    assert feedback.record(f"positive:{run_id}", "U_BOB", CHANNEL, "1.0") is FeedbackOutcome.REPEAT
    assert [e.kind for e in service.audit.entries(run_id)].count(AuditKind.ANSWER_FEEDBACK) == 1
    assert counted(bot) == {"positive": 1.0}


def test_a_channel_that_refuses_streams_falls_back_alone(streaming_bot: SlackBot) -> None:
    bot = streaming_bot
    bot.control.inject_fault("chat.startStream", kind="error", error="feature_not_enabled", count=1)
    refused = bot.mention("plan: check_health")
    stored(bot, CHANNEL, refused)  # the web process has it: the worker finds its job
    bot.work()
    card, answer = replies(bot, CHANNEL, refused)
    assert answer["stream"] is None and answer["text"] == "done: check_health ok"  # today's answer
    assert "Done" in json.dumps(card["blocks"])
    no_stream = bot.keys.slack("no_stream", "workspace", CHANNEL)
    assert bot.redis.get(no_stream) == b"feature_not_enabled" and 0 < bot.redis.ttl(no_stream) <= 6 * 3600

    other = mention_in(bot, OTHER, "plan: check_health")
    stored(bot, OTHER, other)  # the web process has it: the worker finds its job
    bot.work()
    (streamed,) = streams(bot, OTHER, other)
    assert streamed["stream"]["state"] == "completed" and streamed["text"] == "done: check_health ok"

    again = bot.mention("plan: check_health")
    stored(bot, CHANNEL, again)  # the web process has it: the worker finds its job
    bot.work()
    assert [m["stream"] for m in replies(bot, CHANNEL, again)] == [None, None]  # card and posted answer
    starts = [c["params"]["channel"] for c in bot.calls("chat.startStream")]
    assert starts.count(CHANNEL) == 1 and starts.count(OTHER) == 1  # not tried there again meanwhile


def test_hostile_tool_output_and_answer_cannot_ping_or_spoof_in_the_stream(
    make_bot: Callable[..., SlackBot],
) -> None:
    answer = HOSTILE + "\n" + "B" * 20_000 + "\n" + HOSTILE  # streamed in two pieces
    calls = [tool_call("read_logs", call_id="<!here>"), tool_call("<!channel>", call_id="c2")]  # 2nd: unknown
    model = ScriptedModel([calls, answer])
    bot = make_bot(models=[model], tools=[HostileTool()], chatops_slack_streaming="auto")
    ts = bot.mention("what do the logs say?")
    stored(bot, CHANNEL, ts)  # the web process has it: the worker finds its job
    bot.work()
    (streamed,) = streams(bot, CHANNEL, ts)
    assert streamed["stream"]["state"] == "completed"
    task, unknown = streamed["stream"]["tasks"]
    assert task["status"] == "complete" and len(task["output"]) < 1_000  # not 200k characters
    assert unknown["status"] == "error" and "&lt;!channel&gt;" in unknown["title"]
    assert "here" not in task["id"]  # the task id is derived from the call id, never the text
    for message in replies(bot, CHANNEL, ts):
        unsafe = [p for p in message["live"] if p["kind"] in UNSAFE_KINDS or p.get("disguised")]
        if message["stream"] is None:  # the card names the requester itself: its only live part
            unsafe = [p for p in unsafe if (p["kind"], p["target"]) != ("user", "U_ALICE")]
        assert unsafe == [], (message["ts"], unsafe)
    assert streamed["live"] == []  # nothing at all is live in the stream
    assert "https://evil.example/phish" in streamed["text"]  # the real destination shows
    assert "the runbook (https://evil.example/phish)" in streamed["text"]
    appends = [a for a in streamed["stream"]["appends"] if a["chunks"]]
    assert all(len(c.get("text", "")) <= 12_000 for a in appends for c in a["chunks"])


class SlowTool(HostileTool):
    """A read-only tool that takes a quarter of a second: a run of them updates its card steadily."""

    name = "check_health"

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        time.sleep(0.25)
        return ToolResult("check_health ok")


def test_timeline_updates_are_coalesced_within_the_rate_tier(make_bot: Callable[..., SlackBot]) -> None:
    bot = make_bot(tools=[SlowTool()], chatops_slack_streaming="auto")
    ts = bot.mention("plan: " + " ".join(["check_health"] * 8))  # 16 card states over 2 s and more
    stored(bot, CHANNEL, ts)  # the web process has it: the worker finds its job
    bot.work()
    (streamed,) = streams(bot, CHANNEL, ts)
    tasks = streamed["stream"]["tasks"]
    assert len(tasks) == 8 and {t["status"] for t in tasks} == {"complete"}
    calls = [c for m in ("chat.startStream", "chat.appendStream", "chat.stopStream") for c in bot.calls(m)]
    assert all(c["status"] != 429 for c in calls)
    starts, appends = bot.calls("chat.startStream"), bot.calls("chat.appendStream")
    assert len(starts) == 1 and len(bot.calls("chat.stopStream")) == 1
    # Coalesced: one start, an append at most every APPEND_INTERVAL, the final states, one stop. (How
    # many appends that makes depends on how long the run took: on a busy machine, longer.)
    sent = [starts[0]["time"], *(a["time"] for a in appends[:-1])]  # the last one is final: not held
    gaps = [later - earlier for earlier, later in itertools.pairwise(sent)]
    assert all(gap >= APPEND_INTERVAL - 0.1 for gap in gaps), gaps
    span = appends[-1]["time"] - starts[0]["time"] if appends else 0.0
    assert 1 <= len(appends) <= 2 + span / APPEND_INTERVAL, [a["time"] for a in appends]


def test_a_run_suspended_for_approval_stops_its_stream_and_the_resumed_segment_opens_one(
    streaming_bot: SlackBot,
) -> None:
    bot = streaming_bot
    ts = bot.mention("plan: check_health delete_files")
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.AWAITING_APPROVAL
    # The stream is stopped by the presenter's sender after the job: waited for, not assumed.
    (first,) = wait_for(lambda: completed_streams(bot, ts, 1), what="the first segment's stream stopped")
    assert "Waiting for an approval" in first["text"]
    assert not [b for b in first["blocks"] if b["type"] == "context_actions"]  # no answer: no buttons
    card = wait_for(
        lambda: next((m for m in replies(bot, CHANNEL, ts) if "Approval" in m["text"]), None),
        what="the approval card",
    )
    bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_APPROVE)
    bot.redrawn(ts, card["ts"])  # decided: the card lost its buttons
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    first_again, second = wait_for(lambda: completed_streams(bot, ts, 2), what="the second segment's stream")
    assert first_again["ts"] == first["ts"]
    (task,) = second["stream"]["tasks"]  # this segment's call only
    assert task["title"] == "delete_files" and task["output"].endswith("approved by <@U_BOB>")
    assert second["text"] == "done: delete_files ok" and feedback_values(second)[0] == f"positive:{run_id}"


def test_an_answer_too_long_for_a_stream_is_left_to_the_posted_path(
    emulator: SlackEmulator, redis_client: redis.Redis, key_prefix: str
) -> None:
    client = WebClient(token=TOKEN, base_url=emulator.api_url)
    parent = emulator.core.post_as_user(CHANNEL, "U_ALICE", "hi", None, False)
    run = RunRef("a" * 32, CHANNEL, str(parent["ts"]), "U_ALICE")
    sent: list[str] = []

    def deliver(*args: Any) -> None:
        sent.append(args[1])

    streams_ = AnswerStreams(client, client, redis_client, Keys(key_prefix), deliver, redact=lambda t: t)
    assert streams_.answer(run, "x" * (MAX_STREAM_TEXT + 1)) is False  # posted instead (split or a file)
    assert not [
        c for c in emulator.core.ws.calls if c["method"].endswith("Stream")
    ]  # no stream opened for it
    assert sent == []


def _metrics(bot: SlackBot) -> Any:
    from bot.observability.run_metrics import RunMetrics

    return RunMetrics.for_redis(bot.redis, bot.keys)


# -- the streams of one process, against the emulator (no worker) -------------------------------------


@pytest.fixture
def parts(
    emulator: SlackEmulator, redis_client: redis.Redis, key_prefix: str
) -> tuple[AnswerStreams, RunRef]:
    """``AnswerStreams`` with a redactor, its deliveries sent at once, and a run in a fresh thread."""
    client = WebClient(token=TOKEN, base_url=emulator.api_url)

    def deliver(key: Any, method: str, send: Callable[[], object], *rest: Any) -> None:
        send()

    streams_ = AnswerStreams(
        client,
        client,
        redis_client,
        Keys(key_prefix),
        deliver,
        redact=lambda t: t.replace("s3cr3t", "[redacted]"),
    )
    parent = emulator.core.post_as_user(CHANNEL, "U_ALICE", "hi", None, False)
    return streams_, RunRef("b" * 32, CHANNEL, str(parent["ts"]), "U_ALICE")


def _card(status: RunStatus, step_status: StepStatus) -> CardView:
    step = Step(
        "call_0", "check_health", step_status, arguments='{"token": "s3cr3t"}', result="key=s3cr3t ok"
    )
    return CardView(status, (step,))


def _stream_of(emulator: SlackEmulator, thread_ts: str) -> dict[str, Any]:
    with emulator.core.ws.lock:
        (message,) = [m for m in emulator.core.ws.messages[CHANNEL].values() if m.stream]
        assert message.stream is not None
        return {"ts": message.ts, "text": message.text, **message.stream}


def test_tasks_and_answer_are_redacted_before_they_reach_slack(
    emulator: SlackEmulator, parts: tuple[AnswerStreams, RunRef], redis_client: redis.Redis, key_prefix: str
) -> None:
    """Through the presenter, as the worker calls it: its redactor runs before the stream's rule."""
    _, run = parts
    client = WebClient(token=TOKEN, base_url=emulator.api_url)
    presenter = SlackPresenter(
        client,
        redis_client,
        Keys(key_prefix),
        redact=lambda t: t.replace("s3cr3t", "[redacted]"),
        streaming=True,
    )
    presenter.update_run_card(run, _card(RunStatus.RUNNING, StepStatus.RUNNING))  # the call starts
    presenter.update_run_card(run, _card(RunStatus.COMPLETED, StepStatus.OK))  # waited for: final
    presenter.post_answer(run, "the s3cr3t is <b>fine</b>")
    stream = _stream_of(emulator, run.thread_ts)
    (task,) = stream["tasks"].values()
    assert "s3cr3t" not in json.dumps(stream) and "[redacted]" in task["output"]
    assert stream["state"] == "completed" and stream["text"] == "the [redacted] is &lt;b&gt;fine&lt;/b&gt;"


def test_a_stream_slack_closed_posts_the_answer_and_keeps_the_channel_streaming(
    emulator: SlackEmulator, parts: tuple[AnswerStreams, RunRef], redis_client: redis.Redis, key_prefix: str
) -> None:
    streams_, run = parts
    streams_.card(run, _card(RunStatus.RUNNING, StepStatus.RUNNING))
    with emulator.core.ws.lock:  # idle too long: Slack closes it
        (message,) = [m for m in emulator.core.ws.messages[CHANNEL].values() if m.stream]
        assert message.stream is not None
        message.stream["updated"] -= 3600
    assert streams_.answer(run, "the answer") is False  # posted instead
    assert not redis_client.keys(f"{key_prefix}slack:no_stream:*")  # not the channel's fault


def test_a_transient_start_failure_posts_that_answer_only(
    emulator: SlackEmulator, parts: tuple[AnswerStreams, RunRef], redis_client: redis.Redis, key_prefix: str
) -> None:
    streams_, run = parts
    SlackEmulatorClient(emulator.url).inject_fault("chat.startStream", kind="http_error", status=503, count=5)
    assert streams_.answer(run, "the answer") is False
    assert not redis_client.keys(f"{key_prefix}slack:no_stream:*")


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_the_workers_presenter_streams_only_when_the_setting_says_auto(
    mode: str,
    emulator: SlackEmulator,
    redis_client: redis.Redis,
    redis_url: str,
    key_prefix: str,
    queue_name: str,
) -> None:
    from bot.ops.compose import slack_presenter
    from tests.support.slack_workspace import make_settings

    settings = make_settings(emulator, redis_url, key_prefix, queue_name, chatops_slack_streaming=mode)
    presenter = slack_presenter(settings, redis_client, Keys(key_prefix))
    parent = emulator.core.post_as_user(CHANNEL, "U_ALICE", "hi", None, False)
    presenter.post_answer(RunRef("d" * 32, CHANNEL, str(parent["ts"]), "U_ALICE"), "the answer")
    methods = [c["method"] for c in emulator.core.ws.calls if c["method"].startswith("chat.")]
    assert methods == (["chat.startStream", "chat.stopStream"] if mode == "auto" else ["chat.postMessage"])
