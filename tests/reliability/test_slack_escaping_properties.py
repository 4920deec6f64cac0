"""Property tests of the escaping rule: no text the model or a tool wrote is live in Slack.

Whatever the text (Slack tokens, bare broadcast words, Markdown and Slack links, backticks that
move code ends, entities), every rendering path that shows it (the answer, the run card and its
notification text, the stop notice, the approval card pending and decided, the transcript, the
decline modal, a person named from text) yields a message in which the emulator's reading of
Slack's rendering (``emulator.slack.live``, stricter than Slack) finds no user, user-group,
channel or broadcast mention but the people the bot names itself, no token of unknown form, and
no link whose label is not its URL.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.tooling import ToolCategory
from agent.types import RunStatus
from bot.runs.approvals import Approval, ApprovalStatus
from bot.runs.presenter import CardView, Step, StepStatus, StopNotice
from bot.slack.rendering import render
from bot.slack.rendering.mrkdwn import mention
from emulator.slack.live import Live, live_in_message

pytestmark = pytest.mark.reliability

REQUESTER, APPROVER = "U_ALICE", "U_CAROL"  # the people the bot names itself (from Slack events, clicks)
FRAGMENTS = [
    "<@U_BOB>",
    "<@U_BOB|bob>",
    "<@W_BOB>",
    "<#C_OTHER>",
    "<#C_OTHER|other>",
    "<!subteam^S1>",
    "<!subteam^S1|@oncall>",
    "<!channel>",
    "<!here|here>",
    "<!everyone>",
    "<!date^1700000000^{date}|x>",
    "@here",
    "@channel",
    "@Everyone",
    "@oncall",
    "#incident",
    "[https://grafana.corp/d/1](https://evil.example)",
    "[label](https://evil.example|https://grafana.corp)",
    "<https://evil.example|https://grafana.corp>",
    "<https://evil.example>",
    "<mailto:a@evil.example|a@corp.example>",
    "&lt;@U_BOB&gt;",
    "&amp;",
    "`",
    "``",
    "```",
    "\n```\n",
    "**",
    "*",
    "_",
    "~",
    "|",
    "<",
    ">",
    "&",
    "[",
    "](",
    ")",
    "https://",
    "\n",
    " ",
    "# ",
    "- ",
]
PIECES = (
    st.sampled_from(FRAGMENTS)
    | st.text(alphabet="ab@#!<>|&`*_~[]():/^\n ", max_size=12)
    | st.text(max_size=6)
)
HOSTILE_TEXT = st.lists(PIECES, max_size=25).map("".join)
EXAMPLES = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def offences(message: dict[str, Any], people: frozenset[str] = frozenset()) -> list[Live]:
    """What the emulator sees live that the bot did not put there itself."""
    found = live_in_message(message)
    return [
        part
        for part in found
        if part.kind in ("channel", "usergroup", "broadcast", "unknown")
        or (part.kind == "user" and part.target not in people)
        or part.disguised
    ]


def text_message(text: str) -> dict[str, Any]:
    return {"type": "message", "text": text}


def approval(text: str, **changes: Any) -> Approval:
    base: dict[str, Any] = {
        "id": "a" * 32,
        "run_id": "r" * 32,
        "call_id": "call_1",
        "tool": "delete_files",
        "args_json": json.dumps({"target": text, "note": text, text[:20] or "k": [text]}),
        "args_sha256": "0" * 64,
        "category": ToolCategory.DESTRUCTIVE,
        "requester": REQUESTER,
        "created_at": 1_700_000_000.0,
        "expires_at": 1_700_001_800.0,
        "command": text,
        "preview": text,
        "plan_created_at": 1_699_999_990.0,
    }
    base.update(changes)
    return Approval.model_validate(base)


@EXAMPLES
@given(HOSTILE_TEXT)
def test_the_answer_is_inert(text: str) -> None:
    for chunk in render.answer_chunks(text):
        assert offences(text_message(chunk)) == [], (text, chunk)


@EXAMPLES
@given(HOSTILE_TEXT, HOSTILE_TEXT, HOSTILE_TEXT)
def test_the_run_card_and_its_text_are_inert(tool: str, argument: str, result: str) -> None:
    steps = (
        Step(
            "c1", tool, StepStatus.OK, "read_only", 0.1, arguments=json.dumps({"q": argument}), result=result
        ),
        Step("c2", "restart", StepStatus.OK, "mutating", 0.2, APPROVER, arguments=argument, result=result),
        Step("c3", tool, StepStatus.ERROR, None, arguments="{}", result=result, confirmed_by=result),
    )
    for status in (RunStatus.RUNNING, RunStatus.AWAITING_APPROVAL, RunStatus.COMPLETED):
        card = CardView(status, steps, 3, 1234)
        message = {
            "text": render.card_text("r" * 32, REQUESTER, card),
            "blocks": render.card_blocks("r" * 32, REQUESTER, card),
        }
        assert offences(message, frozenset({REQUESTER, APPROVER})) == [], (tool, argument, result)


@EXAMPLES
@given(HOSTILE_TEXT, HOSTILE_TEXT)
def test_the_stop_notice_is_inert(reason: str, result: str) -> None:
    last = Step("c1", "tail_log", StepStatus.OK, "read_only", 0.1, APPROVER, arguments=reason, result=result)
    notice = StopNotice(RunStatus.FAILED, reason, 3, 48_213, (reason, "tail_log"))
    assert offences(text_message(render.stop_notice_text(notice, last)), frozenset({APPROVER})) == []


@EXAMPLES
@given(HOSTILE_TEXT, st.sampled_from(list(ApprovalStatus)))
def test_the_approval_card_is_inert_pending_and_decided(text: str, status: ApprovalStatus) -> None:
    decided = {"decided_by": APPROVER, "decided_at": 1_700_000_100.0, "reason": text}
    card = approval(text, status=status, **({} if status is ApprovalStatus.PENDING else decided))
    message = {"text": render.approval_text(card), "blocks": render.approval_blocks(card)}
    assert offences(message, frozenset({REQUESTER, APPROVER})) == [], text


@EXAMPLES
@given(HOSTILE_TEXT)
def test_the_transcript_and_the_decline_modal_are_inert(text: str) -> None:
    for message in render.transcript_messages(text, "r" * 32):
        assert offences(text_message(message)) == [], text
    modal = render.decline_modal("a" * 32, {"channel": "C1"}, text)
    assert offences({"blocks": modal["blocks"]}) == [], text


@EXAMPLES
@given(HOSTILE_TEXT)
def test_only_a_slack_user_id_becomes_a_mention(text: str) -> None:
    named = mention(text)
    parts = live_in_message(text_message(named))
    assert all(p.kind == "user" and p.target == text and p.label is None for p in parts), (text, parts)
