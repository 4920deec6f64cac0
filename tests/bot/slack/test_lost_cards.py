"""Cards of runs Redis lost: a click or the workers' sweep redraws them and tells the thread once.

Redis losing its data is played by deleting every key under this test's prefix on the shared
server (tests/reliability/test_redis_faults.py wipes a server of its own). A forged click
cannot redraw a message that is not a lost run's card.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable
from typing import Any

import redis

from bot.ops.worker import recovery_sweep
from bot.runs.lost_runs import LOST_NOTICE
from bot.slack.rendering import render
from tests.support.slack_bot import SlackBot
from tests.support.slack_http import signed_post
from tests.support.slack_workspace import buttons
from tests.support.waiting import wait_for


def lose_redis_data(bot: SlackBot) -> None:
    """What a Redis restarted without its data leaves of this deployment: nothing."""
    client: redis.Redis = bot.redis
    for key in client.scan_iter(match=f"{bot.settings.chatops_redis_prefix}*"):
        client.delete(key)


def waiting_for_approval(bot: SlackBot, text: str = "plan: restart_service") -> tuple[str, dict[str, Any]]:
    """A run that waits for approval: its thread and its approval card."""
    ts = bot.mention(text)
    bot.run_id(ts)
    bot.work()
    card = wait_for(lambda: next((m for m in bot.bot_replies(ts) if "Approval" in m["text"]), None))
    return ts, card


def notices(bot: SlackBot, ts: str) -> list[dict[str, Any]]:
    return [m for m in bot.bot_replies(ts) if m["text"] == LOST_NOTICE]


def lost(bot: SlackBot, ts: str, card_ts: str) -> bool:
    message = bot.message(ts, card_ts)
    return not buttons(message) and "state was lost" in json.dumps(message["blocks"])


def test_a_click_on_a_lost_runs_card_redraws_the_cards_and_tells_the_thread_once(
    make_bot: Callable[..., SlackBot],
) -> None:
    bot = make_bot()
    ts, card = waiting_for_approval(bot)
    run_card = bot.bot_replies(ts)[0]
    assert "Waiting for approval" in json.dumps(run_card["blocks"])
    lose_redis_data(bot)

    bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_APPROVE)
    wait_for(lambda: lost(bot, ts, card["ts"]) and lost(bot, ts, run_card["ts"]), what="both cards redrawn")
    assert len(wait_for(lambda: notices(bot, ts), what="the thread told")) == 1
    shown = json.dumps(bot.message(ts, run_card["ts"])["blocks"])
    assert "Waiting for approval" not in shown and "State lost" in shown
    note = wait_for(lambda: [c for c in bot.calls("chat.postEphemeral") if c["params"]["user"] == "U_BOB"])
    assert note[-1]["params"]["text"] == LOST_NOTICE

    # The workers' sweep, later, finds nothing left to redraw and tells nobody again.
    assert recovery_sweep(bot.settings, bot.redis, bot.service)() == []
    assert len(notices(bot, ts)) == 1


def test_a_stop_click_on_a_lost_runs_card_does_the_same(make_bot: Callable[..., SlackBot]) -> None:
    bot = make_bot()
    ts, card = waiting_for_approval(bot)
    run_card = bot.bot_replies(ts)[0]
    lose_redis_data(bot)
    bot.control.click(run_card["ts"], "U_ALICE", action_id=render.ACTION_STOP)
    wait_for(lambda: lost(bot, ts, card["ts"]) and lost(bot, ts, run_card["ts"]), what="both cards redrawn")
    assert len(wait_for(lambda: notices(bot, ts), what="the thread told")) == 1


def forge(bot: SlackBot, real: dict[str, Any], message_ts: str, value: str) -> None:
    """A signed click on ``message_ts`` naming ``value``, as a forger would send it."""
    forged = {
        **real,
        "container": {**real["container"], "message_ts": message_ts},
        "actions": [{**real["actions"][0], "value": value}],
    }
    body = urllib.parse.urlencode({"payload": json.dumps(forged)}).encode()
    assert signed_post(bot.events_url, body, content_type="application/x-www-form-urlencoded").status == 200


def test_a_forged_click_redraws_no_message_that_is_not_a_lost_runs_card(
    make_bot: Callable[..., SlackBot],
) -> None:
    bot = make_bot()
    ts, card = waiting_for_approval(bot)
    approval_id = str(buttons(card)[0]["value"])
    lose_redis_data(bot)
    # Kept for forging: a real click's payload on another run's card, which Redis still knows.
    other_ts, other = waiting_for_approval(bot, "plan: restart_service #other")
    real = bot.control.click(other["ts"], "U_BOB", action_id=render.ACTION_DECLINE)["payload"]
    updates = len(bot.calls("chat.update"))
    ephemerals = len(bot.calls("chat.postEphemeral"))

    forge(bot, real, ts, approval_id)  # the lost approval's id on the person's mention (not the bot's)
    forge(bot, real, bot.bot_replies(ts)[0]["ts"], approval_id)  # on the run card: no button of that value
    forge(bot, real, card["ts"], "f" * 32)  # the lost card, naming an id that is not its button's
    wait_for(
        lambda: len(bot.calls("chat.postEphemeral")) >= ephemerals + 3 or None,
        what="the three clicks answered",
    )
    redrawn = [c["params"]["ts"] for c in bot.calls("chat.update")[updates:]]
    assert card["ts"] not in redrawn and bot.bot_replies(ts)[0]["ts"] not in redrawn
    assert buttons(bot.message(ts, card["ts"])) and notices(bot, ts) == []
    assert buttons(bot.message(other_ts, other["ts"])) and notices(bot, other_ts) == []  # Redis knows it


def test_the_sweep_finds_lost_cards_without_a_click_and_leaves_known_runs_alone(
    make_bot: Callable[..., SlackBot],
) -> None:
    bot = make_bot()
    sweep = recovery_sweep(bot.settings, bot.redis, bot.service)
    sweep()  # the first start: Redis has its data (nothing in Slack is lost); the marker is written
    ts, card = waiting_for_approval(bot)
    run_card = bot.bot_replies(ts)[0]
    lose_redis_data(bot)
    known_ts, known = waiting_for_approval(bot, "plan: restart_service #after")  # a run since the loss
    updates = len(bot.calls("chat.update"))

    sweep()
    assert lost(bot, ts, card["ts"]) and lost(bot, ts, run_card["ts"])
    assert len(notices(bot, ts)) == 1
    assert buttons(bot.message(known_ts, known["ts"])) and notices(bot, known_ts) == []
    redrawn = sorted(c["params"]["ts"] for c in bot.calls("chat.update")[updates:])
    assert redrawn == sorted([card["ts"], run_card["ts"]])

    sweep()  # the marker is back: no second scan
    assert len(bot.calls("chat.update")) == updates + 2 and len(notices(bot, ts)) == 1
