"""The approval card shows everything that executes, complete, or the call is refused.

Blocks are validated with slack_sdk's Block Kit models and the emulator's checker at the extremes a
hostile model would try: padding that pushes a value off the card, long values, many arguments,
unicode, backticks, mentions and invisible characters.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

import redis
from hypothesis import given, settings
from hypothesis import strategies as st
from slack_sdk import WebClient
from slack_sdk.models.blocks import Block as SdkBlock

from agent.tooling import ToolCategory
from bot.keys import Keys
from bot.runs.approvals import Approval, ApprovalStatus
from bot.runs.presenter import RunRef
from bot.slack.delivery.presenter import SlackPresenter
from bot.slack.rendering import render
from bot.slack.rendering.verbatim import visible_json
from emulator.slack.blocks import block_errors

Blocks = list[dict[str, Any]]
CREATED = 1_700_000_000.0
# The bot's own live tokens: the requester's mention and dates. Nothing else may be live.
LIVE = re.compile(r"<@U_ALICE>|<!date\^\d+\^\{date_short_pretty\} at \{time\}\|[^<>]*>")


def approval(arguments: dict[str, Any] | str, **changes: Any) -> Approval:
    base: dict[str, Any] = {
        "id": "a" * 32,
        "run_id": "r" * 32,
        "call_id": "c1",
        "tool": "scale",
        "args_json": arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False),
        "args_sha256": "0" * 64,
        "category": ToolCategory.MUTATING,
        "requester": "U_ALICE",
        "created_at": CREATED,
        "expires_at": CREATED + 1800,
    }
    return Approval.model_validate({**base, **changes})


def assert_valid(blocks: Blocks) -> None:
    """Slack's rules, twice: slack_sdk's validators and the emulator's ``invalid_blocks`` checker."""
    assert 0 < len(blocks) <= render.MAX_BLOCKS
    for block in blocks:
        parsed = SdkBlock.parse(block)
        assert parsed is not None
        parsed.validate_json()
        for element in block.get("elements", []):
            if "confirm" in element:  # Slack requires plain_text in a confirm dialog
                assert {part["type"] for key, part in element["confirm"].items() if key != "style"} == {
                    "plain_text"
                }
    assert block_errors(blocks) == []
    assert sum(len(text) for text in texts(blocks)) <= render.CARD_TEXT


def texts(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["text"]] if isinstance(node.get("text"), str) else []
        nested = [value for key, value in node.items() if key != "text" or not isinstance(value, str)]
        return found + [text for value in nested for text in texts(value)]
    if isinstance(node, list):
        return [text for item in node for text in texts(item)]
    return []


def part(blocks: Blocks, label: str) -> str:
    """The text a labelled part shows, pieces joined (cuts at line breaks drop that newline)."""
    pieces: list[str] = []
    for block in blocks:
        text = block.get("text", {}).get("text", "") if block["type"] == "section" else ""
        if text.startswith(f"{label}\n```"):
            pieces.append(text.removeprefix(f"{label}\n"))
        elif pieces and text.startswith("```") and not text.startswith("*"):
            pieces.append(text)
        elif pieces:
            break
    for piece in pieces:
        assert piece.startswith("```") and piece.endswith("```") and piece.count("```") == 2
    return html.unescape("".join(piece[3:-3] for piece in pieces))


def buttons(blocks: Blocks) -> list[str]:
    return [
        element["action_id"]
        for block in blocks
        if block["type"] == "actions"
        for element in block["elements"]
    ]


def same_text(shown: str, expected: str) -> bool:
    return shown.replace("\n", "") == expected.replace("\n", "")


def test_padding_cannot_push_a_value_off_the_card() -> None:
    # The attack: 3,000 spaces before replicas: 0 made the card read like a scale-up.
    arguments = {"deployment": "web" + " " * 3000, "replicas": 0}
    card = approval(arguments, command="kubectl scale deployment/web --replicas=0")
    assert render.approval_card_problem(card) is None
    blocks = render.approval_blocks(card)
    assert_valid(blocks)
    shown = part(blocks, "*Arguments*")
    assert same_text(shown, visible_json(arguments)) and '"replicas": 0' in shown
    assert shown.count(" ") == visible_json(arguments).count(" ")
    assert part(blocks, "*Command*") == "kubectl scale deployment/web --replicas=0"
    assert buttons(blocks) == [render.ACTION_APPROVE, render.ACTION_DECLINE]


