"""Every Block Kit payload the bot can send, for ordinary and extreme inputs, checked twice: by
slack_sdk's own Block Kit models (``Block.parse`` / ``View`` + ``validate_json``, which raise on
what Slack documents as invalid) and against Slack's message limits (50 blocks, 40,000
characters of text, about 12,000 characters of text across the blocks: ``msg_blocks_too_long``),
with the emulator's stricter checker as a third opinion."""

from __future__ import annotations

import json
from typing import Any

import pytest
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from agent.tooling import ToolCategory
from agent.types import RunStatus
from bot.alerts.presenter import AlertView
from bot.runs.approvals import Approval
from bot.runs.presenter import CardView, Step, StepStatus, StopNotice
from bot.slack.delivery.alert_presenter import alert_blocks
from bot.slack.rendering import render
from bot.slack.rendering.blockkit import CARD_TEXT, MAX_BLOCKS, MESSAGE_TEXT, button, fit_text
from emulator.slack.blocks import MAX_BLOCKS_TEXT, block_errors, blocks_text_length

CREATED = 1_700_000_000.0
# Every character mrkdwn escapes or formats; "&" becomes "&amp;": five times as long once inert
# (sixty such steps made an 18,000-character card before cards had a total budget).
STORM = "&" * 160 + "&<>*_~`|" * 20
UNICODE = (
    "\u00ff\u0338\u034e\U0001f525\U0001d518\u202e\u202d" * 30
)  # combining marks, astral characters, bidi overrides
HUGE = "x" * 200_000

EXTREMES: dict[str, str] = {"plain": "ok", "storm": STORM, "unicode": UNICODE, "huge": HUGE}


