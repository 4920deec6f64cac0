"""Block Kit rendering stays inside Slack's limits whatever the model or tools produce.

The emulator's Block Kit checker (the rules that make ``chat.postMessage`` answer
``invalid_blocks``) is the oracle.
"""

from __future__ import annotations

import json

from agent.tooling import ToolCategory
from agent.types import RunStatus
from bot.runs.approvals import Approval, ApprovalStatus
from bot.runs.presenter import CardView, Step, StepStatus, StopNotice
from bot.slack.rendering import render
from emulator.slack.blocks import block_errors

HUGE = "x" * 50_000


def approval(**changes: object) -> Approval:
    base: dict[str, object] = {
        "id": "a" * 32,
        "run_id": "r" * 32,
        "call_id": "call_1",
        "tool": "delete_files",
        "args_json": json.dumps({"host": "web-03", "paths": ["/var/log/app/old.log"]}),
        "args_sha256": "0" * 64,
        "category": ToolCategory.DESTRUCTIVE,
        "requester": "U_ALICE",
        "created_at": 1_700_000_000.0,
        "expires_at": 1_700_001_800.0,
        "preview": "would delete 1 file (2.1 GB)",
    }
    base.update(changes)
    return Approval.model_validate(base)


def buttons(blocks: list[dict[str, object]]) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    for block in blocks:
        if block.get("type") == "actions":
            found.extend(block["elements"])  # type: ignore[arg-type]
    return found


def test_run_card_shows_steps_tokens_and_a_stop_button() -> None:
    steps = (
        Step(
            "c1",
            "disk_usage",
            StepStatus.OK,
            "read_only",
            0.42,
            arguments='{"host": "web-03"}',
            result="97% used",
        ),
        Step("c2", "delete_files", StepStatus.RUNNING, "destructive", arguments='{"path": "/var/log"}'),
    )
    blocks = render.card_blocks("r" * 32, "U_ALICE", CardView(RunStatus.RUNNING, steps, 2, 1234))
    text = json.dumps(blocks)
    assert "disk_usage" in text and 'host=\\"web-03\\"' in text and "97% used" in text and "(0.4s)" in text
    assert "1,234 tokens" in text and "<@U_ALICE>" in text
    [stop] = buttons(blocks)
    assert stop["action_id"] == render.ACTION_STOP and stop["value"] == "r" * 32
    assert block_errors(blocks) == []


def test_a_finished_card_has_no_stop_button_but_offers_the_transcript_and_a_postmortem_draft() -> None:
    blocks = render.card_blocks("run", "U_ALICE", CardView(RunStatus.COMPLETED, (), 3, 10))
    assert [(b["action_id"], b["value"]) for b in buttons(blocks)] == [
        (render.ACTION_TRANSCRIPT, "run"),
        (render.ACTION_POSTMORTEM, "run"),
    ]


def test_huge_steps_and_many_of_them_stay_within_limits() -> None:
    steps = tuple(
        Step(f"c{i}", HUGE[:300], StepStatus.ERROR, None, 1.0, arguments=json.dumps({"a": HUGE}), result=HUGE)
        for i in range(500)
    )
    blocks = render.card_blocks("run", "U_ALICE", CardView(RunStatus.RUNNING, steps, 500, 10**9))
    assert block_errors(blocks) == []
    assert len(json.dumps(blocks)) < render.MESSAGE_TEXT
    assert "485 earlier steps" in json.dumps(blocks)


def test_approval_card_for_a_destructive_call() -> None:
    blocks = render.approval_blocks(approval())
    text = json.dumps(blocks)
    assert "delete_files" in text and "destructive" in text and "<@U_ALICE>" in text
    assert "would delete 1 file" in text and "/var/log/app/old.log" in text
    approve, decline = buttons(blocks)
    assert approve["style"] == "primary" and decline["style"] == "danger"
    assert approve["value"] == decline["value"] == "a" * 32
    assert "confirm" in approve and "confirm" not in decline
    assert block_errors(blocks) == []


def test_a_mutating_call_has_no_confirmation_dialog_and_no_preview() -> None:
    blocks = render.approval_blocks(approval(category=ToolCategory.MUTATING, preview=""))
    approve, _ = buttons(blocks)
    assert "confirm" not in approve
    assert "Dry run" not in json.dumps(blocks)


def test_huge_arguments_and_preview_are_refused_yet_never_make_invalid_blocks() -> None:
    huge = approval(args_json=json.dumps({"blob": HUGE}), preview=HUGE, tool="t" * 300)
    assert render.approval_card_problem(huge) is not None  # never cut: the call is refused
    blocks = render.approval_blocks(huge)
    assert block_errors(blocks) == []
    assert render.ACTION_APPROVE not in json.dumps(blocks)


