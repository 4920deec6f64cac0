"""Refute and Focus on this (issue 30): a hypothesis's menu on the Findings message reaches the run
like a thread reply from the person who clicked, end to end.

The run suspends on an approval with its findings shown; people click; the resumed run's next
model request (the scripted OpenAI-compatible server records it) holds exactly the clicks that
count. Slack never sends a click from an app's account with another run's value, another channel
or another message: those are forged, signed payloads (what a holder of the signing secret, or a
replayed payload, would send), refused by what the web process checks against the run's record.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.tooling import ToolCategory
from agent.types import RunStatus
from bot.runs.approvals import ApprovalStatus
from bot.slack.rendering.blockkit import ACTION_FINDINGS
from emulator.models.openai_server import OpenAIServer, Reply
from emulator.slack import SlackEmulator, UserSpec
from tests.bot.runtimes import FileTool
from tests.bot.slack.findings_flows import (
    call,
    client,
    findings,
    findings_message,
    findings_posts,
    hypothesis,
    hypothesis_text,
    tools,
    updates_of,
    user_messages,
)
from tests.bot.slack.test_clicks import notes_to, status
from tests.support.slack_bot import SlackBot
from tests.support.slack_http import signed_post
from tests.support.slack_workspace import CHANNEL, suite_workspace
from tests.support.waiting import wait_for

PEOPLE: dict[str, str | UserSpec] = {
    "U_ALICE": "alice",
    "U_BOB": "bob",
    "U_GUEST": UserSpec("gail", guest="multi_channel", channels=(CHANNEL, "C_RANDOM")),
    "U_WORKFLOW": UserSpec("workflow", is_app_user=True),  # an app's account: it can click, not steer
}
H1 = "rotated api logs fill /var/log"
H2 = "nginx cache is full"


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:
    with SlackEmulator(suite_workspace(users=PEOPLE)) as slack:
        yield slack


@pytest.fixture
def llm() -> Iterator[OpenAIServer]:
    with OpenAIServer(model="gpt-test") as server:
        yield server


def forged(bot: SlackBot, payload: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> None:
    """A real click's payload, changed, signed and sent again."""
    copy = json.loads(json.dumps(payload))
    change(copy)
    body = urllib.parse.urlencode({"payload": json.dumps(copy)}).encode()
    answer = signed_post(bot.events_url, body, content_type="application/x-www-form-urlencoded")
    assert answer.status == 200, answer


def choose(bot: SlackBot, message: dict[str, Any], user: str, value: str) -> dict[str, Any]:
    result = bot.control.click(message["ts"], user, action_id=ACTION_FINDINGS, value=value)
    assert result["status"] == 200, result
    return dict(result["payload"])


def reactions(bot: SlackBot, thread_ts: str, ts: str) -> list[str]:
    return [r["name"] for r in bot.message(thread_ts, ts).get("reactions") or []]


def announcements(bot: SlackBot, ts: str) -> list[dict[str, Any]]:
    return [m for m in bot.bot_replies(ts) if str(m["text"]).startswith(":point_right:")]


