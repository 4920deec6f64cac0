"""Who may decide, through the web app, the emulator and a worker: only full members of the workspace.

Guests, bots and apps, deactivated accounts, Slack Connect users and IDs Slack does not know
approve and decline nothing; a destructive call needs someone who did not ask for it; an
approver group that cannot be read allows nobody; a reply supersedes a card only when its author
may decide; the Transcript goes only to someone who may decide, and only to them.

Slack never sends a click from a bot, a deactivated account or an unknown ID: those are forged,
signed payloads (what an attacker holding the signing secret, or a replayed payload, would send).
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from agent.types import RunStatus
from bot.runs.approvals import ApprovalStatus
from bot.slack.rendering import render
from emulator.slack import SlackEmulator, UserSpec
from tests.bot.slack.test_clicks import approval_id_of, notes_to, pending_card, status
from tests.support.slack_bot import SlackBot
from tests.support.slack_http import signed_post
from tests.support.slack_workspace import CHANNEL, QUIET, buttons, suite_workspace
from tests.support.waiting import wait_for

PEOPLE: dict[str, str | UserSpec] = {
    "U_ALICE": "alice",
    "U_BOB": "bob",
    "U_CAROL": "carol",
    "U_GUEST": UserSpec("gail", guest="multi_channel", channels=(CHANNEL, "C_RANDOM")),
    "U_SINGLE": UserSpec("sam", guest="single_channel", channels=(CHANNEL,)),
    "U_EXT": UserSpec("erin", team_id="T_PARTNER", channels=(CHANNEL,)),
    "U_DEPLOY": UserSpec("deploybot", is_bot=True),
    "U_WORKFLOW": UserSpec("workflow", is_app_user=True),
    "U_GONE": UserSpec("gone", deleted=True),
}
GUEST = "Guest accounts may not decide"
NOT_OURS = "Only members of the bot's own workspace may decide"
NO_BOTS = "Bots and apps may not decide"
DEACTIVATED = "This account is deactivated"
UNKNOWN = "Slack does not know this account"
NOT_A_USER_ID = "Only a person's Slack account may decide"


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:
    config = suite_workspace(users=PEOPLE)
    with SlackEmulator(config) as slack:
        yield slack


def forged_click(bot: SlackBot, payload: dict[str, Any], user: str) -> None:
    """``payload`` (a real click's) sent again, signed, as if ``user`` had clicked."""
    forged = json.loads(json.dumps(payload))
    forged["user"] = {"id": user, "username": user.lower(), "name": user.lower(), "team_id": "T_EMULATOR"}
    body = urllib.parse.urlencode({"payload": json.dumps(forged)}).encode()
    answer = signed_post(bot.events_url, body, content_type="application/x-www-form-urlencoded")
    assert answer.status in (200, 503), answer  # never a decision, whatever the status


def notes(bot: SlackBot, user: str, count: int) -> list[str]:
    """The ephemeral notes (tried) to ``user``: Slack refuses those to non-members, but the bot tried."""
    return notes_to(bot, user, count)


def test_guests_bots_strangers_deactivated_and_unknown_ids_neither_approve_nor_decline(bot: SlackBot) -> None:
    ts, run_id, card = pending_card(bot, "U_ALICE", "restart_service")
    approval_id = approval_id_of(card)
    payloads: dict[str, dict[str, Any]] = {}
    for clicker in ("U_GUEST", "U_SINGLE", "U_EXT"):  # people in the channel, who really can click
        for action in (render.ACTION_APPROVE, render.ACTION_DECLINE):
            payloads[action] = bot.control.click(card["ts"], clicker, action_id=action)["payload"]
    forged = ("U_DEPLOY", "U_WORKFLOW", "U_GONE", "U_NOBODY", "B_OPS", "USLACKBOT", "U_OPS")
    for clicker in forged:
        for payload in payloads.values():
            forged_click(bot, payload, clicker)

    expected = {
        "U_GUEST": GUEST,
        "U_SINGLE": GUEST,
        "U_EXT": NOT_OURS,
        "U_DEPLOY": NO_BOTS,
        "U_WORKFLOW": NO_BOTS,
        "U_GONE": DEACTIVATED,
        "U_NOBODY": UNKNOWN,
        "B_OPS": NOT_A_USER_ID,
        "USLACKBOT": NOT_A_USER_ID,
        "U_OPS": NO_BOTS,
    }
    for clicker, reason in expected.items():
        told = notes(bot, clicker, 2)
        assert len(told) == 2 and all(reason in n and "Nothing changed" in n for n in told), (clicker, told)
    approval = bot.service.approvals.get(approval_id)
    assert approval is not None and approval.status is ApprovalStatus.PENDING and not approval.decided_by
    assert bot.control.views() == []  # no decline modal opened for anyone
    assert buttons(bot.message(ts, card["ts"]))  # the card still asks
    bot.work()
    assert bot.executions("restart_service") == [] and bot.status(run_id) is RunStatus.AWAITING_APPROVAL

    bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_APPROVE)  # a full member may
    wait_for(lambda: status(bot, approval_id) is ApprovalStatus.APPROVED, what="bob's approval")
    bot.work()
    [run] = bot.executions("restart_service")
    assert run["arguments"]["confirmed_by"] == "U_BOB"


