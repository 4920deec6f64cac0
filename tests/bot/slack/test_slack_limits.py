"""Slack's real limits and failures, against the (strict) emulator: the cards' total text, long
answers as a file, answers Slack refuses, read timeouts, where the thread status is refused, the
``app_rate_limited`` callback and other apps' messages."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import redis
from slack_sdk.errors import SlackApiError

from agent.types import RunStatus
from bot.keys import Keys
from bot.runs.presenter import CardView, RunRef, Step, StepStatus, Undeliverable
from bot.slack.delivery import thread_status
from bot.slack.delivery.answers import ANSWER_MESSAGES
from bot.slack.delivery.client import make_client
from bot.slack.delivery.presenter import STATUS_TEXT, SlackPresenter
from emulator.slack import SlackEmulator, SlackEmulatorClient, WorkspaceConfig
from emulator.slack.config import DEFAULT_SCOPES
from tests.support.slack_bot import SlackBot, drain_sender
from tests.support.slack_workspace import CHANNEL, SECRET, TOKEN, make_settings, presenter_on

RUN_ID = "f" * 32


@pytest.fixture
def presenter_and_run(
    emulator: SlackEmulator, redis_client: redis.Redis, redis_url: str, key_prefix: str
) -> Iterator[tuple[SlackPresenter, RunRef]]:
    yield presenter_on(emulator, redis_client, redis_url, key_prefix, run_id=RUN_ID)
    drain_sender([RUN_ID])  # nothing of the run still on its way to Slack once the test ends


def long_answer(paragraphs: int = 60) -> str:
    return "\n\n".join(
        f"Paragraph {i}: " + "the disk filled because of logs. " * 110 for i in range(paragraphs)
    )


# -- long answers ------------------------------------------------------------------------------


def test_a_200k_answer_is_one_message_with_the_whole_answer_attached(
    presenter_and_run: tuple[SlackPresenter, RunRef], control: SlackEmulatorClient
) -> None:
    presenter, run = presenter_and_run
    answer = long_answer()
    assert len(answer) > 200_000
    presenter.post_answer(run, answer)
    assert control.calls("chat.postMessage") == []  # not dozens of posts at one a second
    [reply] = control.thread(CHANNEL, run.thread_ts)[1:]
    assert "is attached as `answer-ffffffffffff.md`" in reply["text"]
    assert reply["text"].startswith("Paragraph 0:")
    [shared] = reply["files"]
    with urllib.request.urlopen(shared["url_private"], timeout=5) as response:
        assert response.read().decode() == answer


def test_an_answer_of_a_few_messages_is_still_posted_as_messages(
    presenter_and_run: tuple[SlackPresenter, RunRef], control: SlackEmulatorClient
) -> None:
    presenter, run = presenter_and_run
    presenter.post_answer(run, long_answer(2))
    posts = control.calls("chat.postMessage")
    assert 1 < len(posts) <= ANSWER_MESSAGES
    assert control.calls("files.completeUploadExternal") == []


def test_without_files_write_the_beginning_is_posted_and_the_rest_pointed_to(
    redis_client: redis.Redis, redis_url: str, key_prefix: str
) -> None:
    scopes = tuple(s for s in DEFAULT_SCOPES if s != "files:write")
    with SlackEmulator(WorkspaceConfig(bot_token=TOKEN, signing_secret=SECRET, scopes=scopes)) as slack:
        presenter, run = presenter_on(slack, redis_client, redis_url, key_prefix, run_id=RUN_ID)
        presenter.post_answer(run, long_answer())
        control = SlackEmulatorClient(slack.url)
        replies = control.thread(CHANNEL, run.thread_ts)[1:]
        assert len(replies) == ANSWER_MESSAGES
        assert f"`chatops runs show {RUN_ID}` shows them" in replies[-1]["text"]
        assert [c["error"] for c in control.calls("files.getUploadURLExternal")] == ["missing_scope"]


# -- answers Slack refuses -------------------------------------------------------------------


def test_an_answer_slack_refuses_for_good_is_reported_in_the_thread_not_dropped(
    presenter_and_run: tuple[SlackPresenter, RunRef], control: SlackEmulatorClient
) -> None:
    presenter, run = presenter_and_run
    control.inject_fault("chat.postMessage", kind="error", error="restricted_action", count=1)
    presenter.post_answer(run, "The answer: logs were rotated.")
    [notice] = control.thread(CHANNEL, run.thread_ts)[1:]
    assert "could not be posted here" in notice["text"] and "restricted_action" in notice["text"]
    assert f"`chatops runs show {RUN_ID}`" in notice["text"]


def test_when_even_the_notice_is_refused_the_report_hears_undeliverable(
    presenter_and_run: tuple[SlackPresenter, RunRef], control: SlackEmulatorClient
) -> None:
    presenter, run = presenter_and_run
    control.inject_fault("chat.postMessage", kind="error", error="restricted_action", count=2)
    with pytest.raises(Undeliverable):
        presenter.post_answer(run, "The answer.")


def test_a_transient_failure_raises_for_the_report_to_post_the_answer_later(
    presenter_and_run: tuple[SlackPresenter, RunRef], control: SlackEmulatorClient
) -> None:
    presenter, run = presenter_and_run
    control.inject_fault("chat.postMessage", kind="http_error", status=503, count=10)
    with pytest.raises(SlackApiError):
        presenter.post_answer(run, "The answer.")
    assert control.thread(CHANNEL, run.thread_ts)[1:] == []  # nothing claims it was posted


# -- the run card's total text ---------------------------------------------------------------


def storm_card(count: int = 60) -> CardView:
    storm = "&" * 200
    steps = tuple(
        Step(
            f"c{i}",
            "read_log",
            StepStatus.OK,
            "read_only",
            0.5,
            arguments=json.dumps({"q": storm}),
            result=storm,
        )
        for i in range(count)
    )
    return CardView(RunStatus.RUNNING, steps, count, 0)


def test_a_card_of_sixty_escaping_storms_is_posted_whole_within_slacks_total_limit(
    presenter_and_run: tuple[SlackPresenter, RunRef], control: SlackEmulatorClient
) -> None:
    presenter, run = presenter_and_run
    assert presenter.post_run_card(run, storm_card())
    [post] = control.calls("chat.postMessage")
    assert post["ok"], post["error"]
    blocks = (
        json.loads(post["params"]["blocks"])
        if isinstance(post["params"]["blocks"], str)
        else post["params"]["blocks"]
    )
    assert len(blocks) > 3 and "earlier steps" in json.dumps(blocks)  # the full card, not the plainer one


def test_msg_blocks_too_long_gets_the_plainer_card_not_a_lost_card(
    presenter_and_run: tuple[SlackPresenter, RunRef], control: SlackEmulatorClient
) -> None:
    presenter, run = presenter_and_run
    control.inject_fault("chat.postMessage", kind="error", error="msg_blocks_too_long", count=1)
    assert presenter.post_run_card(run, storm_card(3))
    first, second = control.calls("chat.postMessage")
    assert (first["error"], second["ok"]) == ("msg_blocks_too_long", True)
    [card] = control.thread(CHANNEL, run.thread_ts)[1:]
    assert [b["type"] for b in card["blocks"]] == ["section", "actions"]  # header and Stop survive


# -- read timeouts -------------------------------------------------------------------------------


def test_a_read_timeout_is_retried(
    emulator: SlackEmulator, control: SlackEmulatorClient, redis_url: str, key_prefix: str
) -> None:
    client = make_client(make_settings(emulator, redis_url, key_prefix, "unused"), timeout=1)
    control.inject_fault("conversations.info", kind="slow", delay=2.0, count=1)
    assert client.conversations_info(channel=CHANNEL)["ok"]
    assert len(control.calls("conversations.info")) == 2


# -- where the thread status is refused ------------------------------------------------------


def other_thread(control: SlackEmulatorClient, channel: str = CHANNEL) -> str:
    return str(control.post_message(channel, "U_ALICE", "another incident")["ts"])


def test_a_refusal_about_one_thread_does_not_stop_the_status_elsewhere(
    presenter_and_run: tuple[SlackPresenter, RunRef], control: SlackEmulatorClient
) -> None:
    presenter, run = presenter_and_run
    assert presenter.set_thread_status(CHANNEL, "1.000001", STATUS_TEXT) is False  # invalid_thread_ts
    assert presenter.set_thread_status(CHANNEL, "1.000001", STATUS_TEXT) is False
    assert len(control.calls("assistant.threads.setStatus")) == 1
    assert presenter.set_thread_status(run.channel, run.thread_ts, STATUS_TEXT) is True


def test_a_refusal_about_one_channel_is_kept_for_that_channel_for_an_hour(
    presenter_and_run: tuple[SlackPresenter, RunRef],
    control: SlackEmulatorClient,
    redis_client: redis.Redis,
    key_prefix: str,
) -> None:
    presenter, run = presenter_and_run
    control.inject_fault("assistant.threads.setStatus", kind="error", error="channel_type_not_supported")
    assert presenter.set_thread_status(run.channel, run.thread_ts, STATUS_TEXT) is False
    assert presenter.set_thread_status(run.channel, other_thread(control), STATUS_TEXT) is False
    elsewhere = other_thread(control, "C_RANDOM")
    assert presenter.set_thread_status("C_RANDOM", elsewhere, STATUS_TEXT) is True
    key = Keys(key_prefix).slack("no_status", "workspace", CHANNEL)
    assert 0 < redis_client.ttl(key) <= thread_status.CHANNEL_SECONDS


def test_a_refusal_of_the_method_itself_covers_the_workspace_for_an_hour_not_a_day(
    presenter_and_run: tuple[SlackPresenter, RunRef],
    control: SlackEmulatorClient,
    redis_client: redis.Redis,
    key_prefix: str,
) -> None:
    presenter, run = presenter_and_run
    control.inject_fault("assistant.threads.setStatus", kind="error", error="missing_scope")
    assert presenter.set_thread_status(run.channel, run.thread_ts, STATUS_TEXT) is False
    elsewhere = other_thread(control, "C_RANDOM")
    assert presenter.set_thread_status("C_RANDOM", elsewhere, STATUS_TEXT) is False
    assert len(control.calls("assistant.threads.setStatus")) == 1
    ttl = redis_client.ttl(Keys(key_prefix).slack("no_status", "workspace"))
    assert 0 < ttl <= thread_status.WORKSPACE_SECONDS


# -- callbacks and other apps --------------------------------------------------------------------


def test_app_rate_limited_is_answered_200_and_logged(
    bot: SlackBot, control: SlackEmulatorClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="bot.slack.handlers.callbacks"):
        answer = control.send_app_rate_limited(1_700_000_040)
    assert (answer["ok"], answer["status"]) == (True, 200)
    assert any("2023-11-14 22:14 UTC" in r.getMessage() for r in caplog.records)


def test_an_unsigned_app_rate_limited_is_refused(bot: SlackBot) -> None:
    body = json.dumps(
        {"type": "app_rate_limited", "team_id": "T_EMULATOR", "minute_rate_limited": 1}
    ).encode()
    request = urllib.request.Request(bot.events_url, data=body, headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=5)
    assert info.value.code == 401


def test_another_bot_mentioning_the_app_starts_nothing(bot: SlackBot, control: SlackEmulatorClient) -> None:
    posted = control.post_as_bot(
        CHANNEL, "B_PAGER", "<@U_OPS> plan: delete_files everything", username="pager"
    )
    assert posted["event_types"] == ["app_mention", "message"]
    bot.settle()
    assert all(d["status"] == 200 for d in control.deliveries())
    assert bot.calls("chat.postMessage") == [] and bot.calls("chat.postEphemeral") == []


def test_the_attached_answer_is_redacted_like_every_message(
    emulator: SlackEmulator,
    control: SlackEmulatorClient,
    redis_client: redis.Redis,
    redis_url: str,
    key_prefix: str,
) -> None:
    presenter, run = presenter_on(
        emulator,
        redis_client,
        redis_url,
        key_prefix,
        run_id=RUN_ID,
        redact=lambda t: t.replace("hunter2", "[redacted]"),
    )
    presenter.post_answer(run, long_answer() + "\n\nThe password is hunter2.")
    [shared] = control.files()
    with urllib.request.urlopen(shared["url_private"], timeout=5) as response:
        content = response.read().decode()
    assert "hunter2" not in content and content.endswith("The password is [redacted].")