def test_refute_and_focus_reach_the_next_request_as_replies_and_nothing_else_does(
    llm: OpenAIServer, make_bot: Callable[..., SlackBot], tmp_path: Path
) -> None:
    llm.enqueue(
        call("check_disk"),  # E1
        findings(  # E2
            "investigating",
            "low",
            hypothesis("H1", H1, "supported", ("E1", "api.log.4 1.2G")),
            hypothesis("H2", H2, "open"),
        ),
        call("restart_service", {"service": "nginx"}),  # suspends for an approval
        findings(  # after the resume: H2 refuted, edited into the same message by another worker
            "root_cause_found",
            "medium",
            hypothesis("H1", H1, "supported", ("E1", "api.log.4 1.2G")),
            hypothesis("H2", H2, "refuted"),
        ),
        Reply(text='The rotated api logs fill /var/log [E1: "api.log.4 1.2G"].'),
    )
    run_tools = [*tools(), FileTool("restart_service", ToolCategory.MUTATING, tmp_path)]
    bot = make_bot(models=[client(llm)], tools=run_tools, chatops_approvers="U_ALICE,U_BOB")
    ts = bot.mention("web-03 is out of disk")
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.AWAITING_APPROVAL
    message = findings_message(bot, ts)
    [approval] = bot.service.approvals.for_run(run_id)
    refute_h1, focus_h1 = f"refute:H1:{run_id}", f"focus:H1:{run_id}"

    # An app's account may not steer: its click stores nothing.
    choose(bot, message, "U_WORKFLOW", refute_h1)
    assert "Only a person's Slack account may steer a run" in notes_to(bot, "U_WORKFLOW")[0]

    # Forged payloads: another run, a made-up hypothesis, another channel, another message.
    payload = choose(bot, message, "U_WORKFLOW", focus_h1)
    card_ts = bot.bot_replies(ts)[0]["ts"]
    changes: list[Callable[[dict[str, Any]], None]] = [
        lambda p: p["actions"][0]["selected_option"].update(value=f"refute:H1:{'0' * 32}"),
        lambda p: p["actions"][0]["selected_option"].update(value=f"refute:H9:{run_id}"),
        lambda p: p["container"].update(channel_id="C_RANDOM"),
        lambda p: p["container"].update(message_ts=card_ts),
        lambda p: p["container"].update(thread_ts=card_ts),
    ]
    for change in changes:
        forged(bot, payload, lambda p, change=change: (change(p), p["user"].update(id="U_ALICE")))
    alice = notes_to(bot, "U_ALICE", len(changes))  # sent after the answers, in any order
    assert sum("This run has ended" in note for note in alice) == 1  # no such run: nothing to steer
    assert sum("The run's findings have no H9" in note for note in alice) == 1
    assert sum("does not belong to the Findings message" in note for note in alice) == 3
    bot.settle()
    assert bot.service.inbox.peek(run_id) == [] and announcements(bot, ts) == []

    # A guest steers like their reply would: stored, said in the thread with :eyes:, the card waits.
    choose(bot, message, "U_GUEST", focus_h1)
    announced = wait_for(lambda: announcements(bot, ts), what="the guest's click in the thread")
    assert announced[0]["text"] == f":point_right: <@U_GUEST> asks to focus on *H1*: `{H1}`"
    assert wait_for(lambda: reactions(bot, ts, announced[0]["ts"]), what=":eyes: on it") == ["eyes"]
    assert status(bot, approval.id) is ApprovalStatus.PENDING

    # The requester refutes H2: stored, and it supersedes the pending approval, as their reply would.
    choose(bot, message, "U_ALICE", f"refute:H2:{run_id}")
    assert status(bot, approval.id) is ApprovalStatus.SUPERSEDED  # decided before the click's answer
    choose(bot, message, "U_ALICE", f"refute:H2:{run_id}")  # a double click is one message
    assert any("You already sent that to the run" in n for n in notes_to(bot, "U_ALICE", len(changes) + 1))
    assert [item.user for item in bot.service.inbox.peek(run_id)] == ["U_GUEST", "U_ALICE"]

    bot.work()  # the run resumes (here: another presenter, which knows the message from the record)
    assert bot.status(run_id) is RunStatus.COMPLETED
    told = [text for request in llm.requests[3:4] for text in user_messages(request)]
    assert told[-2:] == [f"<@U_GUEST> asks to focus on H1: {H1}", f"<@U_ALICE> refutes H2: {H2}"]
    assert not any("U_WORKFLOW" in text for request in llm.requests for text in user_messages(request))

    # The resumed run's update edited the same message: H2 struck through there.
    bot.settle()
    assert len(findings_posts(bot)) == 1 and updates_of(bot, message["ts"])
    newest = findings_message(bot, ts)
    assert newest["ts"] == message["ts"]
    assert hypothesis_text(newest, "H2") == f"~H2~ · :red_circle: refuted · ~`{H2}`~"

    # After the run, the menu changes nothing.
    choose(bot, newest, "U_BOB", refute_h1)
    assert "This run has ended" in notes_to(bot, "U_BOB")[0]