def test_long_values_and_many_arguments_are_shown_in_full() -> None:
    for arguments in (
        {f"value_{index}": chr(ord("a") + index) * 2000 for index in range(4)},
        {f"arg_{index:02}": f"value {index} " * 8 for index in range(60)},
    ):
        card = approval(arguments)
        assert render.approval_card_problem(card) is None
        blocks = render.approval_blocks(card)
        assert_valid(blocks)
        assert same_text(part(blocks, "*Arguments*"), visible_json(arguments))


def test_unicode_is_shown_as_it_is_and_counted_as_slack_counts_it() -> None:
    arguments = {"note": "🚀" * 1400 + " Zoë 王 مرحبا", "who": "日志" * 500}
    blocks = render.approval_blocks(approval(arguments))
    assert_valid(blocks)
    assert same_text(part(blocks, "*Arguments*"), visible_json(arguments))


def test_arguments_too_long_for_a_card_are_refused_with_advice_for_the_model() -> None:
    card = approval({"blob": "x" * 8000, "more": "y" * 8000})
    problem = render.approval_card_problem(card)
    assert problem is not None
    assert re.fullmatch(
        r"the arguments are too long to show on an approval card \(16,\d{3} characters; at most \d{1,2},\d{3}\): "
        r"shorten them",
        problem,
    )
    blocks = render.approval_blocks(card)  # drawn anyway (a bug upstream): valid, and says so
    assert_valid(blocks)
    assert buttons(blocks) == [render.ACTION_DECLINE]
    assert "Not shown completely" in json.dumps(blocks)


def test_a_dry_run_too_long_for_a_card_is_refused() -> None:
    card = approval(
        {"older_than_days": 7}, category=ToolCategory.DESTRUCTIVE, preview="/var/log/x.1\n" * 2000
    )
    problem = render.approval_card_problem(card)
    assert problem is not None and problem.startswith("the dry run is too long to show on an approval card")
    assert_valid(render.approval_blocks(card))


def test_a_destructive_card_shows_command_target_requester_expiry_and_dry_run_age() -> None:
    card = approval(
        {"target": "web-03", "older_than_days": 7},
        tool="clean_old_logs",
        category=ToolCategory.DESTRUCTIVE,
        command="delete exactly the files the dry run below lists, each only if unchanged",
        preview="Dry run: clean_old_logs would delete 1 files (2.0 KiB)",
        plan_created_at=CREATED - 125,
    )
    blocks = render.approval_blocks(card)
    assert_valid(blocks)
    fields = [field["text"] for field in blocks[1]["fields"]]
    assert "*Requested by*\n<@U_ALICE>" in fields and "*Target*\n`web-03`" in fields
    assert f"*Expires*\n{render.slack_date(CREATED + 1800)}" in fields
    assert f"*Dry run made*\n2 min before this request, {render.slack_date(CREATED - 125)}" in fields
    assert part(blocks, "*Command*").startswith("delete exactly the files")
    assert part(blocks, "*Dry run*").startswith("Dry run: clean_old_logs would delete 1 files")
    [approve] = [e for b in blocks if b["type"] == "actions" for e in b["elements"] if "confirm" in e]
    assert approve["confirm"]["text"]["type"] == "plain_text"


def test_invisible_characters_that_bypassed_the_gate_are_shown_escaped_not_raw() -> None:
    hostile = {"service": "ngi\u202enx\u2028\u200b", "note": "\ufeff\x1b"}
    blocks = render.approval_blocks(approval(hostile, command="systemctl restart ngi\u202enx"))
    assert_valid(blocks)
    everything = "".join(texts(blocks))
    assert not set("\u202e\u2028\u200b\ufeff\x1b") & set(everything)
    assert '"ngi\\u202enx\\u2028\\u200b"' in part(blocks, "*Arguments*")
    assert part(blocks, "*Command*") == "systemctl restart ngi\\u202enx"


def test_mentions_links_and_entities_in_arguments_stay_inert() -> None:
    arguments = {"note": "<@U0BOSS> <!channel> <https://evil.example|https://grafana.corp> &amp; a&b"}
    blocks = render.approval_blocks(approval(arguments))
    assert_valid(blocks)
    for text in texts(blocks):
        inert = LIVE.sub("", text)
        assert "<" not in inert and ">" not in inert
        assert re.sub(r"&(?:amp|lt|gt);", "", inert).count("&") == 0
    assert same_text(part(blocks, "*Arguments*"), visible_json(arguments))


