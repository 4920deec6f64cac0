"""Events over HTTP: signatures, retries and double delivery, Redis outages, bots, channels, threads."""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Callable
from typing import Any

from rq import Queue
from slack_bolt import BoltRequest

from agent.scripted import FunctionModel
from agent.types import Request, RunStatus
from bot.runs.early_replies import EARLY_MAX_ITEMS, EARLY_TTL_SECONDS
from bot.slack.handlers.app import build_app
from bot.slack.handlers.runtime import WebRuntime
from tests.support.slack_bot import SlackBot
from tests.support.slack_http import event_envelope, http, signed_post
from tests.support.slack_workspace import BOT_USER, CHANNEL
from tests.support.waiting import wait_for


def new_ts() -> str:
    return f"{int(time.time())}.{secrets.randbelow(10**6):06d}"


def app_mention(ts: str, text: str, *, user: str = "U_ALICE", thread_ts: str | None = None) -> dict[str, Any]:
    event = {
        "type": "app_mention",
        "user": user,
        "text": f"<@{BOT_USER}> {text}",
        "ts": ts,
        "channel": CHANNEL,
    }
    event["event_ts"] = ts
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event


def message(
    ts: str, text: str, *, user: str = "U_BOB", thread_ts: str | None = None, **extra: Any
) -> dict[str, Any]:
    event = {"type": "message", "user": user, "text": text, "ts": ts, "channel": CHANNEL, "event_ts": ts}
    event.update({"channel_type": "channel", **extra})
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event


