"""The answer names the run's people as mentions, not raw IDs; nobody else can be mentioned that way."""

from __future__ import annotations

from agent.tooling import ToolCategory
from agent.types import ToolCall
from bot.runs.approvals import Approvals
from bot.slack.rendering import render
from bot.slack.rendering.people import name_people, run_people


def test_the_deciders_id_in_an_answer_becomes_a_mention() -> None:
    call = ToolCall(id="x1", name="clean_old_logs", arguments="{}")
    approval = Approvals.draft("r1", call, ToolCategory.DESTRUCTIVE, requester="U_ALICE")
    approval = approval.model_copy(update={"decided_by": "U_BOB"})
    people = run_people("U_ALICE", [approval])
    assert people == {"U_ALICE", "U_BOB"}
    (chunk,) = render.answer_chunks("Deleted 6 files (approved by U_BOB) for U_ALICE.", people)
    assert chunk == "Deleted 6 files (approved by <@U_BOB>) for <@U_ALICE>."


def test_only_the_runs_people_and_never_inside_code() -> None:
    people = frozenset({"U_BOB"})
    text = "U_BOB, U_CEO and W_ALL: `U_BOB` ```U_BOB``` U_BOBBY <@U_BOB> &lt;@U_BOB&gt; <!channel>"
    (chunk,) = render.answer_chunks(text, people)
    assert chunk.startswith("<@U_BOB>, U_CEO and W_ALL: `U_BOB` `U_BOB` U_BOBBY &lt;@U_BOB&gt; ")
    assert "<@U_CEO>" not in chunk and "<@W_ALL>" not in chunk  # not the run's: plain text
    assert "<!channel>" not in chunk and "&lt;!channel&gt;" in chunk  # still escaped
    assert chunk.count("<@U_BOB>") == 1  # the model's own escaped mention stays text


def test_a_model_cannot_make_a_system_decider_a_mention() -> None:
    assert run_people("U_ALICE", []) == {"U_ALICE"}
    assert name_people("chatops decided", frozenset({"chatops"})) == "chatops decided"


def test_a_decision_reason_names_the_approvals_people_and_nobody_else() -> None:
    from bot.runs.approvals import ApprovalStatus
    from bot.slack.rendering.approval_card import decision_line

    call = ToolCall(id="x1", name="service_restart", arguments="{}")
    approval = Approvals.draft("r1", call, ToolCategory.MUTATING, requester="U_ALICE").model_copy(
        update={
            "status": ApprovalStatus.DECLINED,
            "decided_by": "U_ALICE",
            "decided_at": 1000.0,
            "reason": "the run was stopped by U_ALICE; ask U_CEO <@U_CEO>",
        }
    )
    line = decision_line(approval)
    assert line.startswith(":no_entry: Declined by <@U_ALICE> at ")
    assert line.endswith(": the run was stopped by <@U_ALICE>; ask U_CEO &lt;@U_CEO&gt;")
