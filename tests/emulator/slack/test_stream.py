"""Streamed messages as slack_sdk sees them: chat.startStream / appendStream / stopStream, their
errors, the message the control API shows (state, tasks, appends) and feedback button clicks."""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from emulator.slack import SlackEmulator, SlackEmulatorClient
from emulator.slack.methods_stream import MAX_MARKDOWN
from tests.emulator.slack.receiver import Receiver

CHANNEL = "C_INCIDENT"


def error_of(call: Any, **kwargs: Any) -> str:
    with pytest.raises(SlackApiError) as info:
        call(**kwargs)
    return str(info.value.response["error"])


def thread_of(control: SlackEmulatorClient) -> str:
    return str(control.post_message(CHANNEL, "U_ALICE", "check the disk")["ts"])


def start(web: WebClient, thread_ts: str, **kwargs: Any) -> str:
    response = web.chat_startStream(
        channel=CHANNEL,
        thread_ts=thread_ts,
        recipient_user_id="U_ALICE",
        recipient_team_id="T_EMULATOR",
        **kwargs,
    )
    return str(response["ts"])


def streamed(control: SlackEmulatorClient, thread_ts: str, ts: str) -> dict[str, Any]:
    return next(m for m in control.thread(CHANNEL, thread_ts) if m["ts"] == ts)


def test_a_stream_is_a_reply_that_grows_then_is_finalised_with_blocks(
    web: WebClient, control: SlackEmulatorClient
) -> None:
    thread = thread_of(control)
    ts = start(
        web, thread, chunks=[{"type": "task_update", "id": "t1", "title": "df", "status": "in_progress"}]
    )
    message = streamed(control, thread, ts)
    assert message["stream"]["state"] == "streaming" and message["thread_ts"] == thread
    assert message["stream"]["tasks"] == [{"id": "t1", "title": "df", "status": "in_progress"}]

    web.chat_appendStream(
        channel=CHANNEL,
        ts=ts,
        chunks=[
            {"type": "task_update", "id": "t1", "title": "df", "status": "complete", "output": "41% used"},
            {"type": "markdown_text", "text": "The disk is "},
        ],
    )
    web.chat_appendStream(channel=CHANNEL, ts=ts, markdown_text="fine.")
    buttons = [{"type": "context_actions", "elements": [_feedback()]}]
    stopped = web.chat_stopStream(channel=CHANNEL, ts=ts, blocks=buttons)
    assert stopped["ok"]

    message = streamed(control, thread, ts)
    stream = message["stream"]
    assert stream["state"] == "completed"
    assert stream["tasks"] == [
        {"id": "t1", "title": "df", "status": "complete", "output": "41% used"}
    ]  # one task, updated in place
    assert len(stream["appends"]) == 4  # start, two appends, stop: each recorded with its chunks
    assert message["text"] == "The disk is fine."
    assert message["blocks"] == [{"type": "markdown", "text": "The disk is fine."}, *buttons]
    assert error_of(web.chat_appendStream, channel=CHANNEL, ts=ts, markdown_text="more") == (
        "message_not_in_streaming_state"
    )
    assert error_of(web.chat_stopStream, channel=CHANNEL, ts=ts) == "message_not_in_streaming_state"


def test_stream_errors_unknown_ts_not_a_stream_wrong_channel_too_long(
    emulator: SlackEmulator, web: WebClient, control: SlackEmulatorClient
) -> None:
    thread = thread_of(control)
    posted = web.chat_postMessage(channel=CHANNEL, thread_ts=thread, text="an ordinary reply")
    ts = start(web, thread)
    assert error_of(web.chat_appendStream, channel=CHANNEL, ts="1.000001", markdown_text="x") == (
        "message_not_found"
    )
    assert error_of(web.chat_appendStream, channel=CHANNEL, ts=str(posted["ts"]), markdown_text="x") == (
        "message_not_in_streaming_state"
    )
    with emulator.core.ws.lock:  # the bot in a second channel, where this stream is not
        emulator.core.ws.channels["C_RANDOM"].members.add("U_OPS")
    assert (
        error_of(web.chat_appendStream, channel="C_RANDOM", ts=ts, markdown_text="x") == "message_not_found"
    )
    too_long = "x" * (MAX_MARKDOWN + 1)
    assert error_of(web.chat_appendStream, channel=CHANNEL, ts=ts, markdown_text=too_long) == "msg_too_long"
    big = [{"type": "markdown_text", "text": "y" * MAX_MARKDOWN}]
    for _ in range(3):
        web.chat_appendStream(channel=CHANNEL, ts=ts, chunks=big)
    assert error_of(web.chat_appendStream, channel=CHANNEL, ts=ts, chunks=big) == "msg_too_long"  # 48k in all
    bad = [{"type": "task_update", "id": "t", "title": "x", "status": "exploded"}]
    assert error_of(web.chat_appendStream, channel=CHANNEL, ts=ts, chunks=bad) == "invalid_chunks"
    assert (
        error_of(web.chat_appendStream, channel=CHANNEL, ts=ts, chunks=[{"type": "nope"}]) == "invalid_chunks"
    )
    assert error_of(web.chat_appendStream, channel=CHANNEL, ts=ts) == "invalid_arguments"  # nothing to add