def test_backticks_cannot_end_the_code_block() -> None:
    arguments = {"x": "```*bold* _it_```", "y": "`", "z": "``"}
    blocks = render.approval_blocks(approval(arguments, command="echo '```'"))
    assert_valid(blocks)
    shown = part(blocks, "*Arguments*")  # checks each section holds only its two fences
    assert json.loads(shown) == arguments
    assert part(blocks, "*Command*") == "echo '\\x60\\x60\\x60'"


def test_a_decided_card_keeps_the_call_and_shows_the_decision() -> None:
    decided = approval(
        {"deployment": "web", "replicas": 0},
        status=ApprovalStatus.APPROVED,
        decided_by="U_BOB",
        decided_at=CREATED + 60,
    )
    blocks = render.approval_blocks(decided)
    assert_valid(blocks)
    assert buttons(blocks) == [] and "Approved by <@U_BOB>" in json.dumps(blocks)
    assert '"replicas": 0' in part(blocks, "*Arguments*")


@settings(max_examples=150, deadline=None)
@given(
    arguments=st.dictionaries(st.text(max_size=20), st.text(max_size=600), max_size=12),
    command=st.text(max_size=300),
    preview=st.text(max_size=2000),
)
def test_any_call_gives_a_valid_card_complete_or_refused(
    arguments: dict[str, str], command: str, preview: str
) -> None:
    card = approval(arguments, command=command, preview=preview, category=ToolCategory.DESTRUCTIVE)
    problem = render.approval_card_problem(card)
    blocks = render.approval_blocks(card)
    assert_valid(blocks)
    for text in texts(blocks):
        assert "<" not in LIVE.sub("", text)
    if problem is None:
        assert json.loads(part(blocks, "*Arguments*")) == arguments
        assert render.ACTION_APPROVE in buttons(blocks)
    else:
        assert render.ACTION_APPROVE not in buttons(blocks)


def presenter(redact: Any) -> SlackPresenter:
    # approval_problem lays the card out only: no Slack call, no Redis command is made.
    return SlackPresenter(WebClient(token="xoxb-unused"), redis.Redis(), Keys("test:"), redact=redact)


def test_the_presenter_refuses_a_card_that_redaction_would_push_over_slacks_limits() -> None:
    run = RunRef("r" * 32, "C1", "1.0", "U_ALICE")
    near_limit = approval({"a": "token=1 " * 1200})
    assert presenter(None).approval_problem(run, near_limit) is None
    lengthening = presenter(lambda text: text.replace("token=1", "token=[REDACTED]"))
    problem = lengthening.approval_problem(run, near_limit)
    assert problem is not None and "too long to show on an approval card" in problem
    assert lengthening.approval_problem(run, approval({"service": "nginx"})) is None


def why_section(blocks: Blocks) -> str:
    (text,) = [t for t in texts(blocks) if "*Why approval is needed*" in t]
    return text


def test_a_card_for_an_unlisted_host_says_why_it_asks() -> None:
    reason = (
        "This call connects to status.partner.example on port 443, which is not on the egress "
        "allow list (CHATOPS_EGRESS_ALLOW)."
    )
    card = approval({"url": "https://status.partner.example/health"}, tool="http_check", why=reason)
    assert render.approval_card_problem(card) is None
    blocks = render.approval_blocks(card)
    assert_valid(blocks)
    assert why_section(blocks) == f":globe_with_meridians: *Why approval is needed*\n{reason}"
    assert buttons(blocks) == [render.ACTION_APPROVE, render.ACTION_DECLINE]
    assert not any("Why approval" in t for t in texts(render.approval_blocks(approval({"x": 1}))))


def test_the_reason_is_inert_text_whatever_the_host_in_it() -> None:
    hostile = (
        "connects to <@U0BOSS> <!channel> @here <https://evil.example|grafana.corp> *bold*\u202e on port 1"
    )
    blocks = render.approval_blocks(approval({"host": "x"}, why=hostile))
    assert_valid(blocks)
    shown = why_section(blocks)
    assert "<" not in LIVE.sub("", shown) and "\u202e" not in shown
    assert "@\u2060here" in shown and "\\u202e" in shown  # broken broadcast, visible escape


def test_a_reason_too_long_to_show_refuses_the_card() -> None:
    card = approval({"host": "x"}, why="connects to " + "a" * 4000)
    problem = render.approval_card_problem(card)
    assert problem is not None and problem.startswith("the reason for asking is too long to show")
    blocks = render.approval_blocks(card)
    assert_valid(blocks)
    assert render.ACTION_APPROVE not in buttons(blocks)