def test_decided_cards_replace_the_buttons_with_who_and_when() -> None:
    decided = approval(status=ApprovalStatus.APPROVED, decided_by="U_BOB", decided_at=1_700_000_100.0)
    blocks = render.approval_blocks(decided)
    assert buttons(blocks) == []
    line = json.dumps(blocks[-1])
    assert "Approved by <@U_BOB>" in line and "<!date^1700000100^" in line
    declined = approval(
        status=ApprovalStatus.DECLINED, decided_by="U_BOB", decided_at=1.0, reason="disk is fine"
    )
    assert "Declined by <@U_BOB>" in render.decision_line(
        declined
    ) and "disk is fine" in render.decision_line(declined)
    expired = approval(status=ApprovalStatus.EXPIRED, decided_by="chatops", decided_at=1.0)
    assert "Expired" in render.decision_line(expired) and "<@chatops>" not in render.decision_line(expired)
    superseded = approval(status=ApprovalStatus.SUPERSEDED, decided_by="U_CAROL", decided_at=1.0)
    assert "Superseded" in render.decision_line(superseded) and "<@U_CAROL>" in render.decision_line(
        superseded
    )


def test_decline_modal_round_trips_its_metadata_and_reason() -> None:
    modal = render.decline_modal("a" * 32, {"channel": "C1", "ts": "1.2"}, "delete_files")
    assert len(modal["title"]["text"]) <= render.MODAL_TITLE
    assert render.modal_metadata(modal) == {"approval_id": "a" * 32, "channel": "C1", "ts": "1.2"}
    submitted = {
        **modal,
        "state": {
            "values": {
                render.REASON_BLOCK: {render.REASON_ACTION: {"type": "plain_text_input", "value": " no "}}
            }
        },
    }
    assert render.modal_reason(submitted) == "no"
    empty = {"state": {"values": {render.REASON_BLOCK: {render.REASON_ACTION: {"value": None}}}}}
    assert render.modal_reason(empty) is None
    assert block_errors(modal["blocks"], limit=100) == []


def test_answers_are_split_below_slacks_message_limit() -> None:
    chunks = render.answer_chunks("**Summary**\n\n" + ("word " * 20_000))
    assert len(chunks) > 20
    assert all(len(chunk) <= render.ANSWER_CHUNK for chunk in chunks)
    assert chunks[0].startswith("*Summary*")


def test_stop_notice_says_which_limit_and_what_was_done() -> None:
    notice = StopNotice(RunStatus.ITERATION_LIMIT, "stopped after 20 iterations", 20, 45_678, ("a", "b", "a"))
    last = Step("c9", "disk_usage", StepStatus.OK, "read_only", 0.1, result="97% used", confirmed_by="U_BOB")
    text = render.stop_notice_text(notice, last)
    assert "iteration limit" in text and "Iterations: 20" in text and "45,678" in text
    assert "`a`, `b`" in text
    assert "Last state: :white_check_mark: `disk_usage` → 97% used _(0.1s)_ · approved by <@U_BOB>" in text


def test_the_run_card_lists_the_targets_its_calls_ran_on() -> None:
    steps = (
        Step("c1", "disk_usage", StepStatus.OK, "read_only", 0.1, target="web-03"),
        Step("c2", "cpu_load", StepStatus.OK, "read_only", 0.1, target="db-01"),
        Step("c3", "disk_usage", StepStatus.OK, "read_only", 0.1, target="web-03"),
    )
    blocks = render.card_blocks("r" * 32, "U_ALICE", CardView(RunStatus.COMPLETED, steps, 2, 10))
    context = next(b for b in blocks if b["type"] == "context")
    assert context["elements"][0]["text"].startswith("targets `web-03`, `db-01` · ")


def declined(call_id: str, reason: str = "not now") -> Step:
    return Step(
        call_id, "delete_files", StepStatus.REFUSED, "destructive", result=f"Error: declined: {reason}"
    )


