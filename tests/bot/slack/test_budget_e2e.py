"""Budgets a person can extend (issue 36, part 2), through the web app, the Slack emulator and a
worker: a run at its token budget suspends as ``budget`` holding no worker, with a card "This
investigation used its budget (N tokens, $X). Extend by N?"; Extend by someone who may decide in
the channel resumes it with the budget raised by the original budget (and nobody else's click
does), Stop ends it ``cancelled``; forged, replayed and other runs' clicks, and a decision written
into Redis, do nothing; a channel past its monthly token cap refuses the next run."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent.scripted import FunctionModel
from agent.types import Choice, Message, Request, Response, RunStatus, ToolCall, Usage
from bot.observability.audit import AuditKind
from bot.observability.metrics import RUNS_REFUSED, MetricsStore
from bot.runs.budget_asks import BudgetStatus
from bot.slack.handlers.budget_clicks import ALREADY, NOT_THIS_CARD
from bot.slack.rendering.budget_card import ACTION_BUDGET_STOP, ACTION_EXTEND
from emulator.slack import SlackEmulator
from tests.bot.slack.test_clicks import notes_to
from tests.bot.slack.test_undo_e2e import forged
from tests.support.slack_bot import SlackBot
from tests.support.slack_workspace import CHANNEL, buttons, suite_workspace
from tests.support.waiting import wait_for

PEOPLE: dict[str, Any] = {"U_ALICE": "alice", "U_BOB": "bob", "U_CAROL": "carol"}
PER_REQUEST = 1000  # paid tokens each model answer reports
BUDGET = 1000  # CHATOPS_TOKEN_BUDGET: the second answer passes it
PRICES = {"budget-model": {"input": 10.0, "output": 30.0, "cache_read": 1.0}}  # USD per million
SECRET = "budget-secret-0123456789abcdef"


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:
    with SlackEmulator(suite_workspace(users=PEOPLE)) as slack:
        yield slack


def budget_model(request: Request) -> Response:
    """Two health checks, then an answer; every answer costs ``PER_REQUEST`` paid tokens."""
    looked = sum(1 for m in request.messages if m.role == "tool")
    if looked < 2:
        message = Message.assistant(
            None, [ToolCall(id=f"call_{looked}", name="check_health", arguments="{}")]
        )
    else:
        message = Message.assistant("done: healthy")
    return Response(
        id=f"r-{uuid.uuid4().hex[:8]}",
        model="budget-model",
        choices=[Choice(message=message, finish_reason="tool_calls" if message.tool_calls else "stop")],
        usage=Usage(prompt_tokens=PER_REQUEST),
    )


def budget_bot(make_bot: Callable[..., SlackBot], **settings: Any) -> SlackBot:
    values: dict[str, Any] = {
        "chatops_token_budget": BUDGET,
        "llm_prices": PRICES,
        "chatops_approvers": "U_BOB",
        "chatops_runner_secret": SECRET,
    }
    values.update(settings)
    return make_bot(models=[FunctionModel(budget_model, model="budget-model")], **values)


def budget_card(bot: SlackBot, ts: str, count: int = 1) -> dict[str, Any]:
    """The thread's ``count``-th budget card (waited for)."""

    def probe() -> dict[str, Any] | None:
        cards = [m for m in bot.bot_replies(ts) if "used its budget" in json.dumps(m.get("blocks") or [])]
        return cards[count - 1] if len(cards) >= count else None

    return wait_for(probe, what="the budget card")


def at_budget(bot: SlackBot) -> tuple[str, str, dict[str, Any]]:
    """A run that reached its budget and waits: the thread, the run, its card."""
    ts = bot.mention("is web healthy?")
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.AWAITING_BUDGET  # suspended: the job ended, no worker holds it
    card = budget_card(bot, ts)
    shown = json.dumps(card["blocks"])
    # 2,000 paid prompt tokens at $10 per million: $0.02.
    assert "This investigation used its budget (2,000 tokens, $0.02). Extend by 1,000?" in shown
    assert [b["action_id"] for b in buttons(card)] == [ACTION_EXTEND, ACTION_BUDGET_STOP]
    [asked] = [e for e in bot.service.audit.entries(run_id) if e.kind is AuditKind.BUDGET_REQUESTED]
    assert (asked.fields["budget"], asked.fields["spent"], asked.fields["cost"]) == ("1000", "2000", "$0.02")
    return ts, run_id, card