def deliver(bot: SlackBot, event: dict[str, Any], event_id: str, retry: int | None = None) -> int:
    body = json.dumps(event_envelope(event, event_id)).encode()
    extra = {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"} if retry else None
    return signed_post(bot.events_url, body, extra=extra).status


def runs_started(bot: SlackBot) -> int:
    return int(bot.redis.zcard(bot.keys.active_runs()))


def queued_jobs(bot: SlackBot) -> int:
    return Queue(bot.settings.chatops_queue, connection=bot.redis).count


def test_slack_retries_and_double_delivery_start_one_run(bot: SlackBot) -> None:
    ts = new_ts()
    mention = app_mention(ts, "plan: check_health")
    assert deliver(bot, mention, "Ev1") == 200
    assert deliver(bot, mention, "Ev1", retry=1) == 200  # Slack's retry: same event id
    assert deliver(bot, mention, "Ev1", retry=2) == 200
    assert (
        deliver(bot, message(ts, mention["text"], user="U_ALICE"), "Ev2") == 200
    )  # the message.channels copy
    assert deliver(bot, mention, "Ev3") == 200  # the same message under another event id
    assert runs_started(bot) == 1 and queued_jobs(bot) == 1
    bot.work()
    assert len(bot.executions("check_health")) == 1


def test_a_mention_and_its_message_copy_in_an_active_thread_inject_once(bot: SlackBot) -> None:
    root = new_ts()
    assert deliver(bot, app_mention(root, "plan: check_health"), "Ev10") == 200
    run_id = bot.service.active_run(CHANNEL, root)
    assert run_id
    ts = new_ts()
    follow_up = app_mention(ts, "also check web-04", user="U_BOB", thread_ts=root)
    assert deliver(bot, message(ts, follow_up["text"], thread_ts=root), "Ev12") == 200
    assert deliver(bot, follow_up, "Ev11") == 200
    assert deliver(bot, follow_up, "Ev11", retry=1) == 200
    assert [item.text for item in bot.service.inbox.peek(run_id)] == ["also check web-04"]
    assert runs_started(bot) == 1


def test_forged_or_stale_signatures_get_401_and_store_nothing(bot: SlackBot) -> None:
    body = json.dumps(event_envelope(app_mention(new_ts(), "plan: check_health"), "EvForged")).encode()
    assert signed_post(bot.events_url, body, secret="not-the-secret").status == 401
    assert signed_post(bot.events_url, body, timestamp=int(time.time()) - 600).status == 401
    assert http(bot.events_url, body, {"Content-Type": "application/json"}).status == 401
    assert list(bot.redis.scan_iter(match=f"{bot.settings.chatops_redis_prefix}*")) == []
    assert queued_jobs(bot) == 0
    assert signed_post(bot.events_url, body).status == 200  # the same body, correctly signed
    assert runs_started(bot) == 1


def test_without_redis_slack_gets_a_non_2xx_and_health_says_503(make_bot: Callable[..., SlackBot]) -> None:
    healthy = make_bot()
    broken = make_bot(redis_url="redis://127.0.0.1:1/0")
    assert healthy.server is not None and broken.server is not None
    assert http(f"{healthy.server.url}/healthz").status == 200
    assert http(f"{broken.server.url}/healthz").status == 503
    ts = new_ts()
    status = deliver(broken, app_mention(ts, "plan: check_health"), "EvDown")
    assert status >= 500  # Slack retries a non-2xx; a 200 would lose the mention
    assert deliver(broken, message(new_ts(), "a reply", thread_ts=ts), "EvDown2") >= 500
    broken.settle()  # what the answers handed on (nothing, we expect) is done
    assert broken.calls("reactions.add") == [] and broken.calls("chat.postMessage") == []
    # The same event is stored once Redis is back (here: the healthy bot on the same emulator).
    assert deliver(healthy, app_mention(ts, "plan: check_health"), "EvDown", retry=1) == 200
    assert runs_started(healthy) == 1


def test_bots_and_the_bots_own_messages_are_ignored(bot: SlackBot) -> None:
    root = new_ts()
    deliver(bot, app_mention(root, "plan: check_health"), "EvB1")
    run_id = bot.service.active_run(CHANNEL, root)
    assert run_id
    other_bot = message(new_ts(), "I am a bot", user="U_OTHERBOT", thread_ts=root, bot_id="B_OTHER")
    assert deliver(bot, other_bot, "EvB2") == 200
    own = message(new_ts(), "my own card", user=BOT_USER, thread_ts=root, bot_id="B_OPS")
    assert deliver(bot, own, "EvB3") == 200
    bot_mention = {**app_mention(new_ts(), "hello", user="U_OTHERBOT"), "bot_id": "B_OTHER"}
    assert deliver(bot, bot_mention, "EvB4") == 200
    edited = message(new_ts(), "edited", thread_ts=root, subtype="message_changed")
    assert deliver(bot, edited, "EvB5") == 200
    assert bot.service.inbox.peek(run_id) == [] and runs_started(bot) == 1


def test_outside_the_allowed_channels_the_bot_says_so_once(make_bot: Callable[..., SlackBot]) -> None:
    bot = make_bot(chatops_channels="C_RANDOM")
    first = bot.mention("plan: check_health")
    second = bot.mention("plan: check_health, please")
    notices = wait_for(lambda: bot.calls("chat.postMessage"), what="the notice")
    bot.settle()  # both deliveries answered and followed up: a second notice would be there
    notices = bot.calls("chat.postMessage")
    assert len(notices) == 1
    assert "only take requests in <#C_RANDOM>" in notices[0]["params"]["text"]
    assert notices[0]["params"]["thread_ts"] in (first, second)  # whichever Slack delivered first
    assert runs_started(bot) == 0


def test_a_mention_in_a_finished_thread_starts_a_run_that_carries_the_conversation(
    make_bot: Callable[..., SlackBot],
) -> None:
    def answer(request: Request) -> str:
        first = next(m.content or "" for m in request.messages if m.role == "user")
        return "second answer" if "Earlier in this thread" in first else "web-03 disk is 97% full"

    model = FunctionModel(answer)
    bot = make_bot(models=[model])
    root = bot.mention("how full is web-03?")
    first_run = bot.run_id(root)
    bot.work()
    assert bot.status(first_run) is RunStatus.COMPLETED
    bot.mention("and what should we delete?", user="U_BOB", thread_ts=root)

    def new_run() -> str | None:
        latest = bot.run_id(root)
        return latest if latest != first_run else None

    second_run = wait_for(new_run, what="a second run")
    bot.work()
    prompt = next(m.content or "" for m in model.requests[-1].messages if m.role == "user")
    assert "<@U_ALICE> wrote:\n    | how full is web-03?" in prompt
    assert "The answer was:\n    | web-03 disk is 97% full" in prompt
    assert prompt.endswith("New request: and what should we delete?")
    assert bot.status(second_run) is RunStatus.COMPLETED


def test_a_mention_in_a_thread_with_an_active_run_is_injected_not_a_second_run(bot: SlackBot) -> None:
    root = bot.mention("plan: check_health")
    run_id = bot.run_id(root)
    follow = bot.mention("check web-04 as well", user="U_BOB", thread_ts=root)
    wait_for(lambda: bot.service.inbox.peek(run_id), what="the injected mention")
    assert [i.text for i in bot.service.inbox.peek(run_id)] == ["check web-04 as well"]
    assert runs_started(bot) == 1
    wait_for(lambda: any(c["params"].get("timestamp") == follow for c in bot.calls("reactions.add")))


def test_replies_in_threads_without_an_active_run_are_ignored(bot: SlackBot) -> None:
    root = bot.say("web-03 looks slow", user="U_ALICE")
    bot.say("agreed", user="U_BOB", thread_ts=root)
    bot.settle()  # both messages delivered and followed up
    assert bot.calls("reactions.add") == [] and runs_started(bot) == 0
    deliveries = bot.control.deliveries(kind="event")
    assert deliveries and all(d["status"] == 200 for d in deliveries)


def test_each_forked_process_opens_its_own_redis_connection(bot: SlackBot) -> None:
    """``chatops web`` forks worker processes: ``WebRuntime`` must not hand a child the parent's connection pool."""
    assert bot.runtime is not None
    parent = bot.runtime.redis()
    assert parent.ping() and bot.runtime.redis() is parent
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave at once, without running pytest's teardown
        child = bot.runtime.redis()
        os.write(write, b"ok" if child is not parent and child.ping() else b"shared")
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 16) == b"ok"
    assert bot.runtime.redis() is parent


