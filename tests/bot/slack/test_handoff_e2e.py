"""``/ops handoff [#channel ...] [--since 12h] [--post]`` through the real web app and the Slack
emulator: ``--post`` writes only into a channel the asker is a member of and the bot serves, and
only what everyone there may see (a private channel's incident stays in it); ``--since`` is the
CLI's parser; a forged slash command (not signed with the app's secret) does nothing."""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.ops.compose_changes import change_journal
from bot.ops.fleet import load_fleet_inventory
from bot.slack.handlers.handoff import NOT_HERE, USAGE
from emulator.slack import SlackEmulator
from emulator.slack.config import UserSpec
from tests.bot.slack.test_clicks import notes_to
from tests.support.slack_bot import SlackBot
from tests.support.slack_http import signed_post
from tests.support.slack_workspace import BOT_USER, CHANNEL, suite_workspace
from tests.support.waiting import wait_for
from tools.changes.record import DEPLOY, Change

SECRET_CHANNEL = "C_SECRET"
OPS = "C_OPS"  # public, served by the bot; eve is not in it


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:
    config = suite_workspace(
        users={
            "U_ALICE": "alice",
            "U_BOB": "bob",
            "U_CAROL": "carol",
            "U_EVE": UserSpec("eve", channels=(CHANNEL,)),
        },
        channels={CHANNEL: "incident", OPS: "ops", SECRET_CHANNEL: "sec-incident-42"},
        bot_channels=(CHANNEL, OPS, SECRET_CHANNEL),
        private_channels={SECRET_CHANNEL: ("U_ALICE", "U_CAROL")},
    )
    with SlackEmulator(config) as slack:
        yield slack


@pytest.fixture
def bot(make_bot: Callable[..., SlackBot]) -> SlackBot:
    bot = make_bot(chatops_approvers=["U_BOB", "U_CAROL"], chatops_channels=[CHANNEL, OPS, SECRET_CHANNEL])
    ts = str(
        bot.control.post_message(
            SECRET_CHANNEL, "U_ALICE", f"<@{BOT_USER}> plan: restart_service <!channel> *x*"
        )["ts"]
    )
    bot.work()
    wait_for(
        lambda: next(
            (m for m in bot.control.thread(SECRET_CHANNEL, ts)[1:] if "Approval" in m["text"]), None
        ),
        what="the private channel's approval card",
    )
    return bot


def posted(bot: SlackBot, channel: str) -> list[str]:
    return [
        str(c["params"]["text"])
        for c in bot.calls("chat.postMessage")
        if c["params"].get("channel") == channel
        and str(c["params"].get("text", "")).startswith("Shift handoff")
    ]


def command_body(user: str, channel: str, text: str) -> bytes:
    form = {
        "team_id": "T_TEST",
        "channel_id": channel,
        "user_id": user,
        "user_name": user.lower(),
        "command": "/ops",
        "text": text,
        "api_app_id": "A_TEST",
        "response_url": "https://hooks.slack.invalid/commands/x",
        "trigger_id": "1.2",
    }
    return urllib.parse.urlencode(form).encode()


def test_ops_handoff_lists_a_waiting_approval_only_to_who_may_see_its_channel(bot: SlackBot) -> None:
    bot.control.command("U_EVE", CHANNEL, "/ops", "handoff")  # not a member of the private channel
    [eve] = notes_to(bot, "U_EVE", 1)
    assert eve.startswith("```Shift handoff:") and "restart_service" not in eve and SECRET_CHANNEL not in eve
    assert "Approvals waiting:\n  none" in eve
    bot.control.command("U_CAROL", CHANNEL, "/ops", f"handoff <#{SECRET_CHANNEL}|sec-incident-42>")
    [carol] = notes_to(bot, "U_CAROL", 1)
    assert "approval of restart_service waiting" in carol and "asked by U_ALICE" in carol
    assert "<!channel>" not in carol and "&lt;!channel&gt;" in carol  # the request's text, inert


def test_post_writes_in_the_asking_channel_only_what_its_members_may_see(bot: SlackBot) -> None:
    bot.control.command("U_CAROL", CHANNEL, "/ops", "handoff --post --since 2h")
    assert notes_to(bot, "U_CAROL", 1) == ["The handoff is posted in this channel."]
    [public] = posted(bot, CHANNEL)
    assert public.startswith("Shift handoff, asked for by <@U_CAROL>:\n```Shift handoff:")
    assert "restart_service" not in public and SECRET_CHANNEL not in public  # carol may see it; not all here
    bot.control.command("U_CAROL", SECRET_CHANNEL, "/ops", f"handoff --post <#{SECRET_CHANNEL}|sec>")
    assert notes_to(bot, "U_CAROL", 2)[-1] == "The handoff is posted in this channel."
    [private] = posted(bot, SECRET_CHANNEL)
    assert "approval of restart_service waiting" in private and "asked by U_ALICE" in private
    assert "<!channel>" not in private and "&lt;!channel&gt;" in private  # the request's text, inert