def test_start_stream_needs_a_thread_and_a_recipient(web: WebClient, control: SlackEmulatorClient) -> None:
    thread = thread_of(control)
    assert error_of(web.chat_startStream, channel=CHANNEL, thread_ts="1.000001") == "thread_not_found"
    assert error_of(web.chat_startStream, channel=CHANNEL, thread_ts=thread, recipient_user_id="U_ALICE") == (
        "missing_recipient_team_id"
    )
    assert error_of(
        web.chat_startStream, channel=CHANNEL, thread_ts=thread, recipient_team_id="T_EMULATOR"
    ) == ("missing_recipient_user_id")
    assert error_of(
        web.chat_startStream,
        channel="C_RANDOM",
        thread_ts=thread,
        recipient_user_id="U_ALICE",
        recipient_team_id="T_EMULATOR",
    ) == ("not_in_channel")
    calls = control.calls("chat.startStream")
    assert calls and not any(c["ok"] for c in calls)


def test_a_streams_hostile_text_shows_as_live_in_the_control_api(
    web: WebClient, control: SlackEmulatorClient
) -> None:
    """The emulator reads tasks and markdown for what is live (so bot tests can prove nothing is)."""
    thread = thread_of(control)
    ts = start(
        web, thread, chunks=[{"type": "task_update", "id": "t", "title": "<!channel>", "status": "complete"}]
    )
    web.chat_stopStream(channel=CHANNEL, ts=ts, markdown_text="[click](https://evil.example)")
    live = streamed(control, thread, ts)["live"]
    assert {"broadcast", "link"} <= {part["kind"] for part in live}
    assert any(part["disguised"] for part in live)


def test_feedback_buttons_are_clicked_like_slack_sends_them(
    web: WebClient, control: SlackEmulatorClient, receiver: Receiver
) -> None:
    thread = thread_of(control)
    ts = start(web, thread, markdown_text="answer")
    web.chat_stopStream(
        channel=CHANNEL, ts=ts, blocks=[{"type": "context_actions", "elements": [_feedback()]}]
    )
    clicked = control.click(ts, "U_BOB", value="good:1")
    action = clicked["payload"]["actions"][0]
    assert action == {**action, "type": "feedback_buttons", "action_id": "fb", "value": "good:1"}
    assert control.click(ts, "U_BOB", value="bad:1")["payload"]["actions"][0]["value"] == "bad:1"


def test_a_reply_is_waited_for_until_its_stream_is_stopped(
    web: WebClient, control: SlackEmulatorClient
) -> None:
    """``wait_for_reply`` answers a streamed reply once it is stopped, never mid-stream (its text is
    what came so far: an answer's first line, not its quotes yet). Each wait below looks once
    (``timeout=0``): the stream is held at each step by this test, not by a clock."""
    thread = thread_of(control)
    first = "db-01 is busy, and it is postgresql\n"
    quote = "reporting@orders LOG:  statement: SELECT c.region\n"

    def answer(message: dict[str, Any]) -> bool:
        return str(message["text"]).startswith("db-01 is busy")

    ts = start(web, thread, markdown_text=first)
    assert streamed(control, thread, ts)["text"] == first  # it matches, but more is coming
    with pytest.raises(TimeoutError):
        control.wait_for_reply(CHANNEL, thread, answer, timeout=0)
    web.chat_appendStream(channel=CHANNEL, ts=ts, markdown_text=quote)
    with pytest.raises(TimeoutError):
        control.wait_for_reply(CHANNEL, thread, answer, timeout=0)
    buttons = [{"type": "context_actions", "elements": [_feedback()]}]
    web.chat_stopStream(channel=CHANNEL, ts=ts, markdown_text="I changed nothing.", blocks=buttons)
    found = control.wait_for_reply(CHANNEL, thread, answer, timeout=0)
    assert found["ts"] == ts and found["text"] == first + quote + "I changed nothing."
    assert found["stream"]["state"] == "completed" and found["blocks"][-1] == buttons[0]
    # A posted reply is as it will stay (no stream): found at the first look.
    posted = web.chat_postMessage(channel=CHANNEL, thread_ts=thread, text="db-01 is busy, posted")["ts"]
    later = control.wait_for_reply(CHANNEL, thread, lambda m: m["text"] == "db-01 is busy, posted", 0)
    assert later["ts"] == posted and later["stream"] is None


def test_set_status_keeps_its_loading_messages(web: WebClient, control: SlackEmulatorClient) -> None:
    thread = thread_of(control)
    web.assistant_threads_setStatus(
        channel_id=CHANNEL, thread_ts=thread, status="is working…", loading_messages=["Reading…", "Thinking…"]
    )
    (status,) = control.statuses()
    assert status["loading_messages"] == ["Reading…", "Thinking…"]
    start(web, thread)  # the app replied in the thread: Slack clears the status
    assert control.statuses() == []


def _feedback() -> dict[str, Any]:
    return {
        "type": "feedback_buttons",
        "action_id": "fb",
        "positive_button": {"text": {"type": "plain_text", "text": "Good"}, "value": "good:1"},
        "negative_button": {"text": {"type": "plain_text", "text": "Bad"}, "value": "bad:1"},
    }