def test_the_presenter_redacts_the_reason_before_laying_it_out() -> None:
    run = RunRef("r" * 32, "C1", "1.0", "U_ALICE")
    card = approval({"host": "x"}, why="connects to " + "token=1 " * 300)
    assert presenter(None).approval_problem(run, card) is None
    lengthening = presenter(lambda text: text.replace("token=1", "token=[REDACTED]"))
    problem = lengthening.approval_problem(run, card)
    assert problem is not None and problem.startswith("the reason for asking is too long")


def test_the_card_names_the_inventory_target_how_it_is_reached_and_marks_production() -> None:
    card = approval(
        {"target": "web-03", "service": "api"},
        target="web-03",
        target_via="runner",
        target_labels="env=prod,role=web",
        command="on web-03: systemctl restart --no-ask-password api",
    )
    blocks = render.approval_blocks(card)
    assert_valid(blocks)
    text = json.dumps(blocks)
    assert "*Target*\\n`web-03` via runner\\nenv=prod, role=web\\n:red_circle: *PRODUCTION*" in text
    assert "on web-03: systemctl restart --no-ask-password api" in text


def test_a_staging_target_is_not_marked_production() -> None:
    card = approval({"target": "stg-1"}, target="stg-1", target_via="ssh", target_labels="env=staging")
    text = json.dumps(render.approval_blocks(card))
    assert "`stg-1` via ssh\\nenv=staging" in text and "PRODUCTION" not in text


def test_the_requester_is_told_before_confirming_that_someone_else_must_approve() -> None:
    """A destructive call: the card says who may not approve it, and the confirm dialog everyone
    sees before the click is sent says so too. A mutating call the requester may approve says nothing."""
    card = render.approval_blocks(
        approval(
            {"path": "/var/log"},
            category=ToolCategory.DESTRUCTIVE,
            preview="1 file",
            involved=["U_ALICE", "U_CAROL"],
        )
    )
    text = json.dumps(card)
    assert "Needs approval by someone other than <@U_ALICE> or <@U_CAROL>" in text
    (approve,) = [
        e
        for b in card
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"] == render.ACTION_APPROVE
    ]
    assert "someone other than the person who asked" in approve["confirm"]["text"]["text"]
    assert "someone other than" not in json.dumps(render.approval_blocks(approval({"replicas": 2})))
    decided = approval(
        {"path": "/x"}, category=ToolCategory.DESTRUCTIVE, status=ApprovalStatus.APPROVED, decided_by="U_BOB"
    )
    assert "someone other than" not in json.dumps(render.approval_blocks(decided))


def test_a_dry_run_a_day_old_reads_one_day() -> None:
    card = approval(
        {"path": "/x"}, category=ToolCategory.DESTRUCTIVE, preview="1 file", plan_created_at=CREATED - 86_460
    )
    assert "1 day before this request" in json.dumps(render.approval_blocks(card))


def test_the_card_shows_the_check_and_the_undo_as_they_will_run() -> None:
    """Issue 34: "Then checks" and "Undo" / "No undo", verbatim and inert like every argument."""
    from agent.verification import PlannedCall, Verification

    scale = Verification(
        check=PlannedCall("kube_replicas", '{"workload":"api"}', expect='"ready_replicas": 3}'),
        before=PlannedCall("kube_replicas", '{"workload":"api"}'),
        undo=PlannedCall("kube_scale", '{"replicas":"{before.replicas}","workload":"api"}'),
    )
    blocks = render.approval_blocks(approval({"workload": "api", "replicas": 3}, verify=scale.to_json()))
    assert_valid(blocks)
    assert part(blocks, "*Then checks*").startswith('kube_replicas {"workload":"api"}')
    assert '"ready_replicas": 3}' in part(blocks, "*Then checks*")
    assert part(blocks, "*Undo*") == 'kube_scale {"replicas":"{before.replicas}","workload":"api"}'
    hostile = Verification(
        check=PlannedCall("service_status", '{"service":"<!channel> *x* <https://evil|ok>"}'),
        no_undo="a restart cannot be taken back",
    )
    blocks = render.approval_blocks(approval({"service": "x"}, verify=hostile.to_json()))
    assert_valid(blocks)
    assert part(blocks, "*No undo*") == "a restart cannot be taken back"
    for text in texts(blocks):
        assert "<!channel>" not in text and "<https://evil" not in text
    assert "*Then checks*" not in json.dumps(render.approval_blocks(approval({"service": "x"})))
