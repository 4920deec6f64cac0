"""An executed change's undo is offered with the state read just before it (issue 34, part 4),
through the web app, the Slack emulator, a worker and a catalog tool on a fake ``pool`` program:
the approval card shows the undo as a template, the change runs, its check passes, and the offer
holds the undo with the count the before-read printed, audited with the change's approval."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from pathlib import Path

from agent.scripted import FunctionModel, ScriptItem, tool_call
from agent.types import Request, RunStatus
from bot.observability.audit import AuditKind
from bot.slack.rendering import render
from tests.support.slack_bot import SlackBot
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
    if not any(m.role == "tool" for m in request.messages):
        return tool_call("pool_scale", "call_0", pool="web", replicas=8)
    return "done"


def test_the_executed_change_offers_its_undo_with_the_state_read_before_it(
    make_bot: Callable[..., SlackBot], tmp_path: Path
) -> None:
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
