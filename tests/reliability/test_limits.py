"""Limits on new runs (per person, per channel, concurrent per channel) and on a run's mutating actions.

Over a limit, a mention starts nothing and gets one polite reply in its thread saying why and
when to try again; the model gets ``Error: declined: ...`` for a mutating call over the run's cap,
and nobody is asked to approve it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from agent.types import RunStatus
from bot.runs.approvals import ApprovalStatus
from bot.runs.limits import LimitSettings, Refusal, RunLimits
from bot.slack.rendering import render
from tests.support.slack_bot import SlackBot
from tests.support.slack_workspace import CHANNEL, buttons
from tests.support.waiting import wait_for

pytestmark = pytest.mark.reliability


def replies_to(bot: SlackBot, ts: str) -> list[str]:
    return [str(m["text"]) for m in bot.bot_replies(ts)]


def polite_reply(bot: SlackBot, ts: str) -> str:
    return wait_for(
        lambda: next((t for t in replies_to(bot, ts) if t.startswith("Sorry")), None), what="the reply"
    )


def handled(bot: SlackBot, text: str, user: str = "U_ALICE") -> str:
    """Mention and wait until it started a run or got its reply (Slack delivers concurrently)."""
    ts = bot.mention(text, user)

    def done() -> bool:
        return bool(bot.service.active_run(CHANNEL, ts)) or any(
            t.startswith("Sorry") for t in replies_to(bot, ts)
        )

    wait_for(done, what=f"the mention {text!r} to be handled")
    return ts


def test_a_person_over_the_rate_limit_gets_a_polite_reply_and_starts_nothing(
    make_bot: Callable[..., SlackBot],
) -> None:
    bot = make_bot(chatops_user_runs_per_window=2, chatops_rate_window_seconds=60)
    first, second = handled(bot, "plan: check_health #1"), handled(bot, "plan: check_health #2")
    third = handled(bot, "plan: check_health #3")
    reply = polite_reply(bot, third)
    assert reply.startswith("Sorry <@U_ALICE>, you have started 2 runs in the last 60 s")
    assert "Please try again in" in reply
    assert bot.service.active_run(CHANNEL, third) is None
    assert {bot.run_id(first), bot.run_id(second)} and int(bot.redis.zcard(bot.keys.active_runs())) == 2
    other = bot.mention("plan: check_health #bob", user="U_BOB")  # someone else is not limited
    assert bot.run_id(other)
    # A reply in an active run's thread is not a new run: never limited.
    bot.mention("and check web-04", thread_ts=first)
    wait_for(lambda: bot.service.inbox.peek(bot.run_id(first)), what="the injected mention")
    bot.settle()  # every delivery answered and followed up: a second reply would be there
    assert len(replies_to(bot, third)) == 1  # said once, although Slack delivered the message twice
    assert [d["status"] for d in bot.control.deliveries(kind="event")].count(200) == len(
        bot.control.deliveries(kind="event")
    )


def test_a_busy_channel_over_its_rate_limit_refuses_anyone(make_bot: Callable[..., SlackBot]) -> None:
    bot = make_bot(chatops_channel_runs_per_window=2, chatops_user_runs_per_window=0)
    handled(bot, "plan: check_health #1", user="U_ALICE")
    handled(bot, "plan: check_health #2", user="U_BOB")
    third = handled(bot, "plan: check_health #3", user="U_BOB")
    assert polite_reply(bot, third).startswith(
        "Sorry <@U_BOB>, 2 runs were started in this channel in the last 60 s"
    )
    assert int(bot.redis.zcard(bot.keys.active_runs())) == 2


def test_the_window_slides(make_bot: Callable[..., SlackBot]) -> None:
    bot = make_bot(chatops_user_runs_per_window=1, chatops_rate_window_seconds=1)
    handled(bot, "plan: check_health #1")
    refused = handled(bot, "plan: check_health #2")
    assert "try again in 1 s" in polite_reply(bot, refused)
    time.sleep(1.2)
    later = bot.mention("plan: check_health #3")
    assert bot.run_id(later)


def test_a_channel_runs_at_most_its_cap_at_once_and_takes_more_when_one_finishes(
    make_bot: Callable[..., SlackBot],
) -> None:
    bot = make_bot(chatops_channel_max_active_runs=2, chatops_user_runs_per_window=0)
    first = handled(bot, "plan: restart_service #1")
    second = handled(bot, "plan: restart_service #2", user="U_BOB")
    bot.work()  # both wait for an approval: still in progress
    third = handled(bot, "plan: check_health #3")
    assert "this channel already has 2 runs in progress" in polite_reply(bot, third)
    card = wait_for(
        lambda: next((m for m in bot.bot_replies(first) if buttons(m) and "Approval" in m["text"]), None)
    )
    bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_APPROVE)
    run_id = bot.run_id(first)
    wait_for(lambda: bot.service.approvals.for_run(run_id)[0].status is ApprovalStatus.APPROVED)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    fourth = bot.mention("plan: check_health #4")
    assert bot.run_id(fourth) and bot.status(bot.run_id(second)) is RunStatus.AWAITING_APPROVAL


def test_mentions_at_the_same_moment_never_exceed_the_cap(make_bot: Callable[..., SlackBot]) -> None:
    bot = make_bot(chatops_channel_max_active_runs=3, chatops_user_runs_per_window=0)
    with ThreadPoolExecutor(10) as pool:
        threads = list(pool.map(lambda n: bot.mention(f"plan: check_health #{n}"), range(10)))

    def everyone_answered() -> bool:
        started = sum(1 for ts in threads if bot.service.active_run(CHANNEL, ts))
        refused = sum(1 for ts in threads if any(t.startswith("Sorry") for t in replies_to(bot, ts)))
        return started + refused == 10

    wait_for(everyone_answered, what="every mention started or refused")
    assert sum(1 for ts in threads if bot.service.active_run(CHANNEL, ts)) == 3


def test_a_run_over_its_mutating_cap_gets_an_error_and_nobody_is_asked(
    make_bot: Callable[..., SlackBot],
) -> None:
    bot = make_bot(chatops_max_mutating_actions=2)
    ts = bot.mention("plan: restart_service restart_service restart_service")
    run_id = bot.run_id(ts)
    for _ in range(2):
        bot.work()
        [pending] = [a for a in bot.service.approvals.for_run(run_id) if a.status is ApprovalStatus.PENDING]
        approve_card(bot, ts, pending.id)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    assert len(bot.executions("restart_service")) == 2
    assert len(bot.service.approvals.for_run(run_id)) == 2  # the third was never put to anyone
    last = [m.content or "" for m in bot.service.history(run_id) if m.role == "tool"][-1]
    assert last.startswith("Error: declined: this run has already had 2 mutating actions approved")
    assert "CHATOPS_MAX_MUTATING_ACTIONS=2" in last
    cards = [m for m in bot.bot_replies(ts) if "Approval" in str(m["text"])]
    assert len(cards) == 2


def approve_card(bot: SlackBot, ts: str, approval_id: str) -> None:
    def card() -> dict[str, object] | None:
        return next((m for m in bot.bot_replies(ts) if approval_id in str(m.get("blocks"))), None)

    bot.control.click(str(wait_for(card)["ts"]), "U_BOB", action_id=render.ACTION_APPROVE)

    def approved() -> bool:
        approval = bot.service.approvals.get(approval_id)
        return approval is not None and approval.status is ApprovalStatus.APPROVED

    wait_for(approved, what="the approval")


def test_zero_means_no_limit(redis_client: object, keys: object) -> None:
    no_limits = LimitSettings(user_runs=0, channel_runs=0, channel_active_runs=0, mutating_actions=0)
    limits = RunLimits(lambda: redis_client, keys, no_limits)  # type: ignore[arg-type, return-value]
    assert all(limits.admit("C1", "U1", f"{n}.0").allowed for n in range(50))
    assert not limits.enabled and Refusal.USER_RATE.value == "user_rate"
