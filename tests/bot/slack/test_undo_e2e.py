"""An executed change's undo is offered with the state read just before it (issue 34, part 4),
through the web app, the Slack emulator, a worker and a catalog tool on a fake ``pool`` program:
the approval card shows the undo as a template, the change runs, its check passes, and the offer
holds the undo with the count the before-read printed, audited with the change's approval; the
check line's Undo button starts a run with exactly that call pending, approved like any change,
once; a click that is forged, late, changed in Redis or made while a run goes on does nothing."""

from __future__ import annotations

import json
import stat
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.scripted import FunctionModel, ScriptItem, tool_call
from agent.types import Request, RunStatus
from bot.observability.audit import AuditKind
from bot.postmortem.render import utc
from bot.runs.undo_offers import UndoFacts
from bot.slack.handlers.undo_clicks import FORGED, RUN_GOING_ON, STARTED
from bot.slack.rendering import render
from bot.slack.rendering.blockkit import ACTION_UNDO
from tests.bot.slack.test_postmortem_e2e import download, drafts
from tests.support.slack_bot import SlackBot
from tests.support.slack_http import signed_post
from tests.support.waiting import wait_for
from tools import build_registry
from tools.config import ToolsConfig

POOL = r"""#!/bin/sh
dir="$(dirname "$0")"
case "$1" in
  status) printf '{"replicas": %s, "state": "running"}\n' "$(cat "$dir/replicas")";;
  scale) echo "$3" > "$dir/replicas"; echo "scaled $2 to $3";;
  *) exit 1;;
esac
"""
CATALOG = """
tools:
  - name: pool_status
    description: The pool's state as JSON.
    category: read_only
    params: {{pool: {{type: string, pattern: "^[a-z]+$"}}}}
    run: [{pool}, status, "{{pool}}"]
  - name: pool_scale
    description: Scale a pool.
    category: mutating
    params: {{pool: {{type: string, pattern: "^[a-z]+$"}}, replicas: {{type: integer, minimum: 0, maximum: 50}}}}
    run: [{pool}, scale, "{{pool}}", "{{replicas}}"]
    before: {{tool: pool_status, args: {{pool: "{{args.pool}}"}}}}
    check: {{tool: pool_status, args: {{pool: "{{args.pool}}"}}, expect: '"state": "running"'}}
    undo: {{tool: pool_scale, args: {{pool: "{{args.pool}}", replicas: "{{before.replicas}}"}}}}
"""


def scale_model(request: Request) -> ScriptItem:
    asked = [m.content or "" for m in request.messages if m.role == "user"]
    if (
        not any(m.role == "tool" for m in request.messages)
        and "scale the web pool" in asked[-1].rsplit("New request:")[-1]
    ):
        return tool_call("pool_scale", "call_0", pool="web", replicas=8)
    return "done"


def scaled_to_8(
    make_bot: Callable[..., SlackBot], tmp_path: Path, **settings: Any
) -> tuple[SlackBot, str, str]:
    """The pool scaled from 3 to 8, approved by Bob, checked; returns the bot, the thread, the run."""
    program = tmp_path / "pool"
    program.write_text(POOL)
    program.chmod(program.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "replicas").write_text("3\n")
    catalog = tmp_path / "tools.yaml"
    catalog.write_text(CATALOG.format(pool=program))
    registry = build_registry(ToolsConfig(tools_file=catalog, log_dirs=(tmp_path,)))
    bot = make_bot(
        models=[FunctionModel(scale_model, model="scale")],
        tools=[registry["pool_status"], registry["pool_scale"]],
        chatops_check_seconds=10,
        chatops_undo_minutes=30,
        **settings,
    )
    ts = bot.mention("scale the web pool to 8")
    run_id = bot.run_id(ts)
    bot.work()
    card = wait_for(lambda: next((m for m in bot.bot_replies(ts) if "Approval" in m["text"]), None))
    shown = json.dumps(card["blocks"])
    assert "*Undo*" in shown and "{before.replicas}" in shown  # the card shows the template
    bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_APPROVE)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    assert (tmp_path / "replicas").read_text().strip() == "8"
    (approval,) = bot.service.approvals.for_run(run_id)
    [entry] = [e for e in bot.service.audit.entries(run_id) if e.kind is AuditKind.UNDO_OFFERED]
    assert entry.fields["approval_id"] == approval.id and entry.fields["call_id"] == approval.call_id
    offer = bot.service.undo_offers.get(entry.fields["offer_id"])
    assert offer is not None and offer.tool == "pool_scale"
    assert json.loads(offer.args_json) == {"pool": "web", "replicas": 3}  # read just before the change
    assert 30 * 60 - 5 < offer.expires_at - offer.created_at <= 30 * 60
    assert wait_for(lambda: "Verified" in "\n".join(m.get("text", "") for m in bot.bot_replies(ts)) or None)
    return bot, ts, run_id


