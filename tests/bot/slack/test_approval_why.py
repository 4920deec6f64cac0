"""Every approval card says why, in one line of the model's own words, and nothing in them is live.

The words come from the assistant message that made the call (``ConfirmRequest.rationale``); a
hostile model or a thread member it quotes may put broadcasts, mentions, links or formatting there.
"""

from __future__ import annotations

import json

from agent.config import ConfirmRequest
from agent.memory import InMemoryMemory
from agent.scripted import ScriptedModel, tool_call
from agent.tooling import CallTarget, ToolCategory
from agent.types import Decision, Message, ToolCall
from bot.runs.approvals import Approval, Approvals
from bot.slack.rendering.approval_card import RATIONALE_SHOWN, approval_blocks, rationale_line
from bot.slack.rendering.blockkit import texts
from tests.agent.test_run import make_config, run
from tests.support.tools import RecordingTool

HOSTILE = (
    "<!channel> <@U_BOSS> says *approve now* ~~~ `rm -rf /` <https://evil.example|the runbook> "
    "&amp; @here\nsecond line"
)


def test_the_confirm_request_carries_the_text_of_the_message_that_made_the_call() -> None:
    restart = RecordingTool("restart", category=ToolCategory.MUTATING, respond=lambda args: "restarted")
    asked: list[ConfirmRequest] = []

    def confirm(request: ConfirmRequest) -> Decision:
        asked.append(request)
        return Decision.decline("no")

    turn = Message.assistant(
        "The api is wedged at 100% CPU; a restart clears it.", [tool_call("restart", "r1")]
    )
    memory = InMemoryMemory([Message.user("api is slow")])
    run(make_config(ScriptedModel([turn, "ok"]), [restart], memory=memory, confirm=confirm))
    (request,) = asked
    assert request.rationale == "The api is wedged at 100% CPU; a restart clears it."


def test_a_call_without_words_has_no_why_line() -> None:
    restart = RecordingTool("restart", category=ToolCategory.MUTATING, respond=lambda args: "restarted")
    asked: list[ConfirmRequest] = []

    def confirm(request: ConfirmRequest) -> Decision:
        asked.append(request)
        return Decision.decline("no")

    memory = InMemoryMemory([Message.user("api is slow")])
    run(
        make_config(
            ScriptedModel([tool_call("restart", "r1"), "ok"]), [restart], memory=memory, confirm=confirm
        )
    )
    assert asked[0].rationale is None
    card = json.dumps(approval_blocks(_approval(None)))
    assert "in the model's words" not in card


def _approval(rationale: str | None) -> Approval:
    call = ToolCall(id="x1", name="service_restart", arguments='{"service": "api", "target": "web-03"}')
    approval = Approvals.draft("run1", call, ToolCategory.MUTATING, requester="U_ALICE", rationale=rationale)
    return approval.model_copy(update={"created_at": 1000.0, "expires_at": 1600.0})


def test_the_why_line_is_inert_one_line_and_cut() -> None:
    line = rationale_line(HOSTILE)
    code = line.split("*Why, in the model's words:* ", 1)[1]
    assert code.startswith("`") and code.endswith("`") and code.count("`") == 2  # one code span, whole
    assert "<!channel>" not in line and "<@U_BOSS>" not in line and "<https://" not in line
    assert "&lt;!channel&gt;" in line and "&lt;@U_BOSS&gt;" in line
    assert "@\u2060here" in line  # the bare broadcast word is broken too
    assert "\n" not in line
    long = rationale_line("why " * 500)
    assert len(long.split("words:* ", 1)[1]) <= RATIONALE_SHOWN + 2


def test_the_card_shows_the_why_line_and_no_live_token_from_it() -> None:
    approval = _approval(HOSTILE)
    blocks = approval_blocks(approval)
    shown = [text for text in texts(blocks) if "in the model's words" in text]
    assert len(shown) == 1
    everything = "\n".join(texts(blocks))
    assert "<!channel>" not in everything and "<@U_BOSS>" not in everything
    assert "<@U_ALICE>" in everything  # the requester, named by the bot: a live mention


def test_a_mutating_card_says_what_will_run_where_when_and_why() -> None:
    call = ToolCall(id="x1", name="service_restart", arguments='{"service": "api", "target": "web-03"}')
    approval = Approvals.draft(
        "run1",
        call,
        ToolCategory.MUTATING,
        requester="U_ALICE",
        command="on web-03: systemctl restart --no-ask-password api",
        target=CallTarget("web-03", "runner", (("env", "prod"), ("role", "web"))),
        rationale="The api is pinned at full CPU; a restart clears it.",
    ).model_copy(update={"created_at": 1000.0, "expires_at": 1600.0})
    text = "\n".join(texts(approval_blocks(approval)))
    assert "*Requested by*\n<@U_ALICE>" in text
    assert "*Expires*\n<!date^1600^" in text
    assert "*Target*\n`web-03` via runner" in text and ":red_circle: *PRODUCTION*" in text
    assert "*Command*\n```on web-03: systemctl restart --no-ask-password api```" in text
    assert "`The api is pinned at full CPU; a restart clears it.`" in text
