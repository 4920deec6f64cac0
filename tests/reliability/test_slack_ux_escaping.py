"""Property tests for the texts of the Slack experience: the approval card's "why" line, the
transcript as Slack reads it, the Home tab and the answer's people (Hypothesis, 300 each)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given

from bot.observability.transcript import CallView, Step, Transcript
from bot.runs.approvals import ApprovalStatus
from bot.runs.record import RunRecord
from bot.slack.handlers.home import HomeContent, home_view
from bot.slack.rendering import render
from bot.slack.rendering.transcript_text import transcript_messages
from tests.reliability.test_slack_escaping_properties import (
    APPROVER,
    EXAMPLES,
    HOSTILE_TEXT,
    REQUESTER,
    approval,
    offences,
    text_message,
)

pytestmark = pytest.mark.reliability
CHANNEL = "C_INCIDENT"  # the run's own channel: the bot links it itself


def foreign(message: dict[str, object], people: frozenset[str]) -> list[object]:
    return [p for p in offences(message, people) if not (p.kind == "channel" and p.target == CHANNEL)]


@EXAMPLES
@given(HOSTILE_TEXT)
def test_the_why_line_is_inert(text: str) -> None:
    card = approval(text, rationale=text)
    message = {"text": render.approval_text(card), "blocks": render.approval_blocks(card)}
    assert offences(message, frozenset({REQUESTER})) == [], text


@EXAMPLES
@given(HOSTILE_TEXT)
def test_the_transcript_for_slack_is_inert(text: str) -> None:
    call = CallView(id="c1", tool=text, arguments=text, category=text, outcome="ok", output=text)
    transcript = Transcript(
        run_id="r" * 32,
        channel=CHANNEL,
        thread_ts="1.0",
        requester=REQUESTER,
        status="failed",
        error=text,
        created_at=1000.0,
        steps=[
            Step(kind="request", text=text, author=REQUESTER),
            Step(kind="reply", text=text, author=APPROVER),
            Step(kind="assistant", text=text, model=text, calls=[call]),
            Step(kind="tool", text=text),
        ],
    )
    for message in transcript_messages(transcript):
        assert foreign(text_message(message), frozenset({REQUESTER, APPROVER})) == [], text


@EXAMPLES
@given(HOSTILE_TEXT)
def test_the_home_tab_is_inert(text: str) -> None:
    record = RunRecord(run_id="r" * 32, channel=CHANNEL, thread_ts="1.0", requester=REQUESTER, text=text)
    pending = approval(text, status=ApprovalStatus.PENDING, tool=text, target="web-03")
    view = home_view(HomeContent([record], [(pending, record)]), "U_OPS")
    assert foreign({"blocks": view["blocks"]}, frozenset({REQUESTER, "U_OPS"})) == [], json.dumps(text)


@EXAMPLES
@given(HOSTILE_TEXT)
def test_only_the_runs_people_are_named_in_an_answer(text: str) -> None:
    for chunk in render.answer_chunks(f"{text} (approved by {APPROVER}) {text}", frozenset({APPROVER})):
        assert offences(text_message(chunk), frozenset({APPROVER})) == [], text