def test_broadcast_replies_and_file_shares_are_injected_too(bot: SlackBot) -> None:
    root = new_ts()
    deliver(bot, app_mention(root, "plan: check_health"), "EvS1")
    run_id = bot.service.active_run(CHANNEL, root)
    assert run_id
    broadcast = message(new_ts(), "also posted to the channel", thread_ts=root, subtype="thread_broadcast")
    files = [{"id": "F1", "name": "dmesg.txt", "title": "dmesg"}]
    shared = message(new_ts(), "here is dmesg", thread_ts=root, subtype="file_share", files=files)
    assert deliver(bot, broadcast, "EvS2") == 200 and deliver(bot, shared, "EvS3") == 200
    texts = [item.text for item in bot.service.inbox.peek(run_id)]
    assert texts == ["also posted to the channel", "here is dmesg\n[attached: dmesg.txt]"]


def test_socket_mode_requests_need_no_signature_and_are_stored_the_same_way(bot: SlackBot) -> None:
    """Socket Mode delivers the same payloads over a WebSocket (no signature); Bolt acks only a 200."""
    assert bot.runtime is not None
    app = build_app(WebRuntime(bot.settings, tuning=bot.tuning), socket_mode=True)
    ts = new_ts()
    response = app.dispatch(
        BoltRequest(body=event_envelope(app_mention(ts, "plan: check_health"), "EvSock"), mode="socket_mode")
    )
    assert response.status == 200
    assert bot.service.active_run(CHANNEL, ts)
    down = build_app(
        WebRuntime(bot.settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"}), tuning=bot.tuning),
        socket_mode=True,
    )
    failed = down.dispatch(
        BoltRequest(body=event_envelope(app_mention(new_ts(), "x"), "EvSock2"), mode="socket_mode")
    )
    assert failed.status >= 500  # not acknowledged: Slack redelivers the envelope


def test_a_retry_while_the_first_attempt_is_still_storing_gets_a_non_2xx(bot: SlackBot) -> None:
    ts = new_ts()
    mention = app_mention(ts, "plan: check_health")
    # The first delivery is still being stored (its claim is pending): Slack must come back later,
    # not be told "done" for an attempt that may yet fail.
    bot.redis.set(bot.keys.seen_event("EvP"), "pending", ex=30)
    assert deliver(bot, mention, "EvP", retry=1) == 503
    bot.redis.set(bot.keys.seen_message(CHANNEL, ts), "pending", ex=30)  # the same, by message
    assert deliver(bot, mention, "EvQ") == 503
    assert runs_started(bot) == 0
    # The first attempt failed and its claims expired (or were released): the next retry stores it.
    bot.redis.delete(bot.keys.seen_event("EvP"), bot.keys.seen_message(CHANNEL, ts))
    assert deliver(bot, mention, "EvP", retry=2) == 200
    assert runs_started(bot) == 1
    assert deliver(bot, mention, "EvP", retry=3) == 200  # done now: a plain duplicate
    assert runs_started(bot) == 1


def test_a_run_created_by_an_attempt_that_then_failed_is_not_started_twice(bot: SlackBot) -> None:
    ts = new_ts()
    # An earlier attempt created the run, then lost Redis before confirming its claims.
    first = bot.service.submit(CHANNEL, ts, requester="U_ALICE", text="plan: check_health", message_ts=ts)
    assert deliver(bot, app_mention(ts, "plan: check_health"), "EvR", retry=1) == 200
    assert runs_started(bot) == 1 and bot.service.inbox.peek(first.run_id) == []
    assert bot.redis.get(bot.keys.seen_message(CHANNEL, ts)) == first.run_id.encode()


def test_the_web_app_starts_and_stores_events_while_slack_is_unreachable(
    make_bot: Callable[..., SlackBot],
) -> None:
    bot = make_bot(slack_api_url="http://127.0.0.1:1/api/")  # nothing listens there
    assert bot.server is not None and bot.runtime is not None
    assert bot.runtime.identity.lookup() is None  # auth.test fails, and that is fine
    assert http(f"{bot.server.url}/healthz").status == 200
    ts = new_ts()
    assert deliver(bot, app_mention(ts, "plan: check_health"), "EvOffline") == 200
    assert bot.service.active_run(CHANNEL, ts)


def test_a_reply_handled_before_its_mention_reaches_the_run(bot: SlackBot) -> None:
    """Slack's events come in any order: a reply posted right after the mention can be handled
    first. It is answered 200 only once stored, so it must reach the run the mention starts."""
    root = new_ts()
    reply = message(new_ts(), "and check web-04", thread_ts=root)
    assert deliver(bot, reply, "EvEarly") == 200  # no run in the thread yet: kept for it
    assert deliver(bot, reply, "EvEarly", retry=1) == 200  # Slack's retry: stored once
    assert deliver(bot, app_mention(root, "plan: check_health"), "EvMention") == 200
    run_id = wait_for(lambda: bot.service.active_run(CHANNEL, root), what="the run")
    assert [i.text for i in bot.service.inbox.peek(run_id)] == ["and check web-04"]
    assert not bot.redis.exists(bot.keys.early_replies(CHANNEL, root))
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    assert "and check web-04" in [m.content for m in bot.service.history(run_id) if m.role == "user"]


def test_a_reply_to_an_old_thread_without_a_run_is_not_kept(bot: SlackBot) -> None:
    root = f"{int(time.time()) - 3600}.000100"  # an hour old: its mention, if any, was handled long ago
    assert deliver(bot, message(new_ts(), "agreed", thread_ts=root), "EvOld") == 200
    assert not bot.redis.exists(bot.keys.early_replies(CHANNEL, root))


def test_a_flood_of_replies_to_a_young_thread_is_capped(bot: SlackBot) -> None:
    """A hostile member replying without end to a fresh thread: Redis keeps a bounded list only;
    beyond it Slack is told to retry (503), never told a message is stored that is not."""
    root = new_ts()
    statuses = [
        deliver(bot, message(new_ts(), f"spam {n}", thread_ts=root), f"EvFlood{n}")
        for n in range(EARLY_MAX_ITEMS + 2)
    ]
    assert statuses == [200] * EARLY_MAX_ITEMS + [503, 503]
    assert bot.redis.llen(bot.keys.early_replies(CHANNEL, root)) == EARLY_MAX_ITEMS
    assert 0 < int(bot.redis.ttl(bot.keys.early_replies(CHANNEL, root))) <= EARLY_TTL_SECONDS