def test_post_into_a_channel_the_asker_is_not_in_is_refused(bot: SlackBot) -> None:
    for channel in (OPS, SECRET_CHANNEL):  # as Slack would deliver them, signed: eve is in neither
        answer = signed_post(
            bot.events_url,
            command_body("U_EVE", channel, "handoff --post"),
            content_type="application/x-www-form-urlencoded",
        )
        assert answer.status == 200

    def refusals() -> list[dict[str, Any]] | None:
        found = [c for c in bot.calls("chat.postEphemeral") if c["params"].get("user") == "U_EVE"]
        return found if len(found) == 2 else None

    assert {c["params"]["text"] for c in wait_for(refusals, what="both refusals")} == {NOT_HERE}
    assert posted(bot, OPS) == [] and posted(bot, SECRET_CHANNEL) == []


def test_since_is_parsed_as_the_clis_and_a_forged_command_does_nothing(bot: SlackBot) -> None:
    forged = signed_post(
        bot.events_url,
        command_body("U_CAROL", SECRET_CHANNEL, "handoff --post"),
        secret="not-the-signing-secret",
        content_type="application/x-www-form-urlencoded",
    )
    assert forged.status == 401
    bot.control.command("U_EVE", CHANNEL, "/ops", "handoff --since yesterday")
    bot.control.command("U_EVE", CHANNEL, "/ops", "handoff --since=90m --bogus")
    bot.control.command("U_EVE", CHANNEL, "/ops", "handoff --since=90m")
    notes = notes_to(bot, "U_EVE", 3)  # answered in any order
    [handoff] = [note for note in notes if note != USAGE]
    assert notes.count(USAGE) == 2 and handoff.startswith("```Shift handoff:")
    assert "restart_service" not in handoff  # a private channel's approval, to a non-member
    assert not [c for c in bot.calls("chat.postEphemeral") if c["params"].get("user") == "U_CAROL"]
    assert posted(bot, SECRET_CHANNEL) == []


INVENTORY = """
targets:
  - name: web-03
    via: local
    labels: {role: web}
  - name: db-01
    via: runner
    labels: {role: db}
  - name: cache-01
    via: runner
    labels: {role: cache}
"""


def test_the_journal_shows_only_targets_of_channels_the_reader_may_see(
    make_bot: Callable[..., SlackBot], tmp_path: Path
) -> None:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(INVENTORY)
    bot = make_bot(
        chatops_channels=[CHANNEL, OPS, SECRET_CHANNEL],
        chatops_inventory_file=inventory,
        chatops_runner_secret="s" * 32,
        chatops_channel_targets={CHANNEL: "role=cache", OPS: "role=web", SECRET_CHANNEL: "role=db"},
    )
    journal = change_journal(bot.redis, bot.settings, load_fleet_inventory(bot.settings))
    now = time.time()
    journal.append(
        [Change("web-03", DEPLOY, now - 60, "deploy api 1.4.2 <!channel>", who="ci", source="cli")]
    )
    journal.append([Change("db-01", DEPLOY, now - 30, "migrate the secret schema", who="ci", source="cli")])
    bot.control.command("U_EVE", CHANNEL, "/ops", "handoff")  # not in the private channel
    bot.control.command("U_ALICE", CHANNEL, "/ops", f"handoff <#{OPS}|ops>")  # in it, but names another
    bot.control.command("U_CAROL", CHANNEL, "/ops", "handoff --post")
    [eve] = notes_to(bot, "U_EVE", 1)
    [alice] = notes_to(bot, "U_ALICE", 1)
    assert "deploy on web-03: deploy api 1.4.2 &lt;!channel&gt; (by ci, cli)" in eve  # a public channel's
    assert "migrate" not in eve and "db-01" not in eve  # only the private channel names db-01
    assert "deploy api 1.4.2" in alice and "migrate" not in alice
    assert notes_to(bot, "U_CAROL", 1) == ["The handoff is posted in this channel."]
    [public] = posted(bot, CHANNEL)
    assert "deploy api 1.4.2" in public and "migrate" not in public  # not posted out of the private channel
    bot.control.command("U_CAROL", SECRET_CHANNEL, "/ops", "handoff")
    assert "migrate the secret schema" in notes_to(bot, "U_CAROL", 2)[-1]
