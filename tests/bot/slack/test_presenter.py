"""The Slack presenter against the emulator: throttled card, thread status, rate limits and 5xx."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from agent.findings import Conclusion, Confidence, Findings, Hypothesis, HypothesisStatus
from agent.tooling import ToolCategory, ToolResult
from agent.types import RunStatus, ToolDef
from bot.keys import Keys
from bot.runs.presenter import CardView, RunRef, Step, StepStatus
from bot.runs.record import RunRecords
from bot.slack.delivery.client import make_client
from bot.slack.delivery.presenter import STATUS_TEXT, SlackPresenter
from bot.slack.delivery.sender import SlackSender
from emulator.slack import SlackEmulator, SlackEmulatorClient
from tests.support.slack_bot import SlackBot
from tests.support.slack_workspace import CHANNEL, make_settings, presenter_on
from tests.support.waiting import wait_for, wait_until


def card(status: RunStatus, steps: int) -> CardView:
    done = tuple(Step(f"c{i}", f"tool_{i}", StepStatus.OK, "read_only", 0.1) for i in range(steps))
    return CardView(status, done, steps, steps * 100)


def test_card_updates_are_throttled_and_the_final_state_is_always_written(
    emulator: SlackEmulator,
    control: SlackEmulatorClient,
    redis_client: redis.Redis,
    redis_url: str,
    key_prefix: str,
) -> None:
    sender = SlackSender()  # its own, so that what it still holds is this test's alone
    presenter, run = presenter_on(emulator, redis_client, redis_url, key_prefix, sender=sender)
    ts = presenter.post_run_card(run, card(RunStatus.RUNNING, 0))
    assert ts
    run = RunRef(run.run_id, run.channel, run.thread_ts, run.requester, ts)
    started = time.monotonic()
    for steps in range(1, 21):
        presenter.update_run_card(run, card(RunStatus.RUNNING, steps))
    presenter.update_run_card(run, card(RunStatus.COMPLETED, 21))
    elapsed = time.monotonic() - started
    updates = control.calls("chat.update")
    assert 1 <= len(updates) <= 2 + int(elapsed)  # at most one a second (plus the final one)
    times = [u["time"] for u in updates]
    assert all(b - a >= 0.9 for a, b in itertools.pairwise(times))
    final = json.dumps(updates[-1]["params"]["blocks"])
    assert "tool_20" in final and "Done" in final
    # No stale timer fires after the final state: a timer is a delivery the sender still holds.
    wait_until(lambda: not sender.pending(run.run_id), what="the sender to hold nothing of the run")
    assert len(control.calls("chat.update")) == len(updates)


def test_an_intermediate_state_is_written_within_a_second_even_without_a_later_update(
    emulator: SlackEmulator,
    control: SlackEmulatorClient,
    redis_client: redis.Redis,
    redis_url: str,
    key_prefix: str,
) -> None:
    presenter, run = presenter_on(emulator, redis_client, redis_url, key_prefix)
    ts = presenter.post_run_card(run, card(RunStatus.RUNNING, 0))
    run = RunRef(run.run_id, run.channel, run.thread_ts, run.requester, ts)
    presenter.update_run_card(run, card(RunStatus.RUNNING, 1))  # within the second: deferred
    presenter.update_run_card(run, card(RunStatus.RUNNING, 2))  # replaces the deferred one
    [update] = wait_for(lambda: control.calls("chat.update"), what="the deferred update")
    assert "tool_1" in json.dumps(update["params"]["blocks"])  # the newest state, sent by the timer


def test_thread_status_is_skipped_once_the_workspace_refused_it(
    emulator: SlackEmulator,
    control: SlackEmulatorClient,
    redis_client: redis.Redis,
    redis_url: str,
    key_prefix: str,
) -> None:
    presenter, run = presenter_on(emulator, redis_client, redis_url, key_prefix)
    control.inject_fault("assistant.threads.setStatus", kind="error", error="not_allowed_token_type")
    assert presenter.set_thread_status(run.channel, run.thread_ts, STATUS_TEXT) is False
    assert presenter.set_thread_status(run.channel, run.thread_ts, STATUS_TEXT) is False
    assert len(control.calls("assistant.threads.setStatus")) == 1  # remembered, not asked again
    other, _ = presenter_on(emulator, redis_client, redis_url, key_prefix)  # another worker, same workspace
    assert other.set_thread_status(run.channel, run.thread_ts, STATUS_TEXT) is False
    assert len(control.calls("assistant.threads.setStatus")) == 1
    fresh, _ = presenter_on(emulator, redis_client, redis_url, key_prefix + "other:")
    assert fresh.set_thread_status(run.channel, run.thread_ts, STATUS_TEXT) is True
    assert control.statuses()


@dataclass
class TripSlack:
    """A tool that makes Slack misbehave for the rest of the run: 429s and 500s on posts and updates."""

    control: SlackEmulatorClient
    name: str = "trip_slack"
    category: ToolCategory = ToolCategory.READ_ONLY
    parallel: bool = False
    timeout: float = 10.0

    @property
    def definition(self) -> ToolDef:
        return ToolDef(name=self.name, description="Trip Slack.")

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        self.control.inject_fault("chat.postMessage", kind="ratelimited", count=1, retry_after=1)
        self.control.inject_fault("chat.postMessage", kind="http_error", status=500, count=1)
        self.control.inject_fault("chat.update", kind="http_error", status=503, count=2)
        self.control.inject_fault("chat.update", kind="ratelimited", count=1, retry_after=1)
        return ToolResult("tripped")

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        return None


def test_rate_limits_and_server_errors_do_not_lose_the_answer(make_bot: Callable[..., SlackBot]) -> None:
    bot = make_bot(tools=[])
    bot.tools = [TripSlack(bot.control)]
    ts = bot.mention("plan: trip_slack")
    bot.work()

    def answers() -> list[str]:
        return [str(m["text"]) for m in bot.bot_replies(ts) if str(m["text"]).startswith("done:")]

    def answered() -> bool:
        # On a loaded machine the card's retries can outlast the job's wait for it: the run is
        # then left to the recovery sweep, which any worker runs, and the answer follows from there.
        if not answers():
            bot.service.recover()
            bot.work()
        return bool(answers())

    wait_for(answered, timeout=60, what="the answer, through Slack's 429s and 5xx")
    assert answers() == ["done: tripped"]  # delivered, and exactly once
    statuses: list[Any] = [c["status"] for c in bot.calls("chat.postMessage")]
    assert 429 in statuses and 500 in statuses and statuses[-1] == 200
    updates = [c["status"] for c in bot.calls("chat.update")]
    assert 503 in updates and 429 in updates and updates[-1] == 200
    card = bot.bot_replies(ts)[0]
    assert "Done" in str(card["blocks"])


def test_states_queued_behind_a_rate_limit_are_coalesced_and_the_final_one_is_written(
    emulator: SlackEmulator,
    control: SlackEmulatorClient,
    redis_client: redis.Redis,
    redis_url: str,
    key_prefix: str,
) -> None:
    """A 429 holds the card back one second: the states sent meanwhile replace each other, and
    only the final one goes out after the wait; ``update_run_card`` returns once it did."""
    settings = make_settings(emulator, redis_url, key_prefix, "unused")
    presenter = SlackPresenter(make_client(settings), redis_client, Keys(key_prefix), min_interval=0)
    thread = SlackEmulatorClient(emulator.url).post_message(CHANNEL, "U_ALICE", "web-03 is full")["ts"]
    run = RunRef("c" * 32, CHANNEL, str(thread), "U_ALICE")
    run = RunRef(
        run.run_id,
        run.channel,
        run.thread_ts,
        run.requester,
        presenter.post_run_card(run, card(RunStatus.RUNNING, 0)),
    )
    control.inject_fault("chat.update", kind="ratelimited", count=1, retry_after=1)
    for steps in range(1, 6):
        presenter.update_run_card(run, card(RunStatus.RUNNING, steps))  # none of these waits
    presenter.update_run_card(run, card(RunStatus.COMPLETED, 6))
    updates = control.calls("chat.update")
    assert [u["status"] for u in updates] == [429, 200], updates
    final = json.dumps(updates[-1]["params"]["blocks"])
    assert "tool_5" in final and "Done" in final


def findings_version(version: int) -> Findings:
    hypothesis = Hypothesis(
        id="H1",
        statement="logs fill /var/log",
        status=HypothesisStatus.OPEN,
        claimed_status=HypothesisStatus.OPEN,
    )
    return Findings(
        conclusion=Conclusion.INVESTIGATING,
        claimed_conclusion=Conclusion.INVESTIGATING,
        confidence=Confidence.LOW,
        claimed_confidence=Confidence.LOW,
        hypotheses=(hypothesis,),
        version=version,
    )


def test_findings_are_one_message_whose_newest_version_is_the_only_one_sent_after_the_first(
    emulator: SlackEmulator,
    control: SlackEmulatorClient,
    redis_client: redis.Redis,
    redis_url: str,
    key_prefix: str,
) -> None:
    sender = SlackSender()
    presenter, run = presenter_on(emulator, redis_client, redis_url, key_prefix, sender=sender)
    fields = {
        "run_id": run.run_id,
        "channel": run.channel,
        "thread_ts": run.thread_ts,
        "requester": "U_ALICE",
    }
    redis_client.hset(Keys(key_prefix).run(run.run_id), mapping=fields)
    for version in range(1, 11):  # the loop never waits: each is queued, a newer one replaces it
        presenter.show_findings(run, findings_version(version))
    wait_until(lambda: not sender.pending(run.run_id), what="the findings sent")
    [post] = control.calls("chat.postMessage")
    updates = control.calls("chat.update")
    assert len(updates) <= 1  # the first version posted, then only the newest
    shown = [m for m in control.thread(CHANNEL, run.thread_ts) if "Findings" in str(m["text"])]
    assert [m["ts"] for m in shown] == [post["response"]["ts"]] and "update 10" in shown[0]["text"]
    record = RunRecords(redis_client, Keys(key_prefix)).get(run.run_id)
    assert record is not None and record.findings_ts == shown[0]["ts"]

    # Another worker's presenter (the run resumed there) edits the recorded message.
    other, _ = presenter_on(emulator, redis_client, redis_url, key_prefix, run_id=run.run_id, sender=sender)
    other.show_findings(run, findings_version(11))
    wait_until(lambda: not sender.pending(run.run_id), what="the resumed run's findings sent")
    assert len(control.calls("chat.postMessage")) == 1  # no second Findings message
    last = control.calls("chat.update")[-1]["params"]
    assert last["ts"] == shown[0]["ts"] and "update 11" in last["text"]