def test_without_an_approvers_list_the_requester_may_approve_their_own_mutating_call(bot: SlackBot) -> None:
    _, run_id, card = pending_card(bot, "U_ALICE", "restart_service")
    bot.control.click(card["ts"], "U_ALICE", action_id=render.ACTION_APPROVE)
    wait_for(lambda: status(bot, approval_id_of(card)) is ApprovalStatus.APPROVED, what="alice's approval")
    bot.work()
    [run] = bot.executions("restart_service")
    assert run["arguments"]["confirmed_by"] == "U_ALICE" and bot.status(run_id) is RunStatus.COMPLETED


def involve(bot: SlackBot, approval_id: str, people: list[str]) -> None:
    """Record whose thread messages the run had read when it proposed the call (the gate's job)."""
    approval = bot.service.approvals.get(approval_id)
    assert approval is not None
    flat = approval.model_copy(update={"involved": people}).fields()
    bot.redis.hset(bot.keys.approval(approval_id), mapping=dict(zip(flat[::2], flat[1::2], strict=True)))
    stored = bot.service.approvals.get(approval_id)
    assert stored is not None and stored.involved == people


def test_nobody_whose_thread_message_led_to_a_destructive_call_may_approve_it(bot: SlackBot) -> None:
    _, run_id, card = pending_card(bot, "U_ALICE", "delete_files")
    approval_id = approval_id_of(card)
    involve(bot, approval_id, ["U_ALICE", "U_BOB"])  # bob asked for the deletion in a thread reply
    for clicker in ("U_BOB", "U_ALICE"):
        bot.control.click(card["ts"], clicker, action_id=render.ACTION_APPROVE)
        [note] = notes(bot, clicker, 1)
        assert "other than the person who asked" in note and "Nothing changed" in note
    assert status(bot, approval_id) is ApprovalStatus.PENDING
    bot.work()
    assert bot.executions("delete_files") == []

    bot.control.click(card["ts"], "U_CAROL", action_id=render.ACTION_APPROVE)  # took no part: may
    wait_for(lambda: status(bot, approval_id) is ApprovalStatus.APPROVED, what="carol's approval")
    bot.work()
    [run] = bot.executions("delete_files")
    assert run["arguments"]["confirmed_by"] == "U_CAROL" and bot.status(run_id) is RunStatus.COMPLETED


def test_a_member_who_left_the_approver_group_cannot_approve_while_the_group_cannot_be_read(
    make_bot: Callable[..., SlackBot],
) -> None:
    # A zero trust period: every click re-reads the group (and the cached list is always stale).
    bot = make_bot(chatops_approvers="S_ONCALL", tuning=replace(QUIET, approver_cache_seconds=0))
    _, run_id, card = pending_card(bot, "U_BOB", "restart_service")
    approval_id = approval_id_of(card)
    bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_APPROVE)
    assert "not on this bot's approvers list" in notes(bot, "U_BOB", 1)[0]  # the group was read: alice

    bot.control.set_usergroup_members("S_ONCALL", ["U_CAROL"])  # alice leaves on-call...
    failures = [{"kind": "error", "error": "fatal_error"}, {"kind": "ratelimited"}, {"kind": "http_error"}]
    for number, fault in enumerate(failures, 1):  # ...and the group cannot be read just then
        bot.control.inject_fault("usergroups.users.list", count=1, **fault)  # type: ignore[arg-type]
        bot.control.click(card["ts"], "U_ALICE", action_id=render.ACTION_APPROVE)
        note = notes(bot, "U_ALICE", number)[-1]
        assert "Could not read the approver group" in note and "Nothing was decided" in note
    assert status(bot, approval_id) is ApprovalStatus.PENDING

    bot.control.click(card["ts"], "U_ALICE", action_id=render.ACTION_APPROVE)  # readable again
    assert "not on this bot's approvers list" in notes(bot, "U_ALICE", 4)[-1]
    assert status(bot, approval_id) is ApprovalStatus.PENDING
    bot.control.click(card["ts"], "U_CAROL", action_id=render.ACTION_APPROVE)
    wait_for(lambda: status(bot, approval_id) is ApprovalStatus.APPROVED, what="carol's approval")
    bot.work()
    [run] = bot.executions("restart_service")
    assert run["arguments"]["confirmed_by"] == "U_CAROL" and bot.status(run_id) is RunStatus.COMPLETED


