"""The web process's courtesies (:eyes:, the queued note) stay within Slack's rate tier: under a
flood of mentions they are skipped, never queued up or waited out, and nothing else suffers."""

from __future__ import annotations

from collections.abc import Callable

import redis

from bot.keys import Keys
from bot.slack.delivery.sender import RetryAfter
from bot.slack.handlers.courtesy import Allowance, CourtesyBudget
from tests.support.slack_bot import SlackBot
from tests.support.slack_workspace import BOT_USER


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_budget_allows_a_burst_then_slacks_rate_and_refills() -> None:
    clock = Clock()
    budget = CourtesyBudget(lambda: None, {"reactions.add": Allowance(60.0, burst=3)}, clock=clock)
    assert [budget.take("reactions.add") for _ in range(4)] == [True, True, True, False]
    clock.now += 1.0  # 60 a minute: one more a second
    assert [budget.take("reactions.add") for _ in range(2)] == [True, False]
    assert budget.skipped == 2


def test_a_retry_after_any_process_learned_skips_the_courtesy(redis_client: redis.Redis, keys: Keys) -> None:
    shared = RetryAfter(redis_client, keys, "T_COURTESY")
    budget = CourtesyBudget(
        lambda: shared, {m: Allowance(60.0, burst=3) for m in ("reactions.add", "chat.postEphemeral")}
    )
    RetryAfter(redis_client, keys, "T_COURTESY").block("reactions.add", 30)  # as another process would
    assert not budget.take("reactions.add")
    assert budget.take("chat.postEphemeral")  # per method: the other one is not held back


def test_a_burst_of_mentions_all_get_eyes_from_the_web_process(
    make_bot: Callable[..., SlackBot],
) -> None:
    """40 mentions at once, no worker: all stored, all with :eyes: at once (within the burst; the
    ceiling beyond it is the unit tests' above)."""
    bot = make_bot(
        chatops_user_runs_per_window=1000,
        chatops_channel_runs_per_window=1000,
        chatops_channel_max_active_runs=1000,
    )
    threads = [bot.say(f"<@{BOT_USER}> plan: check_health {n}") for n in range(40)]
    assert len({bot.run_id(ts) for ts in threads}) == 40
    bot.settle()
    reacted = {c["params"]["timestamp"] for c in bot.calls("reactions.add") if c["status"] == 200}
    assert reacted == set(threads)