def test_a_finished_card_says_what_happened_instead_of_done_for_every_run() -> None:
    read = Step("c1", "disk_usage", StepStatus.OK, "read_only", 0.1, result="97% used")
    changed = Step("c2", "delete_files", StepStatus.OK, "destructive", 0.2, "U_BOB", result="deleted 3")
    refused = Step("c3", "nuke", StepStatus.REFUSED, None, result="Error: unknown tool nuke")

    def head(*steps: Step) -> str:
        return render.card_blocks("r" * 32, "U_ALICE", CardView(RunStatus.COMPLETED, steps, 2, 10))[0][
            "text"
        ]["text"]

    assert head(read, declined("c2")).startswith(":no_entry: *Declined* · nothing was changed")
    assert head().startswith(":speech_balloon: *Answered* · no tool ran")
    assert head(refused).startswith(":no_entry_sign: *Answered* · no tool ran (1 call refused)")
    assert head(read).startswith(":white_check_mark: *Done* · looked only, nothing was changed")
    assert head(read, changed).startswith(":white_check_mark: *Done* · 1 change made")
    assert head(changed, declined("c4")).startswith(
        ":white_check_mark: *Done* · 1 change made, 1 call declined"
    )
    failed = Step("c5", "restart", StepStatus.ERROR, "mutating", result="Error: exit 1")
    assert head(failed).startswith(":warning: *Finished* · 1 change failed")
    for text in (head(read, declined("c2")), head()):
        assert "Done" not in text
    # The notification text says it too.
    card = CardView(RunStatus.COMPLETED, (declined("c2"),), 1, 10)
    assert render.card_text("r" * 32, "U_ALICE", card).startswith("Declined (nothing was changed)")


def test_a_tools_own_output_cannot_pass_for_a_declined_call() -> None:
    """Only a call that did not run can be "declined": a log line saying so is just output."""
    liar = Step("c1", "read_logs", StepStatus.OK, "read_only", result="Error: declined: by the admin")
    assert not liar.declined
    head = render.card_blocks("r" * 32, "U_ALICE", CardView(RunStatus.COMPLETED, (liar,), 1, 1))[0]
    assert "Declined" not in head["text"]["text"]


def test_a_change_of_unknown_outcome_is_never_shown_as_nothing_changed() -> None:
    """A restart its worker died in: the card says its outcome is unknown, not "no tool ran" nor
    "nothing was changed"; a read-only tool's output with the same words is just output."""
    unknown = "Error: outcome unknown: the worker stopped while restart_service was running"
    restart = Step("c1", "restart_service", StepStatus.REFUSED, "mutating", result=unknown)
    head = render.card_blocks("r" * 32, "U_ALICE", CardView(RunStatus.COMPLETED, (restart,), 1, 1))[0]
    shown = head["text"]["text"]
    assert (
        "Finished" in shown and "1 change of unknown outcome" in shown and "nothing was changed" not in shown
    )
    via_runner = Step("c2", "restart_service", StepStatus.ERROR, "mutating", result=unknown)
    assert CardView(RunStatus.COMPLETED, (via_runner,)).outcome.unknown == 1
    liar = Step("c3", "read_logs", StepStatus.ERROR, "read_only", result=unknown)
    assert CardView(RunStatus.COMPLETED, (liar,)).outcome.unknown == 0


def test_counts_are_written_as_people_write_them() -> None:
    one = render.card_blocks("r" * 32, "U_ALICE", CardView(RunStatus.COMPLETED, (), 1, 1))
    usage = json.dumps(one, ensure_ascii=False)
    assert "1 iteration ·" in usage and "1 token ·" in usage and "1 iterations" not in usage
    many = json.dumps(
        render.card_blocks("r" * 32, "U_ALICE", CardView(RunStatus.COMPLETED, (), 2, 1791)),
        ensure_ascii=False,
    )
    assert "2 iterations" in many and "1,791 tokens" in many
    steps = tuple(Step(f"c{i}", "t", StepStatus.OK, "read_only") for i in range(render.CARD_STEPS + 1))
    text = json.dumps(render.card_blocks("r" * 32, "U_ALICE", CardView(RunStatus.RUNNING, steps, 1, 1)))
    assert "1 earlier step_" in text
    assert "(1 step)" in render.card_text("r", "U_ALICE", CardView(RunStatus.RUNNING, steps[:1]))


def test_the_card_names_approvers_as_mentions_never_as_raw_ids() -> None:
    """The tool's "(approved by U_BOB)" line and the gate's confirmed_by argument are not shown
    raw next to the mention; an ID the model or a tool wrote of someone else stays text."""
    step = Step(
        "c1",
        "clean_old_logs",
        StepStatus.OK,
        "destructive",
        0.1,
        "U_BOB",
        arguments=json.dumps({"path": "/var/log", "confirmed_by": "U_BOB"}),
        result="Deleted 6 files, asked by U_ALICE, cc U_EVE.\n(approved by U_BOB)",
    )
    blocks = render.card_blocks("r" * 32, "U_ALICE", CardView(RunStatus.COMPLETED, (step,), 1, 1))
    line = blocks[1]["text"]["text"]
    assert "confirmed_by" not in line and "approved by U_BOB" not in line
    assert "asked by <@U_ALICE>" in line and "· approved by <@U_BOB>" in line
    assert "cc U_EVE" in line  # not one of the run's people: never a mention made of text
    notice = render.stop_notice_text(StopNotice(RunStatus.FAILED, "x", 1, 1), step)
    assert "U_BOB" not in notice.replace("<@U_BOB>", "")
