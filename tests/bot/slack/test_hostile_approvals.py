"""One click, one execution, through the web app, the Slack emulator and a real RQ worker.

A hostile model repeats approved calls and reuses call ids; a hostile clicker replays a payload
against another run's card; Redis cannot answer while someone clicks. Every case ends with as
many executions as approvals, and no click decides anything but its own card.
"""

from __future__ import annotations

import json
import os
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent.scripted import ScriptedModel, tool_call
from agent.tooling import ToolCategory
from agent.types import RunStatus
from bot.runs.approvals import ApprovalStatus
from bot.slack.rendering import render
from tests.bot.runtimes import FileTool
from tests.support.slack_bot import SlackBot
from tests.support.slack_http import signed_post
from tests.support.slack_workspace import buttons
from tests.support.waiting import wait_for
from tools.builtin.cleanup import cleanup_tools
from tools.paths import AllowedDirs


def approval_cards(bot: SlackBot, ts: str) -> list[dict[str, Any]]:
    return [m for m in bot.bot_replies(ts) if "Approval" in m.get("text", "")]


def pending_cards(bot: SlackBot, ts: str) -> list[dict[str, Any]]:
    return [m for m in approval_cards(bot, ts) if buttons(m)]


def approve_every_card(bot: SlackBot, ts: str, run_id: str, approver: str = "U_BOB") -> int:
    """Click Approve on each card as it appears, working the queue in between; returns the clicks."""
    for clicks in range(20):
        bot.work()
        if bot.status(run_id) is not RunStatus.AWAITING_APPROVAL:
            return clicks
        (card,) = wait_for(lambda: pending_cards(bot, ts) or None, what="a pending approval card")
        assert bot.control.click(card["ts"], approver, action_id=render.ACTION_APPROVE)["status"] == 200
        wait_for(lambda card=card: not buttons(bot.message(ts, card["ts"])), what="the card redrawn")
    raise AssertionError("the run kept asking")


def test_repeating_an_approved_calls_id_needs_a_new_click_each_time(
    make_bot: Callable[..., SlackBot],
) -> None:
    same = tool_call("restart_service", "call_1", service="api")
    bot = make_bot(models=[ScriptedModel([[same], [same], [same], "restarted three times"])])
    ts = bot.mention("restart the api")
    run_id = bot.run_id(ts)
    bot.work()
    (card,) = pending_cards(bot, ts)
    bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_APPROVE)
    wait_for(lambda: not buttons(bot.message(ts, card["ts"])), what="the first card decided")
    bot.work()
    assert len(bot.executions("restart_service")) == 1  # the repeat waits for its own card
    assert bot.status(run_id) is RunStatus.AWAITING_APPROVAL
    clicks = 1 + approve_every_card(bot, ts, run_id)
    assert bot.status(run_id) is RunStatus.COMPLETED
    assert len(bot.executions("restart_service")) == clicks == 3 == len(bot.service.approvals.for_run(run_id))


def test_five_calls_under_one_id_in_a_turn_need_five_clicks(make_bot: Callable[..., SlackBot]) -> None:
    turn = [tool_call("restart_service", "dup", service=f"svc{i}") for i in range(5)]
    bot = make_bot(models=[ScriptedModel([turn, "all restarted"])])
    ts = bot.mention("restart everything")
    run_id = bot.run_id(ts)
    clicks = approve_every_card(bot, ts, run_id)
    runs = bot.executions("restart_service")
    assert clicks == 5 == len(runs) and [r["arguments"]["service"] for r in runs] == [
        f"svc{i}" for i in range(5)
    ]


def test_the_mutating_cap_counts_executions(make_bot: Callable[..., SlackBot]) -> None:
    same = tool_call("restart_service", "call_1", service="api")
    bot = make_bot(models=[ScriptedModel([[same]] * 6 + ["stopping"])], chatops_max_mutating_actions=2)
    ts = bot.mention("restart the api six times")
    run_id = bot.run_id(ts)
    clicks = approve_every_card(bot, ts, run_id)
    assert clicks == 2 == len(bot.executions("restart_service"))
    # Four more calls came; none was put to anyone (refused at the cap, then stopped as a loop).
    assert len(bot.service.approvals.for_run(run_id)) == 2
    assert any("CHATOPS_MAX_MUTATING_ACTIONS=2" in (m.content or "") for m in bot.service.history(run_id))


