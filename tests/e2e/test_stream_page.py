"""A streamed answer on the emulator's page: its tasks as a timeline, the answer, and feedback
buttons whose click reaches the bot as Slack sends it (``feedback_buttons``, the button's value)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from slack_sdk import WebClient

from bot.slack.rendering.feedback_buttons import ACTION_FEEDBACK, feedback_blocks
from emulator.slack import SlackEmulator, SlackEmulatorClient
from tests.emulator.slack.receiver import Receiver
from tests.support.emulator_workspace import TOKEN, make_config

if TYPE_CHECKING:
    from playwright.sync_api import Page

RUN = "c" * 32


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    bot = Receiver()
    yield bot
    bot.close()


@pytest.fixture
def slack(receiver: Receiver) -> Iterator[SlackEmulator]:
    with SlackEmulator(make_config(events_url=receiver.url)) as emulator:
        yield emulator


def test_the_page_shows_a_stream_and_its_feedback_click_reaches_the_bot(
    page: Page, slack: SlackEmulator, receiver: Receiver
) -> None:
    from playwright.sync_api import expect

    control = SlackEmulatorClient(slack.url)
    web = WebClient(token=TOKEN, base_url=slack.api_url)
    parent = control.post_message("C_INCIDENT", "U_ALICE", "<@U_OPS> check the disk")["ts"]
    ts = web.chat_startStream(
        channel="C_INCIDENT",
        thread_ts=parent,
        recipient_user_id="U_ALICE",
        recipient_team_id="T_EMULATOR",
        chunks=[{"type": "task_update", "id": "t1", "title": "disk_usage", "status": "in_progress"}],
    )["ts"]
    page.goto(slack.url)
    streamed = page.locator(f'.message[data-ts="{ts}"]')
    expect(streamed.locator(".badge.streaming")).to_be_visible()
    expect(streamed.locator('.stream-task.in_progress[data-task-id="t1"]')).to_contain_text("disk_usage")

    web.chat_stopStream(
        channel="C_INCIDENT",
        ts=str(ts),
        chunks=[
            {
                "type": "task_update",
                "id": "t1",
                "title": "disk_usage",
                "status": "complete",
                "output": "24% used",
            },
            {"type": "markdown_text", "text": "**Fine.** &lt;!channel&gt;"},
        ],
        blocks=feedback_blocks(RUN),
    )
    expect(streamed.locator(".badge.streaming")).to_have_count(0)
    expect(streamed.locator('.stream-task.complete[data-task-id="t1"]')).to_contain_text("24% used")
    expect(streamed.locator(".markdown")).to_contain_text("Fine. <!channel>")  # shown as text
    expect(streamed.locator(".mention.broadcast")).to_have_count(0)

    streamed.locator(f'button[data-action-id="{ACTION_FEEDBACK}"][data-value="positive:{RUN}"]').click()

    def clicks() -> list[str] | None:  # interactions are form-encoded ``payload``s; events are JSON
        found = [r.form_payload for r in receiver.requests if r.body.startswith(b"payload=")]
        return found or None

    (payload,) = control.wait_for(clicks)
    (action,) = json.loads(payload)["actions"]
    assert (action["type"], action["action_id"], action["value"]) == (
        "feedback_buttons",
        ACTION_FEEDBACK,
        f"positive:{RUN}",
    )