def draft_of(bot: SlackBot, run_id: str) -> str:
    """The run's postmortem draft, asked for with ``/ops postmortem`` (issue 35), as uploaded."""
    bot.control.command("U_ALICE", "C_INCIDENT", "/ops", f"postmortem {run_id}")
    [shared] = wait_for(lambda: drafts(bot, run_id), what="the postmortem draft")
    return download(shared["url_private"])


def test_the_executed_change_offers_its_undo_with_the_state_read_before_it(
    make_bot: Callable[..., SlackBot], tmp_path: Path
) -> None:
    bot, _, run_id = scaled_to_8(make_bot, tmp_path)
    [entry] = [e for e in bot.service.audit.entries(run_id) if e.kind is AuditKind.UNDO_OFFERED]
    until = float(entry.fields["until"])
    actions = draft_of(bot, run_id).split("## Actions taken")[1].split("## To discuss")[0]
    assert f"approved by U\\_BOB: ok; check passed; undo offered until {utc(until)} · audit" in actions


def undo_buttons(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        e
        for b in message.get("blocks") or []
        for e in b.get("elements") or []
        if e.get("action_id") == ACTION_UNDO
    ]


def told(bot: SlackBot, user: str, text: str) -> str:
    """The ephemeral note to ``user`` that contains ``text`` (waited for)."""

    def probe() -> str | None:
        notes = [str(c["params"].get("text")) for c in bot.calls("chat.postEphemeral")]
        return next((n for n in notes if text in n and c_user(bot, user)), None)

    return str(wait_for(probe, what=f"the note {text!r} to {user}"))


def c_user(bot: SlackBot, user: str) -> bool:
    return any(c["params"].get("user") == user for c in bot.calls("chat.postEphemeral"))


def forged(bot: SlackBot, payload: dict[str, Any], **change: str) -> None:
    """A real click's payload, changed (``message_ts``, ``channel``, ``value``), signed and sent."""
    copy = json.loads(json.dumps(payload))
    if "message_ts" in change:
        copy["container"]["message_ts"] = copy["message"]["ts"] = change["message_ts"]
    if "channel" in change:
        copy["container"]["channel_id"] = copy["channel"]["id"] = change["channel"]
    if "value" in change:
        copy["actions"][0]["value"] = change["value"]
    body = urllib.parse.urlencode({"payload": json.dumps(copy)}).encode()
    answer = signed_post(bot.events_url, body, content_type="application/x-www-form-urlencoded")
    assert answer.status == 200, answer


