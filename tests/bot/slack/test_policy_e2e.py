"""The access policy end to end: docs/POLICY.md's example, the web app, the Slack emulator, a worker.

"Anyone on call may restart staging; prod needs someone from @sre-leads and never the requester
(two of them for destructive calls); nobody deletes from #random; database services are never
restarted by the bot." Each rule is shown holding against real clicks by real (emulated) people,
and against a hostile model that calls what it was not offered.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from agent.redis_util import as_text
from agent.scripted import FunctionModel, ScriptedModel, ScriptItem, last_tool_output, tool_call
from agent.tooling import CallTarget, ToolCategory, ToolResult
from agent.types import Request, RunStatus, ToolDef
from bot.observability.audit import AuditKind
from bot.ops.cli import build_parser
from bot.ops.policy_cli import run_cli
from bot.runs.approvals import ApprovalStatus
from bot.slack.handlers.actions import Interactions
from bot.slack.handlers.runtime import WebRuntime
from bot.slack.rendering import render
from emulator.slack import SlackEmulator, UserSpec
from emulator.slack.config import UserGroupSpec
from tests.bot.runtimes import PLAN_PREFIX, executions
from tests.bot.slack.test_clicks import approval_id_of, notes_to, status
from tests.support.slack_bot import SlackBot
from tests.support.slack_workspace import BOT_USER, CHANNEL, QUIET, buttons, suite_workspace
from tests.support.waiting import wait_for

DOC = Path(__file__).resolve().parents[3] / "docs" / "POLICY.md"
RANDOM = "C_RANDOM"
PEOPLE: dict[str, str | UserSpec] = {
    "U_ALICE": "alice",  # on call
    "U_BOB": "bob",  # on call
    "U_CAROL": "carol",  # an SRE lead
    "U_DAVE": "dave",  # an SRE lead
    "U_EVE": "eve",  # a full member in no group
    "U_GUEST": UserSpec("gail", guest="multi_channel", channels=(CHANNEL, RANDOM)),
}
GROUPS = (
    UserGroupSpec(id="S_ONCALL", handle="oncall", users=("U_ALICE", "U_BOB"), name="On-call"),
    UserGroupSpec(id="S_SRE_LEADS", handle="sre-leads", users=("U_CAROL", "U_DAVE"), name="SRE leads"),
    UserGroupSpec(id="S_INCIDENT_COMMANDERS", handle="ic", users=("U_BOB",), name="Incident commanders"),
)
SECRET = "runner-secret-0123456789"
TARGETS: dict[str, tuple[tuple[str, str], ...]] = {
    "web-03": (("env", "prod"),),
    "db-01": (("env", "prod"),),
    "stg-01": (("env", "staging"),),
}


def example_policy() -> str:
    """The fenced block after ``<!-- policy-example -->`` in docs/POLICY.md: the docs are tested."""
    text = DOC.read_text()
    after = text[text.index("<!-- policy-example -->") :]
    start = after.index("```yaml\n") + len("```yaml\n")
    return after[start : after.index("```", start)]


@dataclass
class TargetTool:
    """A tool acting on an inventory target (its labels are the inventory's, never the model's);
    logs each execution to ``{directory}/{name}.log``."""

    name: str
    category: ToolCategory
    directory: Path
    parallel: bool = False
    timeout: float = 60.0

    @property
    def definition(self) -> ToolDef:
        schema = {
            "type": "object",
            "properties": {"target": {"type": "string", "enum": sorted(TARGETS)}},
            "required": ["target"],
        }
        return ToolDef(name=self.name, description=f"The {self.name} test tool.", parameters=schema)

    def _target(self, arguments: str) -> str:
        return str(json.loads(arguments).get("target", ""))

    def target_of(self, arguments: str) -> CallTarget | None:
        name = self._target(arguments)
        return CallTarget(name, "local", TARGETS[name]) if name in TARGETS else None

    def refusal(self, arguments: str) -> str | None:
        return None if self._target(arguments) in TARGETS else "Error: unknown target"

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        with open(self.directory / f"{self.name}.log", "a") as handle:
            handle.write(json.dumps({"arguments": json.loads(arguments)}) + "\n")
        return ToolResult(f"{self.name} ok on {self._target(arguments)}", target=self._target(arguments))

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        if self.category is ToolCategory.DESTRUCTIVE:
            return ToolResult(f"would delete 3 files on {self._target(arguments)}")
        return None


@dataclass
class TargetPlanModel:
    """Follows ``plan: tool@target ...`` (calling even what it was not offered: a hostile model)
    and remembers the tool names each request offered."""

    offered: list[list[str]] = field(default_factory=list)

    def step(self, request: Request) -> ScriptItem:
        self.offered.append(sorted(t.name for t in request.tools))
        first = next(m for m in request.messages if m.role == "user")
        plan = (first.content or "").split(PLAN_PREFIX, 1)[1].split()
        done = sum(1 for m in request.messages if m.role == "assistant" and m.tool_calls)
        if done < len(plan):
            name, _, target = plan[done].partition("@")
            return tool_call(name, f"call_{done}", target=target)
        return f"done: {last_tool_output(request.messages)}"


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:
    config = suite_workspace(
        users=PEOPLE,
        usergroups=GROUPS,
        bot_channels=(CHANNEL, RANDOM),
    )
    with SlackEmulator(config) as slack:
        yield slack


@pytest.fixture
def model() -> TargetPlanModel:
    return TargetPlanModel()


@pytest.fixture
def bot(make_bot: Callable[..., SlackBot], tmp_path: Path, model: TargetPlanModel) -> SlackBot:
    policy = tmp_path / "policy.yaml"
    policy.write_text(example_policy())
    tools = [
        TargetTool("service_restart", ToolCategory.MUTATING, tmp_path),
        TargetTool("delete_files", ToolCategory.DESTRUCTIVE, tmp_path),
        TargetTool("check_health", ToolCategory.READ_ONLY, tmp_path),
    ]
    return make_bot(
        models=[FunctionModel(model.step, model="plan")],
        tools=tools,
        chatops_policy_file=str(policy),
        tuning=replace(QUIET, approver_cache_seconds=0),
        chatops_runner_secret=SECRET,  # seals each approval's facts (bot.runs.approval_seal)
    )


def start(bot: SlackBot, requester: str, plan: str, channel: str = CHANNEL) -> tuple[str, str]:
    """Mention the bot with ``plan`` in ``channel`` and work: (thread ts, run id)."""
    ts = str(bot.control.post_message(channel, requester, f"<@{BOT_USER}> {PLAN_PREFIX} {plan}")["ts"])
    run_id = wait_for(
        lambda: as_text(bot.redis.get(bot.keys.slack("thread_last_run", channel, ts))), what="the run"
    )
    bot.work()
    return ts, run_id


def card_of(bot: SlackBot, ts: str) -> dict[str, Any]:
    return wait_for(lambda: next((m for m in bot.bot_replies(ts) if "Approval" in m["text"]), None))


def tool_outputs(bot: SlackBot, run_id: str) -> list[str]:
    return [m.content or "" for m in bot.service.history(run_id) if m.role == "tool"]


def approve(bot: SlackBot, card: dict[str, Any], user: str) -> None:
    bot.control.click(card["ts"], user, action_id=render.ACTION_APPROVE)


def test_anyone_on_call_may_restart_staging_and_nobody_else_may_ask(bot: SlackBot) -> None:
    ts, run_id = start(bot, "U_ALICE", "service_restart@stg-01")  # alice is on call
    assert bot.status(run_id) is RunStatus.AWAITING_APPROVAL
    card = card_of(bot, ts)
    approve(bot, card, "U_ALICE")  # the rule lets an on-call requester approve her own restart
    wait_for(lambda: status(bot, approval_id_of(card)) is ApprovalStatus.APPROVED, what="alice's approval")
    bot.work()
    [run] = executions(bot.directory / "service_restart.log")
    assert run["arguments"]["confirmed_by"] == "U_ALICE" and run["arguments"]["target"] == "stg-01"

    for requester in ("U_EVE", "U_GUEST"):  # not on call; a guest (named by no rule)
        _, refused = start(bot, requester, "service_restart@stg-01")
        assert bot.status(refused) is RunStatus.COMPLETED  # nobody was asked: no card
        [output] = tool_outputs(bot, refused)
        assert "policy rule 'staging-on-call' does not let" in output, output
        assert bot.service.approvals.for_run(refused) == []
    assert len(executions(bot.directory / "service_restart.log")) == 1


def test_prod_needs_an_sre_lead_who_is_not_the_requester(bot: SlackBot) -> None:
    ts, run_id = start(bot, "U_CAROL", "service_restart@web-03")  # carol leads SRE and asks
    card = card_of(bot, ts)
    approval_id = approval_id_of(card)
    expected = {
        "U_CAROL": "needs an approver other than the requester",
        "U_ALICE": "lets only <!subteam^S_SRE_LEADS> approve",
        "U_EVE": "lets only <!subteam^S_SRE_LEADS> approve",
        "U_GUEST": "Guest accounts may not decide",
    }
    for clicker, reason in expected.items():
        approve(bot, card, clicker)
        [note] = notes_to(bot, clicker, 1)
        assert reason in note and "Nothing changed" in note, (clicker, note)
    assert status(bot, approval_id) is ApprovalStatus.PENDING
    bot.work()
    assert executions(bot.directory / "service_restart.log") == []

    approve(bot, card, "U_DAVE")
    wait_for(lambda: status(bot, approval_id) is ApprovalStatus.APPROVED, what="dave's approval")
    bot.work()
    [run] = executions(bot.directory / "service_restart.log")
    assert run["arguments"]["confirmed_by"] == "U_DAVE" and bot.status(run_id) is RunStatus.COMPLETED
    approval = bot.service.approvals.get(approval_id)
    assert approval is not None and json.loads(approval.policy)["rule"] == "prod"


def test_a_destructive_prod_call_needs_two_distinct_sre_leads_on_one_card(bot: SlackBot) -> None:
    ts, run_id = start(bot, "U_ALICE", "delete_files@web-03")
    card = card_of(bot, ts)
    approval_id = approval_id_of(card)
    shown = json.dumps(card["blocks"])
    assert "2 distinct approvals from <!subteam^S_SRE_LEADS>; not the requester" in shown
    assert "(rule `prod-destructive`)" in shown
    approve(bot, card, "U_CAROL")
    assert "counted (1 of 2)" in notes_to(bot, "U_CAROL", 1)[0]

    def so_far() -> dict[str, Any] | None:
        shown = bot.message(ts, card["ts"])
        return shown if "So far: <@U_CAROL> (1 of 2)" in json.dumps(shown["blocks"]) else None

    redrawn = wait_for(so_far, what="the card saying who approved so far")
    assert [b["action_id"] for b in buttons(redrawn)][:1] == [render.ACTION_APPROVE]  # it still asks
    approve(bot, card, "U_CAROL")  # the same person again: counts once
    assert "already counted (1 of 2)" in notes_to(bot, "U_CAROL", 2)[1]
    approve(bot, card, "U_EVE")  # not eligible: does not count
    assert "lets only <!subteam^S_SRE_LEADS>" in notes_to(bot, "U_EVE", 1)[0]
    approve(bot, card, "U_ALICE")  # the requester: never, for a destructive call
    assert "other than the person who asked" in notes_to(bot, "U_ALICE", 1)[0]
    bot.settle()
    assert status(bot, approval_id) is ApprovalStatus.PENDING
    bot.work()
    assert executions(bot.directory / "delete_files.log") == []

    approve(bot, card, "U_DAVE")  # the second distinct lead approves it
    wait_for(lambda: status(bot, approval_id) is ApprovalStatus.APPROVED, what="the second approval")
    bot.work()
    [run] = executions(bot.directory / "delete_files.log")
    assert run["arguments"]["confirmed_by"] == "U_DAVE" and bot.status(run_id) is RunStatus.COMPLETED
    approval = bot.service.approvals.get(approval_id)
    assert approval is not None and approval.reason == "approved by U_CAROL, U_DAVE"
    entries = bot.service.audit.entries(run_id)
    votes = [e.fields for e in entries if e.kind is AuditKind.APPROVAL_VOTED]
    assert [(v["approved_by"], v["count"], v.get("repeat")) for v in votes] == [
        ("U_CAROL", "1", None),
        ("U_CAROL", "1", "1"),
        ("U_DAVE", "2", None),
    ]
    [executed] = [e.fields for e in entries if e.kind is AuditKind.TOOL_EXECUTED]
    assert executed["target"] == "web-03" and executed["confirmed_by"] == "U_DAVE"


def test_nobody_deletes_from_random_even_when_a_hostile_model_calls_the_tool(
    bot: SlackBot, model: TargetPlanModel
) -> None:
    _, run_id = start(bot, "U_CAROL", "delete_files@stg-01", channel=RANDOM)
    assert model.offered and all("delete_files" not in names for names in model.offered)
    assert all("service_restart" in names for names in model.offered)  # only what the rule names
    [output] = tool_outputs(bot, run_id)
    assert "unknown tool delete_files" in output, output
    assert bot.service.approvals.for_run(run_id) == [] and bot.status(run_id) is RunStatus.COMPLETED
    assert executions(bot.directory / "delete_files.log") == []

    model.offered.clear()
    _, run_id = start(bot, "U_CAROL", "check_health@stg-01")  # in the incident channel it is offered
    assert all("delete_files" in names for names in model.offered)


def test_a_denied_target_is_refused_with_the_rule_and_nobody_is_asked(bot: SlackBot) -> None:
    _, run_id = start(bot, "U_CAROL", "service_restart@db-01 service_restart@web-03")
    assert bot.status(run_id) is RunStatus.AWAITING_APPROVAL  # the second call waits for a lead
    [output] = tool_outputs(bot, run_id)
    assert "policy rule 'no-database-restarts'" in output and "DBA runbook" in output, output
    [approval] = bot.service.approvals.for_run(run_id)
    assert json.loads(approval.args_json)["target"] == "web-03"  # only the allowed call has a card
    assert executions(bot.directory / "service_restart.log") == []


def test_a_denied_read_only_call_is_refused_and_audited_as_refused_while_its_batch_runs(
    make_bot: Callable[..., SlackBot], tmp_path: Path, model: TargetPlanModel
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "policy:\n  rules:\n    - name: no-db-probes\n"
        "      match: {targets: ['db-*'], tools: [check_health]}\n"
        "      deny: true\n      reason: the DBAs probe their own hosts\n"
    )
    probe = TargetTool("check_health", ToolCategory.READ_ONLY, tmp_path, parallel=True)
    bot = make_bot(
        models=[FunctionModel(model.step, model="plan")],
        tools=[probe],
        chatops_policy_file=str(policy),
        chatops_runner_secret=SECRET,
    )
    # One turn of three parallel probes (``TargetPlanModel`` calls them one by one; this model
    # sends them at once, as a model fanning out would).
    turn = [tool_call("check_health", f"c{i}", target=t) for i, t in enumerate(("web-03", "stg-01", "db-01"))]
    bot.models = [ScriptedModel([turn, "probed"])]
    _, run_id = start(bot, "U_CAROL", "check_health@web-03")
    assert bot.status(run_id) is RunStatus.COMPLETED
    ran = sorted(e["arguments"]["target"] for e in executions(tmp_path / "check_health.log"))
    assert ran == ["stg-01", "web-03"]  # the batch ran; the denied probe never reached the tool
    entries = [e for e in bot.service.audit.entries(run_id) if e.fields.get("tool") == "check_health"]
    kinds = {(e.fields["target"], e.fields.get("outcome")): e.kind for e in entries}
    audited = [e.fields for e in entries]
    assert kinds[("db-01", "error")] is AuditKind.TOOL_REFUSED
    assert kinds[("web-03", "ok")] is kinds[("stg-01", "ok")] is AuditKind.TOOL_EXECUTED
    refused = next(f for f in audited if f["target"] == "db-01")
    assert "policy rule 'no-db-probes'" in refused["output"] and refused.get("executor") is None


def test_every_actor_is_in_the_audit(bot: SlackBot) -> None:
    ts, superseded_run = start(bot, "U_ALICE", "service_restart@web-03")
    card = card_of(bot, ts)
    eve = str(bot.control.post_message(CHANNEL, "U_EVE", "cancel that", thread_ts=ts)["ts"])  # not a lead
    wait_for(
        lambda: any(c["params"].get("timestamp") == eve for c in bot.calls("reactions.add")),
        what="eve's reply stored (:eyes:)",
    )
    assert status(bot, approval_id_of(card)) is ApprovalStatus.PENDING  # only who may decline it cancels
    bot.control.post_message(CHANNEL, "U_CAROL", "hold on, check the logs first", thread_ts=ts)
    wait_for(lambda: status(bot, approval_id_of(card)) is ApprovalStatus.SUPERSEDED, what="the supersede")

    ts, stopped_run = start(bot, "U_BOB", "service_restart@stg-01")
    card_of(bot, ts)
    run_card = bot.bot_replies(ts)[0]
    bot.control.click(run_card["ts"], "U_BOB", action_id=render.ACTION_STOP)
    wait_for(lambda: bot.service.stop_requested(stopped_run), what="the stop")
    bot.work()

    def actors(run_id: str) -> list[tuple[str, str]]:
        names = ("requester", "decided_by", "approved_by", "stopped_by", "confirmed_by")
        return [
            (e.kind.value, f"{name}={e.fields[name]}")
            for e in bot.service.audit.entries(run_id)
            for name in names
            if e.fields.get(name)
        ]

    assert actors(superseded_run)[:3] == [
        ("run_started", "requester=U_ALICE"),
        ("approval_requested", "requester=U_ALICE"),
        ("approval_decided", "decided_by=U_CAROL"),  # whose reply superseded it
    ]
    assert ("stop_requested", "stopped_by=U_BOB") in actors(stopped_run)
    assert ("approval_decided", "decided_by=U_BOB") in actors(stopped_run)  # the stop declined it
    [requested] = [
        e for e in bot.service.audit.entries(superseded_run) if e.kind is AuditKind.APPROVAL_REQUESTED
    ]
    assert requested.fields["target"] == "web-03" and json.loads(requested.fields["policy"])["rule"] == "prod"


def explained(bot: SlackBot, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """``chatops policy explain ARGV`` online, as an operator runs it beside the bot: Slack for
    the groups, Redis for break-glass."""
    inventory = bot.directory / "inventory.yaml"  # the labels the test's tools give each target
    inventory.write_text(
        "targets:\n"
        + "".join(
            f"  - {{name: {name}, via: runner, labels: {dict(labels)}}}\n" for name, labels in TARGETS.items()
        )
    )
    settings = bot.settings.model_copy(
        update={"chatops_inventory_file": inventory, "chatops_runner_secret": SECRET}
    )
    args = build_parser().parse_args(["policy", "explain", "--category", "destructive", *argv])
    assert run_cli(args, settings) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def test_break_glass_is_for_the_named_group_announced_audited_and_expires(
    bot: SlackBot, capsys: pytest.CaptureFixture[str]
) -> None:
    refused = bot.control.command("U_EVE", CHANNEL, "/ops", "break-glass")
    assert refused["status"] == 200 and "You may not declare break-glass" in refused["answer"]["text"]
    ts, run_id = start(bot, "U_ALICE", "delete_files@web-03")  # needs two SRE leads
    card = card_of(bot, ts)
    approve(bot, card, "U_BOB")  # on call, not a lead: no
    assert "lets only <!subteam^S_SRE_LEADS>" in notes_to(bot, "U_BOB", 1)[0]
    call = ("--tool", "delete_files", "--target", "web-03", "--channel", CHANNEL, "--requester", "U_ALICE")
    before = explained(bot, capsys, "--user", "U_BOB", *call)
    assert "U_BOB may approve: no" in before and "break-glass: U_BOB may declare it" in before
    assert "break-glass: U_EVE may not declare it" in explained(bot, capsys, "--user", "U_EVE", *call)

    declared = bot.control.command("U_BOB", CHANNEL, "/ops", "break-glass")  # an incident commander
    assert "Break-glass is on until" in declared["answer"]["text"]
    during = explained(bot, capsys, "--user", "U_BOB", *call)  # what the click below then does
    assert "U_BOB may approve: yes" in during and "break-glass: U_BOB holds it until" in during
    own = explained(bot, capsys, "--user", "U_BOB", *call[:-1], "U_BOB")
    assert "U_BOB may approve: no: A destructive call needs an approver other than" in own
    announced = [m for m in bot.control.messages(CHANNEL) if "declared *break-glass*" in m.get("text", "")]
    assert len(announced) == 1 and "<@U_BOB>" in announced[0]["text"]
    approve(bot, card, "U_BOB")  # alone, whatever the rule's count
    approval_id = approval_id_of(card)
    wait_for(lambda: status(bot, approval_id) is ApprovalStatus.APPROVED, what="the break-glass approval")
    bot.work()
    [run] = executions(bot.directory / "delete_files.log")
    assert run["arguments"]["confirmed_by"] == "U_BOB" and bot.status(run_id) is RunStatus.COMPLETED
    approval = bot.service.approvals.get(approval_id)
    assert approval is not None and approval.reason == "approved by U_BOB (break-glass)"
    glass = [e.fields for e in bot.service.audit.entries() if e.kind is AuditKind.BREAK_GLASS]
    assert [(g["user"], "refused" in g) for g in glass] == [("U_EVE", True), ("U_BOB", False)]

    ts, _ = start(bot, "U_BOB", "delete_files@web-03")  # his own destructive call: never
    own = card_of(bot, ts)
    approve(bot, own, "U_BOB")
    assert "other than the person who asked" in notes_to(bot, "U_BOB", 2)[1]

    ts, _ = start(bot, "U_ALICE", "service_restart@web-03")
    later = card_of(bot, ts)
    web = WebRuntime(bot.settings, tuning=bot.tuning)
    expired = Interactions(web, clock=lambda: time.time() + 31 * 60)  # 30 minutes are over
    reply = expired.approve(approval_id_of(later), "U_BOB", (CHANNEL, later["ts"]))
    assert reply.note is not None and "lets only <!subteam^S_SRE_LEADS>" in reply.note
    assert status(bot, approval_id_of(later)) is ApprovalStatus.PENDING
    still = Interactions(web, clock=lambda: time.time() + 29 * 60).approve(
        approval_id_of(later), "U_BOB", (CHANNEL, later["ts"])
    )
    assert still.note is None and status(bot, approval_id_of(later)) is ApprovalStatus.APPROVED


def test_declining_a_sealed_card_is_for_its_requester_or_someone_who_may_approve_it(bot: SlackBot) -> None:
    ts, run_id = start(bot, "U_ALICE", "service_restart@web-03")  # prod: only SRE leads approve
    card = card_of(bot, ts)
    approval_id = approval_id_of(card)
    for outsider, reason in (("U_EVE", "lets only <!subteam^S_SRE_LEADS>"), ("U_GUEST", "Guest accounts")):
        bot.control.click(card["ts"], outsider, action_id=render.ACTION_DECLINE)
        [note] = notes_to(bot, outsider, 1)
        assert "Only someone who may approve it or the person who asked may decline" in note, note
        assert reason in note and "Nothing changed" in note, note
    assert bot.control.views() == [] and status(bot, approval_id) is ApprovalStatus.PENDING

    bot.control.click(card["ts"], "U_ALICE", action_id=render.ACTION_DECLINE)  # the requester may say no
    [modal] = wait_for(lambda: bot.control.views(user="U_ALICE"), what="the decline modal")
    bot.control.submit_view(modal["id"], {render.REASON_BLOCK: {render.REASON_ACTION: "not now"}})
    wait_for(lambda: status(bot, approval_id) is ApprovalStatus.DECLINED, what="the decline")
    bot.work()
    assert (
        executions(bot.directory / "service_restart.log") == [] and bot.status(run_id) is RunStatus.COMPLETED
    )
    [decided] = [e.fields for e in bot.service.audit.entries(run_id) if e.kind is AuditKind.APPROVAL_DECIDED]
    assert (decided["decided_by"], decided["reason"], decided["target"]) == ("U_ALICE", "not now", "web-03")
