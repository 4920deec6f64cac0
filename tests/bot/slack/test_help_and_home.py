"""A bare mention, "help" or a greeting gets the help reply (no run, no model call); the App Home tab
shows the person's active runs and the approvals waiting for them, and nobody else's."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from agent.scripted import FunctionModel
from agent.types import Request
from bot.slack.handlers.help import asks_for_help
from tests.support.slack_bot import SlackBot
from tests.support.slack_http import event_envelope, signed_post
from tests.support.slack_workspace import BOT_USER
from tests.support.waiting import wait_for

INVENTORY = """
targets:
  - name: web-03
    via: local
    labels: {env: prod, role: web}
  - name: db-01
    via: runner
    labels: {env: staging}
"""


@pytest.mark.parametrize(
    "text",
    ["", "help", "Help!", "hi", "hello there", "hey :wave:", "what can you do?", "What do you do", "?"],
)
def test_help_and_greetings_ask_for_help(text: str) -> None:
    assert asks_for_help(text)


@pytest.mark.parametrize(
    "text",
    ["help, web-03 is out of disk", "hi, the api is down", "restart the api", "what is wrong with db-01?"],
)
def test_a_request_is_not_a_greeting(text: str) -> None:
    assert not asks_for_help(text)


def first_reply(bot: SlackBot, ts: str) -> dict[str, Any] | None:
    return next(iter(bot.bot_replies(ts)), None)


def never_called(request: Request) -> Any:
    raise AssertionError(f"the model was asked: {request.messages[-1].content!r}")


def test_a_bare_mention_gets_the_help_reply_without_a_run(
    make_bot: Callable[..., SlackBot], tmp_path: Path
) -> None:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(INVENTORY)
    bot = make_bot(
        models=[FunctionModel(never_called)],
        chatops_inventory_file=inventory,
        chatops_runner_secret="s" * 32,
    )
    for text in ("", "what can you do?"):
        ts = bot.mention(text)
        reply = wait_for(partial(first_reply, bot, ts), what="the help reply")
        body = reply["text"]
        assert f"I'm <@{BOT_USER}>" in body and "*Approve*" in body
        assert "`web-03` (env=prod, role=web) :red_circle: prod" in body and "`db-01` (env=staging)" in body
        assert f"*Example:* <@{BOT_USER}> web-03 is out of disk" in body
        bot.settle()
        assert len(bot.bot_replies(ts)) == 1
    assert bot.service.records.active_ids() == []  # no run was started
    assert bot.service.queue.count == 0


def home_blocks(bot: SlackBot, user: str) -> str:
    bot.control.open_home(user)
    view = wait_for(lambda: bot.control.home(user), what=f"{user}'s Home tab")
    assert view["type"] == "home"
    return json.dumps(view["blocks"])


def test_the_home_tab_shows_my_runs_and_the_approvals_waiting_for_me(bot: SlackBot) -> None:
    ts = bot.mention("plan: check_health restart_service", user="U_ALICE")
    run_id = bot.run_id(ts)
    bot.work()
    wait_for(lambda: next((m for m in bot.bot_replies(ts) if "Approval" in m["text"]), None))

    alice = home_blocks(bot, "U_ALICE")
    assert "Your active runs" in alice and run_id[:12] in alice and "waiting for approval" in alice
    assert "`restart_service`" in alice  # she may approve her own mutating call

    bot.control.home("U_BOB")  # nothing published for bob yet
    bob = home_blocks(bot, "U_BOB")
    assert "`restart_service`" in bob and "asked by <@U_ALICE>" in bob  # waiting for him too
    assert "You have no active runs." in bob and run_id[:12] not in bob
    [publish] = [c for c in bot.calls("views.publish") if c["params"]["user_id"] == "U_BOB"]
    assert publish["ok"]


def test_an_approval_is_not_listed_for_someone_who_may_not_approve_it(
    make_bot: Callable[..., SlackBot],
) -> None:
    bot = make_bot(chatops_approvers=["U_ALICE"])
    ts = bot.mention("plan: check_health restart_service", user="U_ALICE")
    bot.run_id(ts)
    bot.work()
    wait_for(lambda: next((m for m in bot.bot_replies(ts) if "Approval" in m["text"]), None))
    bob = home_blocks(bot, "U_BOB")
    assert "restart_service" not in bob and "Nothing is waiting for you." in bob


def test_a_forged_home_opened_shows_nobody_anything(bot: SlackBot) -> None:
    ts = bot.mention("plan: check_health restart_service", user="U_ALICE")
    bot.run_id(ts)
    bot.work()
    wait_for(lambda: next((m for m in bot.bot_replies(ts) if "Approval" in m["text"]), None))
    event = {"type": "app_home_opened", "user": "U_ALICE", "tab": "home", "channel": "D1", "event_ts": "1.0"}
    body = json.dumps(event_envelope(event, "EvFORGED1")).encode()
    forged = signed_post(bot.events_url, body, secret="not-the-signing-secret")
    assert forged.status == 401
    # Signed, but the "user" is not a Slack user ID (an attempt to publish to another field): ignored.
    odd = {**event, "user": {"id": "U_ALICE"}}
    assert signed_post(bot.events_url, json.dumps(event_envelope(odd, "EvODD1")).encode()).status == 200
    messages_tab = {**event, "tab": "messages"}
    assert (
        signed_post(bot.events_url, json.dumps(event_envelope(messages_tab, "EvMSG1")).encode()).status == 200
    )
    bot.settle()
    assert bot.calls("views.publish") == []
    assert bot.control.home("U_ALICE") is None