def acknowledged(bot: SlackBot, ts: str) -> None:
    """Wait for :eyes: on the reply at ``ts``: the bot stored it (store before acknowledge)."""
    wait_for(
        lambda: any(c["params"].get("timestamp") == ts for c in bot.calls("reactions.add")),
        what=f":eyes: on {ts}",
    )


def test_a_reply_supersedes_the_pending_card_only_when_its_author_may_decide(
    make_bot: Callable[..., SlackBot],
) -> None:
    bot = make_bot(chatops_approvers="U_ALICE")
    ts, run_id, card = pending_card(bot, "U_BOB", "restart_service")
    approval_id = approval_id_of(card)
    for user, text in (("U_GUEST", "cancel that restart"), ("U_CAROL", "no, do not restart")):
        acknowledged(bot, bot.say(text, user=user, thread_ts=ts))  # stored for the run...
        assert status(bot, approval_id) is ApprovalStatus.PENDING  # ...and the card still asks
    assert [i.text for i in bot.service.inbox.peek(run_id)] == ["cancel that restart", "no, do not restart"]
    assert bot.status(run_id) is RunStatus.AWAITING_APPROVAL and bot.service.queue.count == 0

    acknowledged(bot, bot.say("wait, show me the logs first", user="U_ALICE", thread_ts=ts))  # an approver
    approval = bot.service.approvals.get(approval_id)
    assert approval is not None and approval.status is ApprovalStatus.SUPERSEDED
    assert approval.decided_by == "U_ALICE"
    bot.work()
    assert bot.executions("restart_service") == [] and bot.status(run_id) is RunStatus.COMPLETED
    replies = [m.content for m in bot.service.history(run_id) if m.role == "user"][1:]
    assert replies == ["cancel that restart", "no, do not restart", "wait, show me the logs first"]


def finished_run(bot: SlackBot, requester: str = "U_ALICE") -> tuple[str, str, dict[str, Any]]:
    """A completed run whose tool output is sensitive: (thread ts, run id, finished run card)."""
    ts = bot.mention("plan: check_health", user=requester)
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED

    def card() -> dict[str, Any] | None:
        found = bot.message(ts, bot.bot_replies(ts)[0]["ts"])
        return found if any(b["action_id"] == render.ACTION_TRANSCRIPT for b in buttons(found)) else None

    return ts, run_id, wait_for(card, what="the finished run card")


def transcripts_to(bot: SlackBot, user: str | None = None) -> list[dict[str, Any]]:
    """Every transcript part the bot sent: ephemerally (to ``user``) or as a thread message."""
    sent = [
        c["params"]
        for c in bot.calls("chat.postEphemeral") + bot.calls("chat.postMessage")
        if "Transcript of run" in str(c["params"].get("text"))
    ]
    return [p for p in sent if user is None or p.get("user") == user]


def test_the_transcript_goes_only_to_someone_who_may_decide_and_only_to_them(
    make_bot: Callable[..., SlackBot],
) -> None:
    bot = make_bot(chatops_approvers="U_BOB")
    ts, run_id, card = finished_run(bot)
    for clicker, reason in (
        ("U_GUEST", GUEST),
        ("U_EXT", NOT_OURS),
        ("U_CAROL", "not on this bot's approvers"),
    ):
        bot.control.click(card["ts"], clicker, action_id=render.ACTION_TRANSCRIPT)
        [note] = notes(bot, clicker, 1)
        assert reason in note and "The transcript was not sent" in note
    forged_click(
        bot,
        bot.control.click(card["ts"], "U_GUEST", action_id=render.ACTION_TRANSCRIPT)["payload"],
        "U_NOBODY",
    )
    assert UNKNOWN in notes(bot, "U_NOBODY", 1)[0]
    assert transcripts_to(bot) == []  # nothing published, nothing sent to anyone

    bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_TRANSCRIPT)  # an approver
    parts = wait_for(lambda: transcripts_to(bot, "U_BOB"), what="the transcript, to bob")
    assert all(p["channel"] == CHANNEL and p["thread_ts"] == ts for p in parts)
    assert f"Transcript of run `{run_id[:12]}`" in parts[0]["text"] and "check_health ok" in parts[0]["text"]
    assert transcripts_to(bot) == parts  # to bob alone: no thread message, nobody else
    for viewer in ("U_ALICE", "U_CAROL", None):
        shown = bot.control.thread(CHANNEL, ts, viewer=viewer)
        assert not any("Transcript of run" in m.get("text", "") for m in shown)