def run_card_text(bot: SlackBot, ts: str) -> str:
    return json.dumps(bot.bot_replies(ts)[0].get("blocks") or [])


def test_a_run_at_its_budget_waits_and_extend_by_a_decider_resumes_it(
    make_bot: Callable[..., SlackBot],
) -> None:
    bot = budget_bot(make_bot)
    ts, run_id, card = at_budget(bot)
    assert "2,000 tokens" in run_card_text(bot, ts) and "$0.02" in run_card_text(bot, ts)

    # Someone who may not decide in this channel: refused, alone; the run still waits.
    assert bot.control.click(card["ts"], "U_CAROL", action_id=ACTION_EXTEND)["status"] == 200
    [note] = notes_to(bot, "U_CAROL")
    assert "not on this bot's approvers list" in note and "Nothing changed" in note
    bot.work()
    assert bot.status(run_id) is RunStatus.AWAITING_BUDGET
    ask = bot.service.budget_asks.get(run_id)
    assert ask is not None and ask.status is BudgetStatus.PENDING

    # Bob extends: the run resumes with its budget raised by the original budget, and finishes.
    click = bot.control.click(card["ts"], "U_BOB", action_id=ACTION_EXTEND)
    assert click["status"] == 200, click
    assert "Extended" in notes_to(bot, "U_BOB")[0]
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    state = bot.service.memory(run_id).load_state()
    assert (
        state is not None and state.token_budget == 2 * BUDGET and state.usage.paid_tokens == 3 * PER_REQUEST
    )
    [decided] = [e for e in bot.service.audit.entries(run_id) if e.kind is AuditKind.BUDGET_DECIDED]
    assert (decided.fields["decision"], decided.fields["decided_by"]) == ("extended", "U_BOB")
    redrawn = bot.redrawn(ts, card["ts"])
    assert not buttons(redrawn) and "Extended by 1,000 tokens by <@U_BOB>" in json.dumps(redrawn["blocks"])
    assert "3,000 tokens" in run_card_text(bot, ts) and "$0.03" in run_card_text(bot, ts)

    # A second click (the same click replayed, or Stop on the same card) does nothing.
    forged(bot, dict(click["payload"]))
    stop = json.loads(json.dumps(click["payload"]))
    stop["actions"][0]["action_id"] = ACTION_BUDGET_STOP
    forged(bot, stop)
    assert notes_to(bot, "U_BOB", 3)[1:] == [ALREADY.format(status="extended", user="U_BOB")] * 2
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    assert len([e for e in bot.service.audit.entries(run_id) if e.kind is AuditKind.BUDGET_DECIDED]) == 1


def test_stop_on_the_budget_card_ends_the_run_cancelled(make_bot: Callable[..., SlackBot]) -> None:
    bot = budget_bot(make_bot)
    ts, run_id, card = at_budget(bot)
    assert bot.control.click(card["ts"], "U_BOB", action_id=ACTION_BUDGET_STOP)["status"] == 200
    bot.work()
    assert bot.status(run_id) is RunStatus.CANCELLED
    state = bot.service.memory(run_id).load_state()
    assert state is not None and state.usage.paid_tokens == 2 * PER_REQUEST  # no request after the card
    assert "stopped at its token budget" in (state.error or "") and "U_BOB" in (state.error or "")
    [decided] = [e for e in bot.service.audit.entries(run_id) if e.kind is AuditKind.BUDGET_DECIDED]
    assert (decided.fields["decision"], decided.fields["decided_by"]) == ("stopped", "U_BOB")
    assert not bot.service.active_run(CHANNEL, ts)