def checked(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``blocks`` after every check: slack_sdk's models, the totals, the emulator."""
    assert 0 < len(blocks) <= MAX_BLOCKS
    for block in blocks:
        parsed = Block.parse(block)
        assert parsed is not None, block
        parsed.validate_json()
        assert parsed.to_dict() == block  # nothing the models do not know (and would drop)
    assert blocks_text_length(blocks) <= MAX_BLOCKS_TEXT
    assert block_errors(blocks) == []
    return blocks


def steps(count: int, text: str) -> tuple[Step, ...]:
    return tuple(
        Step(
            f"c{i}",
            f"tool_{text[:40]}",
            StepStatus.OK if i % 3 else StepStatus.ERROR,
            "read_only",
            0.1 * i,
            confirmed_by="U_BOB" if i % 5 == 0 else None,
            arguments=json.dumps({"path": text, "n": i}, ensure_ascii=False),
            result=text,
            target="web-03" if i % 2 else None,
        )
        for i in range(count)
    )


@pytest.mark.parametrize("kind", list(EXTREMES))
@pytest.mark.parametrize("count", [0, 1, 15, 60])
@pytest.mark.parametrize("status", [RunStatus.RUNNING, RunStatus.COMPLETED, RunStatus.FAILED])
def test_run_cards_are_valid_and_within_every_limit(kind: str, count: int, status: RunStatus) -> None:
    card = CardView(status, steps(count, EXTREMES[kind]), count, count * 1000)
    blocks = checked(render.card_blocks("r" * 32, "U_ALICE", card, "https://alerts.example/x?a=<b>&c"))
    assert blocks_text_length(blocks) <= CARD_TEXT  # with room for redaction to lengthen a secret
    assert len(render.card_text("r" * 32, "U_ALICE", card)) <= render.NOTIFICATION_TEXT


def test_an_escaping_storm_of_sixty_steps_keeps_the_newest_steps_and_counts_the_rest() -> None:
    card = CardView(RunStatus.RUNNING, steps(60, STORM), 60, 0)
    blocks = checked(render.card_blocks("r" * 32, "U_ALICE", card))
    shown = json.dumps(blocks)
    assert "earlier steps" in shown
    assert "0.0s" not in shown and "5.9s" in shown  # the newest step is there, the oldest is not


def approval(args: str, **changes: Any) -> Approval:
    base: dict[str, Any] = {
        "id": "a" * 32,
        "run_id": "r" * 32,
        "call_id": "c1",
        "tool": "delete_files",
        "args_json": args,
        "args_sha256": "0" * 64,
        "category": ToolCategory.DESTRUCTIVE,
        "requester": "U_ALICE",
        "created_at": CREATED,
        "expires_at": CREATED + 1800,
    }
    return Approval.model_validate({**base, **changes})


@pytest.mark.parametrize("kind", list(EXTREMES))
def test_approval_cards_are_valid_or_refused_before_anything_is_sent(kind: str) -> None:
    text = EXTREMES[kind]
    call = approval(
        json.dumps({"path": text}, ensure_ascii=False), preview=text, command=text, rationale=text, why=text
    )
    if render.approval_card_problem(call) is not None:
        assert kind in ("huge", "storm", "unicode")  # too long to show whole: the model is told
        return
    blocks = checked(render.approval_blocks(call))
    confirms = [
        element["confirm"]
        for block in blocks
        for element in block.get("elements", [])
        if isinstance(element, dict) and "confirm" in element
    ]
    assert confirms, "a destructive call's Approve asks for confirmation"
    assert all(part["type"] == "plain_text" for c in confirms for part in (c["title"], c["text"]))


def test_the_decline_modal_is_a_valid_view_even_with_oversized_metadata() -> None:
    for metadata in ({}, {"k": STORM}, {"k": HUGE}):
        modal = render.decline_modal("a" * 32, metadata, UNICODE)
        view = View(**modal)
        view.validate_json()
        assert view.to_dict() == modal
        assert block_errors(modal["blocks"], limit=100) == []


@pytest.mark.parametrize("kind", list(EXTREMES))
def test_answers_notices_and_transcripts_are_postable_texts(kind: str) -> None:
    text = EXTREMES[kind]
    for chunk in render.answer_chunks(text * 3):
        assert 0 < len(chunk) <= render.ANSWER_CHUNK < MESSAGE_TEXT
    notice = render.stop_notice_text(StopNotice(RunStatus.FAILED, text, 3, 10, ("tool",)), steps(1, text)[0])
    assert len(notice) <= render.ANSWER_CHUNK
    for message in render.transcript_messages(text, "r" * 32):
        assert len(message) <= 4000  # Slack's advice for a message's text (its hard limit: 40,000)


@pytest.mark.parametrize("kind", list(EXTREMES))
def test_alert_root_messages_are_valid_and_within_every_limit(kind: str) -> None:
    # Everything here comes from a webhook: a hostile or broken sender chooses every field.
    text = EXTREMES[kind]
    view = AlertView(
        group_id="g" * 32,
        source=text,
        status="firing",
        title=text,
        severity=text,
        target="web-03",
        labels=tuple((f"k{i}", text) for i in range(30)),
        summary=text,
        links=tuple((text, f"https://grafana.example/{i}?q={text[:50]}") for i in range(6)),
        alerts=99,
        notifications=7,
        investigate_button=True,
        answer=text,
    )
    blocks = checked(alert_blocks(view))
    assert blocks_text_length(blocks) <= CARD_TEXT
    assert blocks[-1]["type"] == "actions"  # the Investigate button survives any cut


def test_fit_text_cuts_the_longest_texts_first_and_never_buttons() -> None:
    blocks = [
        render.section("a" * 3000),
        render.section("b" * 3000),
        {"type": "section", "fields": [render.mrkdwn("c" * 2000, 2000) for _ in range(4)]},
        render.context("d" * 3000),
        {"type": "actions", "elements": [button("x", "Investigate", "v")]},
    ]
    fitted = fit_text(blocks, 9000)
    assert blocks_text_length(fitted) <= 9000
    assert blocks_text_length(blocks) == 17_011  # the original is left alone
    assert fitted[-1] == blocks[-1]
    assert all(len(f["text"]) >= 1000 for f in fitted[2]["fields"])  # the long ones were cut first
