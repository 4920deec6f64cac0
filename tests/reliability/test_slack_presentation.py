"""Slack presentation never blocks the agent loop, and the final state still reaches the thread.

Card updates go through the worker's background sender: a rate-limited card (429 with
``Retry-After``) holds back the card, never the run; the job waits for a run's final card only at
its end, within a bound, and leaves what Slack did not take to the report (which the recovery
sweep has done again). A post of the answer that keeps failing is tried again the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from agent.tooling import ToolCategory, ToolResult
from agent.types import RunStatus, ToolDef
from bot.observability.audit import AuditKind
from tests.support.slack_bot import SlackBot
from tests.support.waiting import wait_for

pytestmark = pytest.mark.reliability

ANSWER = "done: check_health ok"


def faults_left(bot: SlackBot) -> int:
    return sum(int(f["remaining"]) for f in bot.control.faults())


def card_of(bot: SlackBot, ts: str) -> str:
    return json.dumps(bot.bot_replies(ts)[0]["blocks"])


def answers(bot: SlackBot, ts: str, answer: str = ANSWER) -> int:
    return sum(1 for m in bot.bot_replies(ts) if m["text"] == answer)


def finished_in_audit(bot: SlackBot, run_id: str) -> bool:
    return any(e.kind is AuditKind.RUN_FINISHED for e in bot.service.audit.entries(run_id))


def report_again(bot: SlackBot) -> None:
    """What the recovery sweep of any worker does for a run whose report is not done."""
    bot.service.recover()
    bot.work()


@dataclass
class Arm:
    """A read-only tool that arms an emulator fault on its call (so it hits the posts after it)."""

    bot: SlackBot
    method: str
    fault: dict[str, Any]
    name: str = "arm"
    category: ToolCategory = ToolCategory.READ_ONLY
    parallel: bool = False
    timeout: float = 10.0

    @property
    def definition(self) -> ToolDef:
        return ToolDef(name=self.name, description="Arm a fault.")

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        self.bot.control.inject_fault(self.method, **self.fault)
        return ToolResult("armed")

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        return None


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_rate_limited_card_holds_back_the_card_not_the_run(bot: SlackBot) -> None:
    """Four 429s with Retry-After 15 on the card (a minute of Slack's waiting): the run completes
    and answers while the card's final state is still waiting; the card shows it once they pass."""
    bot.control.inject_fault("chat.update", kind="ratelimited", count=4, retry_after=15)
    ts = bot.mention("plan: check_health")
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED  # the loop did not wait for the card ...
    assert faults_left(bot) > 0 and "Done" not in card_of(bot, ts)  # ... which is still waiting
    assert answers(bot, ts) == 1 and finished_in_audit(bot, run_id)
    assert bot.service.reporting(run_id)  # handed to the report: the sweep has it sent again

    def reported() -> bool:
        # The card can say Done before the report is marked done: a report job that gave up
        # waiting for the card leaves the run to the next one, while its send still lands.
        report_again(bot)
        return "Done" in card_of(bot, ts) and not bot.service.reporting(run_id)

    wait_for(reported, timeout=150, what="the final card and the report once Slack's Retry-After passed")
    assert faults_left(bot) == 0
    assert answers(bot, ts) == 1  # the report did the rest once: the answer is not repeated
    updates = bot.calls("chat.update")
    statuses = [c["status"] for c in updates]
    # A report job that gave up waiting and the sweep's job may both write the final state: the
    # same card, written again, once Slack's Retry-After passed; never a 429 more.
    assert statuses[:4] == [429] * 4 and statuses[4:] and set(statuses[4:]) == {200}, updates
    assert len({json.dumps(c["params"]["blocks"]) for c in updates[4:]}) == 1, updates


def test_a_card_update_refused_for_good_does_not_fail_the_run(bot: SlackBot) -> None:
    bot.control.inject_fault("chat.update", kind="error", error="cant_update_message", count=20)
    ts = bot.mention("plan: check_health")
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    assert answers(bot, ts) == 1 and finished_in_audit(bot, run_id)
    assert not bot.service.reporting(run_id)  # nothing left to try: Slack refused it for good
    assert "Done" not in card_of(bot, ts)
    assert all(c["error"] == "cant_update_message" for c in bot.calls("chat.update"))


def test_an_answer_that_could_not_be_posted_is_posted_by_the_next_report(
    make_bot: Callable[..., SlackBot],
) -> None:
    """Server errors outlast the client's retries of the answer: the report step is not marked
    done (the run stays to be reported), and the next job posts the answer, once."""
    bot = make_bot()
    bot.tools = [*bot.tools, Arm(bot, "chat.postMessage", {"kind": "http_error", "status": 500, "count": 4})]
    ts = bot.mention("plan: arm")
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED and finished_in_audit(bot, run_id)
    assert answers(bot, ts, "done: armed") == 0 and bot.service.reporting(run_id)
    assert "Done" in card_of(bot, ts)  # the card came first, and got through
    report_again(bot)
    assert answers(bot, ts, "done: armed") == 1 and not bot.service.reporting(run_id)
    assert faults_left(bot) == 0


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_card_held_back_while_the_run_waits_for_approval_still_says_so(bot: SlackBot) -> None:
    """The run card's "waiting" state, held back by a 429 longer than the job waits, is handed to
    the report like a finished run's card: the sweep's job writes it, after the approval card."""
    bot.control.inject_fault("chat.update", kind="ratelimited", count=1, retry_after=12)
    ts = bot.mention("plan: restart_service")
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.AWAITING_APPROVAL
    replies = bot.bot_replies(ts)
    assert "Approval" in replies[1]["text"]  # the approval card is up, the run card not yet redrawn
    assert "Waiting for approval" not in card_of(bot, ts) and bot.service.reporting(run_id)

    def waiting_card_reported() -> bool:
        # The card can change before the report is marked done: a send already in flight when a
        # job stopped waiting completes after it, and only the next sweep's job sees it sent.
        report_again(bot)
        return "Waiting for approval" in card_of(bot, ts) and not bot.service.reporting(run_id)

    wait_for(waiting_card_reported, timeout=120, what="the run card saying it waits for approval, reported")
    assert bot.status(run_id) is RunStatus.AWAITING_APPROVAL
    assert bot.executions("restart_service") == [] and len(bot.bot_replies(ts)) == 2  # nothing asked twice
    suspended = [e for e in bot.service.audit.entries(run_id) if e.kind is AuditKind.RUN_SUSPENDED]
    assert len(suspended) == 1  # the jobs that only redrew the card did not suspend it again
