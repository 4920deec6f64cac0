"""The Home tab lists a private channel's approvals only to its members.

A private incident channel's card is for its members alone; even the tool, the target and who
asked tell an outsider what is happening there. So an approver who is not in the channel does not
see its approvals on their Home tab (they still see the public ones), a member does, and when
Slack cannot say who is in which channel nothing is listed. Real web app, emulated Slack with a
private channel (``users.conversations`` answers as Slack does: another person's private channels
only where the bot is a member too).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest

from bot.slack.handlers.home import UNCHECKED
from emulator.slack import SlackEmulator
from tests.support.slack_bot import SlackBot
from tests.support.slack_workspace import BOT_USER, CHANNEL, suite_workspace
from tests.support.waiting import wait_for

SECRET = "C_SECRET"


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:
    config = suite_workspace(
        users={"U_ALICE": "alice", "U_BOB": "bob", "U_CAROL": "carol"},
        channels={CHANNEL: "incident", SECRET: "sec-incident-42"},
        bot_channels=(CHANNEL, SECRET),
        private_channels={SECRET: ("U_ALICE", "U_CAROL")},
    )
    with SlackEmulator(config) as slack:
        yield slack


@pytest.fixture
def bot(make_bot: Callable[..., SlackBot]) -> SlackBot:
    return make_bot(chatops_approvers=["U_BOB", "U_CAROL"], chatops_channels=[CHANNEL, SECRET])


def ask_for_a_restart(bot: SlackBot, channel: str, service: str) -> None:
    """Alice asks in ``channel``; the run waits for approval of ``restart_service``."""
    ts = str(
        bot.control.post_message(channel, "U_ALICE", f"<@{BOT_USER}> plan: restart_service {service}")["ts"]
    )
    bot.work()
    wait_for(
        lambda: next((m for m in bot.control.thread(channel, ts)[1:] if "Approval" in m["text"]), None),
        what=f"the approval card in {channel}",
    )


def home_of(bot: SlackBot, user: str) -> str:
    before = len([c for c in bot.calls("views.publish") if c["params"]["user_id"] == user])
    bot.control.open_home(user)
    wait_for(
        lambda: len([c for c in bot.calls("views.publish") if c["params"]["user_id"] == user]) > before,
        what=f"{user}'s Home tab",
    )
    view = bot.control.home(user)
    assert view is not None
    return json.dumps(view["blocks"])


def test_a_private_channels_approval_is_listed_only_to_its_members(bot: SlackBot) -> None:
    ask_for_a_restart(bot, SECRET, "payments")
    ask_for_a_restart(bot, CHANNEL, "web")
    bob = home_of(bot, "U_BOB")  # may approve both, is in #incident only
    assert f"<#{CHANNEL}>" in bob and "`restart_service`" in bob
    assert SECRET not in bob and bob.count("`restart_service`") == 1
    carol = home_of(bot, "U_CAROL")  # a member of the private channel
    assert f"<#{SECRET}>" in carol and carol.count("`restart_service`") == 2


def test_when_slack_cannot_say_who_is_where_no_approval_is_listed(bot: SlackBot) -> None:
    ask_for_a_restart(bot, SECRET, "payments")
    bot.control.inject_fault("users.conversations", kind="error", error="internal_error", count=10)
    carol = home_of(bot, "U_CAROL")
    assert "`restart_service`" not in carol and UNCHECKED.split(",")[0] in carol