def test_undo_runs_the_stored_call_once_after_approval_and_nothing_else_claims_it(
    make_bot: Callable[..., SlackBot], tmp_path: Path
) -> None:
    bot, ts, run_id = scaled_to_8(make_bot, tmp_path)
    offers = bot.service.undo_offers
    [entry] = [e for e in bot.service.audit.entries(run_id) if e.kind is AuditKind.UNDO_OFFERED]
    offer = offers.get(entry.fields["offer_id"])
    assert offer is not None
    line = wait_for(lambda: next((m for m in bot.bot_replies(ts) if undo_buttons(m)), None))
    assert "Verified" in line["text"] and undo_buttons(line)[0]["value"] == offer.id
    assert (offer.message_channel, offer.message_ts) == (line["channel"], line["ts"])  # recorded

    # A run is going on in the thread: refused, and the offer stays unclaimed.
    bot.mention("how is the pool now?", thread_ts=ts)
    bot.settle()
    click = bot.control.click(line["ts"], "U_ALICE", action_id=ACTION_UNDO)
    assert click["status"] == 200, click
    told(bot, "U_ALICE", RUN_GOING_ON)
    payload = dict(click["payload"])
    bot.work()
    assert not bot.service.active_run(offer.channel, offer.thread_ts)

    # Forged: the same click from another message (the approval card) or another channel.
    (approval,) = bot.service.approvals.for_run(run_id)
    forged(bot, payload, message_ts=approval.card_ts)
    forged(bot, payload, channel="C_ELSEWHERE")
    # Late: an offer whose window ended (Redis's clock), on the same message.
    facts = UndoFacts(
        offer.run_id,
        offer.action_call_id,
        offer.approval_id,
        offer.channel,
        offer.thread_ts,
        offer.action_tool,
        offer.tool,
        offer.args_json,
        offer.target,
    )
    late = offers.offer(facts, window_seconds=0)
    offers.set_message(late.id, line["channel"], line["ts"])
    forged(bot, payload, value=late.id)
    told(bot, "U_ALICE", "Undo expired")
    bot.settle()
    forgeries = [c for c in bot.calls("chat.postEphemeral") if c["params"].get("text") == FORGED]
    assert len(forgeries) == 2
    assert all(not (offers.get(o) or offer).claimed_by for o in (offer.id, late.id))
    assert len(bot.run_ids()) == 2  # the change's run and the question's: no undo started

    # The click: a run with exactly the stored call, whose card Bob approves.
    click = bot.control.click(line["ts"], "U_ALICE", action_id=ACTION_UNDO)
    assert click["status"] == 200, click
    told(bot, "U_ALICE", STARTED)
    bot.work()
    undo_run = bot.service.active_run(offer.channel, offer.thread_ts)
    assert undo_run is not None and bot.status(undo_run) is RunStatus.AWAITING_APPROVAL
    (undo_approval,) = bot.service.approvals.for_run(undo_run)
    assert (undo_approval.tool, json.loads(undo_approval.args_json)) == (
        "pool_scale",
        {"pool": "web", "replicas": 3},
    )
    assert undo_approval.requester == "U_ALICE"
    history = [m for m in bot.service.history(undo_run) if m.role != "system"]
    assert (history[0].content or "").startswith("<@U_ALICE> asked to undo pool_scale")
    assert history[1].role == "assistant" and history[1].tool_calls[0].arguments == offer.args_json
    cards = [m for m in bot.bot_replies(ts) if m.get("ts") == undo_approval.card_ts]
    assert cards and "replicas" in json.dumps(cards[0]["blocks"])
    assert bot.control.click(undo_approval.card_ts, "U_BOB", action_id=render.ACTION_APPROVE)["status"] == 200
    bot.work()
    assert bot.status(undo_run) is RunStatus.COMPLETED
    assert (tmp_path / "replicas").read_text().strip() == "3"
    kinds = {e.kind: e.fields for e in bot.service.audit.entries(undo_run)}
    assert kinds[AuditKind.UNDO_REQUESTED]["offer_id"] == offer.id
    assert kinds[AuditKind.UNDO_REQUESTED]["approval_id"] == approval.id
    assert kinds[AuditKind.UNDO_REQUESTED]["user"] == "U_ALICE"
    executed = kinds[AuditKind.UNDO_EXECUTED]
    assert (executed["approval_id"], executed["action_call_id"]) == (approval.id, approval.call_id)
    assert AuditKind.CHECK_ENDED in kinds  # the undo's own check
    assert wait_for(lambda: sum("Verified" in m.get("text", "") for m in bot.bot_replies(ts)) == 2 or None)

    # The change's postmortem draft tells its undo: who asked, the undo's run, its check.
    actions = draft_of(bot, run_id).split("## Actions taken")[1].split("## To discuss")[0]
    shown = f"check passed; undo requested by U\\_ALICE, executed (run `{undo_run[:12]}`), checked: passed"
    assert shown in actions

    # A second click does nothing.
    assert bot.control.click(line["ts"], "U_BOB", action_id=ACTION_UNDO)["status"] == 200
    told(bot, "U_BOB", "already asked for by <@U_ALICE>")
    bot.work()
    assert (tmp_path / "replicas").read_text().strip() == "3"
    assert len(bot.service.approvals.for_run(undo_run)) == 1 and len(bot.run_ids()) == 3