def test_forged_replayed_and_written_decisions_do_nothing(make_bot: Callable[..., SlackBot]) -> None:
    bot = budget_bot(make_bot)
    _, run_id, card = at_budget(bot)
    other_ts, other_run, other_card = at_budget(bot)
    ask = bot.service.budget_asks.get(run_id)
    assert ask is not None
    click = bot.control.click(card["ts"], "U_CAROL", action_id=ACTION_EXTEND)  # refused: a payload to forge
    payload = dict(click["payload"])
    payload["user"] = {"id": "U_BOB", "name": "bob"}  # Slack signs who clicked: a decider's click

    # Another run's card named in the value, another message, another channel, an older round.
    forged(bot, payload, value=f"{other_run}.{ask.id}")
    forged(bot, payload, message_ts=other_card["ts"])
    forged(bot, payload, channel="C_RANDOM")
    forged(bot, payload, value=f"{run_id}.{uuid.uuid4().hex}")
    bot.settle()
    assert notes_to(bot, "U_BOB", 4) == [NOT_THIS_CARD] * 4

    # A Redis writer decides both cards itself: no tag it can make, so neither run goes on.
    key = bot.keys.budget_ask(run_id)
    bot.redis.hset(key, mapping={"status": "extended", "decided_by": "U_BOB", "tag": "0" * 64})
    other = bot.service.budget_asks.get(other_run)
    assert other is not None
    bot.redis.hset(bot.keys.budget_ask(other_run), mapping={"budget": "999999", "base": "999999"})
    bot.service.enqueue(run_id)
    bot.service.enqueue(other_run)
    bot.work()
    assert bot.status(run_id) is RunStatus.AWAITING_BUDGET
    assert bot.status(other_run) is RunStatus.AWAITING_BUDGET
    state = bot.service.memory(run_id).load_state()
    assert state is not None and state.usage.paid_tokens == 2 * PER_REQUEST and state.token_budget is None

    # The edited round is no longer the run's: it asks again on a new card, for its own numbers,
    # and Bob's Extend there raises the budget by the configured 1,000, not the written 999,999.
    card2 = budget_card(bot, other_ts, 2)
    fresh = bot.service.budget_asks.get(other_run)
    assert fresh is not None and (fresh.budget, fresh.base) == (BUDGET, BUDGET) and fresh.id != other.id
    assert bot.control.click(card2["ts"], "U_BOB", action_id=ACTION_EXTEND)["status"] == 200
    bot.work()
    assert bot.status(other_run) is RunStatus.COMPLETED
    done = bot.service.memory(other_run).load_state()
    assert done is not None and done.token_budget == 2 * BUDGET
    # The first card of that run, clicked now: an older round's card, nothing.
    assert bot.control.click(other_card["ts"], "U_BOB", action_id=ACTION_EXTEND)["status"] == 200
    assert notes_to(bot, "U_BOB", 6)[5] == NOT_THIS_CARD


def test_a_channel_past_its_monthly_cap_refuses_the_next_run(make_bot: Callable[..., SlackBot]) -> None:
    bot = budget_bot(
        make_bot, chatops_token_budget=None, chatops_channel_monthly_tokens=2 * PER_REQUEST + 500
    )
    ts = bot.mention("is web healthy?")
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED  # in progress when it passed the cap: it finished
    usage = bot.service.monthly.usage(CHANNEL)
    assert usage is not None and usage.used == 3 * PER_REQUEST and usage.over
    month_key = bot.keys.month_tokens(CHANNEL, usage.month.key)
    assert 0 < bot.redis.ttl(month_key) <= 32 * 24 * 3600  # expires past the month's end

    refused = bot.mention("and the db?")
    bot.settle()
    note = wait_for(lambda: next((m for m in bot.bot_replies(refused) if "token budget" in m["text"]), None))
    assert "This channel has used its token budget for" in note["text"] and "3,000 of 2,500" in note["text"]
    assert bot.run_ids() == [run_id]
    refusals = MetricsStore(bot.redis, bot.keys).read().get(RUNS_REFUSED, {})
    assert any("monthly_tokens" in labels and float(count) >= 1 for labels, count in refusals.items())