def test_a_click_replayed_onto_another_runs_card_decides_nothing(make_bot: Callable[..., SlackBot]) -> None:
    bot = make_bot(models=[ScriptedModel([[tool_call("restart_service", service="a")], "done a"])])
    ts_a = bot.mention("restart a")
    bot.work()
    (card_a,) = pending_cards(bot, ts_a)
    approval_a = str(buttons(card_a)[0]["value"])
    bot.models = [ScriptedModel([[tool_call("restart_service", service="b")], "done b"])]
    ts_b = bot.mention("restart b", user="U_BOB")
    bot.work()
    (card_b,) = pending_cards(bot, ts_b)
    approval_b = str(buttons(card_b)[0]["value"])
    # A signed click on run B's card, carrying run A's approval id (and a click naming a channel
    # that is not the card's): neither decides A or B, neither card is redrawn.
    real = bot.control.click(card_b["ts"], "U_BOB", action_id=render.ACTION_DECLINE)["payload"]
    updates_before = len(bot.calls("chat.update"))
    for container in (
        {**real["container"], "message_ts": card_b["ts"]},
        {**real["container"], "channel_id": "C_ELSEWHERE", "message_ts": card_a["ts"]},
    ):
        forged = {
            **real,
            "container": container,
            "actions": [{**real["actions"][0], "action_id": render.ACTION_APPROVE, "value": approval_a}],
        }
        body = urllib.parse.urlencode({"payload": json.dumps(forged)}).encode()
        assert (
            signed_post(bot.events_url, body, content_type="application/x-www-form-urlencoded").status == 200
        )
    notes = wait_for(
        lambda: (
            [c for c in bot.calls("chat.postEphemeral") if "does not belong" in c["params"]["text"]][:2]
            or None
        ),
        what="the clicker told the button is not that approval's",
    )
    assert notes
    for approval_id in (approval_a, approval_b):
        approval = bot.service.approvals.get(approval_id)
        assert approval is not None and approval.status is ApprovalStatus.PENDING
    assert [c for c in bot.calls("chat.update")[updates_before:] if c["params"]["ts"] == card_b["ts"]] == []
    bot.work()
    assert bot.executions("restart_service") == []


def test_a_click_redis_cannot_decide_is_an_error_to_the_clicker_not_a_silent_200(
    make_bot: Callable[..., SlackBot],
) -> None:
    bot = make_bot()
    ts = bot.mention("plan: restart_service")
    run_id = bot.run_id(ts)
    bot.work()
    (card,) = pending_cards(bot, ts)
    broken = make_bot(redis_url="redis://127.0.0.1:9/0")  # this web process's Redis does not answer
    outcome = bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_APPROVE)
    assert outcome["status"] >= 500  # Slack shows the clicker that the click failed
    approval = bot.service.approvals.for_run(run_id)[0]
    assert approval.status is ApprovalStatus.PENDING
    bot.emulator.set_events_url(bot.events_url)  # the healthy web process again: a new click decides
    assert bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_APPROVE)["status"] == 200
    wait_for(lambda: bot.service.approvals.for_run(run_id)[0].status is ApprovalStatus.APPROVED)
    bot.work()
    assert len(bot.executions("restart_service")) == 1
    assert broken.server is not None


class ScaleTool(FileTool):
    """A mutating ``scale(service, replicas)`` that logs its executions."""

    def __init__(self, directory: Path) -> None:
        super().__init__("scale", ToolCategory.MUTATING, directory)


def card_text(card: dict[str, Any]) -> str:
    return json.dumps(card["blocks"], ensure_ascii=False)


def test_padding_cannot_push_an_argument_off_the_card(
    make_bot: Callable[..., SlackBot], tmp_path: Path
) -> None:
    padded = tool_call("scale", service="web" + " " * 3000, replicas=0)
    bot = make_bot(models=[ScriptedModel([[padded], "scaled"])], tools=[ScaleTool(tmp_path)])
    ts = bot.mention("scale web up")
    bot.work()
    (card,) = pending_cards(bot, ts)
    assert '\\"replicas\\": 0' in card_text(card)  # every argument is on the card, in full


@pytest.mark.parametrize("hidden", ["\u202e", "\u2028", "\u200b"])
def test_characters_a_card_cannot_show_are_refused_before_anyone_is_asked(
    make_bot: Callable[..., SlackBot], hidden: str
) -> None:
    call = tool_call("restart_service", service=f"api{hidden}-canary")
    bot = make_bot(models=[ScriptedModel([[call], "could not"])])
    ts = bot.mention("restart the api")
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED and approval_cards(bot, ts) == []
    (result,) = [m.content or "" for m in bot.service.history(run_id) if m.role == "tool"]
    assert result.startswith("Error: ") and "cannot be shown on an approval card" in result
    assert bot.executions("restart_service") == []


def test_a_repeated_cleanup_never_deletes_more_than_its_own_dry_run_showed(
    make_bot: Callable[..., SlackBot], tmp_path: Path
) -> None:
    logs = tmp_path / "log"
    logs.mkdir()
    old = time.time() - 30 * 86400

    def rotated(name: str) -> Path:
        path = logs / name
        path.write_bytes(b"x" * 100)
        os.utime(path, (old, old))
        return path

    rotated("app.log.1")
    (clean,) = cleanup_tools(AllowedDirs([logs]), 3600)
    call = tool_call("clean_old_logs", "same", older_than_days=7)
    bot = make_bot(models=[ScriptedModel([[call], [call], "cleaned"])], tools=[clean])
    ts = bot.mention("web-03 is out of disk")
    run_id = bot.run_id(ts)
    bot.work()
    (first,) = pending_cards(bot, ts)
    assert "app.log.1" in card_text(first) and "1 files" in card_text(first)
    later = [rotated(f"app.log.{n}") for n in (2, 3, 4)]  # old files that appear after the first dry run
    bot.control.click(first["ts"], "U_BOB", action_id=render.ACTION_APPROVE)
    wait_for(lambda: not buttons(bot.message(ts, first["ts"])), what="the first card decided")
    bot.work()
    assert not (logs / "app.log.1").exists() and all(path.exists() for path in later)
    (second,) = pending_cards(bot, ts)  # the repeat: its own dry run, its own card
    assert "3 files" in card_text(second) and bot.status(run_id) is RunStatus.AWAITING_APPROVAL
    assert all(path.exists() for path in later)  # nothing more until someone approves that card
