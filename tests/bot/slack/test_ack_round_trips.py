"""The ack path's cost in Redis round trips per mention, pinned on a ``redis-server`` of the test's own.

Under a burst of mentions the web process's ack path is CPU-bound, and each round trip costs it
redis-py's work as well as the wait (issue 29: 9 of them per mention made the p99 queue). Counted by
the server itself: ``INFO stats``' ``total_reads_processed`` grows by one for each request the
web process sends (a command, or a pipeline sent at once), and nothing else talks to this server.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

import redis
from rq import Queue

from bot.ops.compose_web import web_runtime
from bot.settings import Settings
from bot.slack.handlers.events import EventHandler, Outcome, OutcomeKind
from tests.reliability.redis_proc import RedisProcess
from tests.support.slack_workspace import BOT_USER, CHANNEL, SECRET, TOKEN

# A new thread's mention: the event and message claims with the thread's active run (2), the
# limits' admission, the record's creation, and one MULTI/EXEC for
# the start job, the limits' binding, the thread's last run and both claims' confirmations.
NEW_THREAD_MENTION_ROUND_TRIPS = 5
# (6 before the incident memory's lookup went to the run's first job: ``bot.runs.first_similar``.)
QUEUE = "ack-round-trips"


def reads(probe: redis.Redis) -> int:
    """The requests the server has read so far (this ``INFO`` included)."""
    return int(probe.info("stats")["total_reads_processed"])


def mention_body(
    event_id: str, ts: str, text: str = "web-03 is out of disk, deal with it", thread_ts: str = ""
) -> dict[str, Any]:
    event = {
        "type": "app_mention",
        "user": "U_ALICE",
        "text": f"<@{BOT_USER}> {text}",
        "ts": ts,
        "event_ts": ts,
        "channel": CHANNEL,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return {"type": "event_callback", "event_id": event_id, "event": event}


def new_ts() -> str:
    return f"{int(time.time())}.{secrets.randbelow(10**6):06d}"


def settings_on(server: RedisProcess) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        slack_bot_token=TOKEN,
        slack_signing_secret=SECRET,
        redis_url=server.url,
        chatops_redis_prefix="ack:",
        chatops_queue=QUEUE,
    )


def test_a_new_threads_mention_is_stored_in_five_round_trips(private_redis: RedisProcess) -> None:
    runtime = web_runtime(settings_on(private_redis))
    handler = EventHandler(runtime)
    probe = private_redis.client()

    def mention(event_id: str) -> tuple[Outcome, int]:
        before = reads(probe)
        outcome = handler.mention(mention_body(event_id, new_ts()), BOT_USER)
        return outcome, reads(probe) - before - 1  # the second INFO's own read

    # The first opens the connection and loads the scripts; what the pin is about comes after.
    assert mention("EvWarm")[0].kind is OutcomeKind.STARTED
    outcome, round_trips = mention("EvPinned")
    assert outcome.kind is OutcomeKind.STARTED
    assert round_trips == NEW_THREAD_MENTION_ROUND_TRIPS
    # All of it stored: the run, its start job, the claims that make Slack's retry a duplicate.
    keys = runtime.keys
    assert probe.get(keys.seen_message(CHANNEL, outcome.ts)) == outcome.run_id.encode()
    assert probe.get(keys.seen_event("EvPinned")) == b"done"
    assert probe.get(keys.thread(CHANNEL, outcome.ts)) == outcome.run_id.encode()
    record = runtime.service().get(outcome.run_id)
    assert record is not None and record.job_id in Queue(QUEUE, connection=probe).job_ids
    # Slack's retry of the same event is answered from the event's claim alone.
    before = reads(probe)
    retry = handler.mention(mention_body("EvPinned", outcome.ts), BOT_USER)
    assert retry.kind is OutcomeKind.DUPLICATE and reads(probe) - before - 1 == 2


def test_a_new_threads_mention_whose_thread_has_a_run_already_is_neither_lost_nor_a_second_run(
    private_redis: RedisProcess,
) -> None:
    """The speculative claim of a new thread's message is given back when the thread turns out to
    have a run: a reply's mention that Slack delivered before the root's, or a thread claim that a
    hostile Redis writer planted naming no run at all."""
    runtime = web_runtime(settings_on(private_redis))
    handler = EventHandler(runtime)
    probe, keys = private_redis.client(), runtime.keys
    root, reply = new_ts(), new_ts()
    first = handler.mention(mention_body("EvReply", reply, "check web-04 too", thread_ts=root), BOT_USER)
    assert first.kind is OutcomeKind.STARTED and first.thread_ts == root
    late = handler.mention(mention_body("EvRoot", root), BOT_USER)
    assert late.kind is OutcomeKind.INJECTED and late.run_id == first.run_id
    assert [item.text for item in runtime.service().inbox.peek(first.run_id)] == [
        "web-03 is out of disk, deal with it"
    ]
    assert probe.get(keys.seen_message(CHANNEL, root)) == first.run_id.encode()  # the inbox's claim
    again = handler.mention(mention_body("EvRootAgain", root), BOT_USER)  # the same message, another id
    assert again.kind is OutcomeKind.INJECTED and len(runtime.service().inbox.peek(first.run_id)) == 1
    assert probe.zcard(keys.active_runs()) == 1

    planted = new_ts()
    probe.set(keys.thread(CHANNEL, planted), "no-such-run")
    started = handler.mention(mention_body("EvPlanted", planted), BOT_USER)
    assert started.kind is OutcomeKind.STARTED and started.run_id != "no-such-run"
    assert probe.get(keys.thread(CHANNEL, planted)) == started.run_id.encode()
    assert probe.get(keys.seen_message(CHANNEL, planted)) == started.run_id.encode()
    assert probe.zcard(keys.active_runs()) == 2
