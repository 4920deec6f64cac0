"""A thread reply handled while its thread's mention is being stored is never acknowledged and lost.

Slack delivers a mention and a reply sent right after it to concurrent requests. The reply's
request reads what the thread has (its active run, its last run); if the mention's run started
between two separate reads, the reply saw no active run and a *last* run that had not ended, and
was ignored as "not a follow-up": answered 200, stored nowhere (found by the Sentinel failover test
on a busy machine, where one collecting run waited forever for a reply it was never given).

Here the race happens every time: a TCP proxy holds the answer to the reply's first read of the
thread (applied by Redis, not yet seen by the web process) while the mention is handled in full.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from bot.ops.compose_web import web_runtime
from bot.settings import Settings
from bot.slack.handlers.events import EventHandler, Outcome, OutcomeKind
from tests.support.slack_workspace import BOT_USER, CHANNEL, SECRET, TOKEN
from tests.support.tcp_proxy import TcpProxy, tcp_proxy


def new_ts() -> str:
    return f"{int(time.time())}.{secrets.randbelow(10**6):06d}"


def mention_body(event_id: str, ts: str) -> dict[str, Any]:
    event = {
        "type": "app_mention",
        "user": "U_ALICE",
        "text": f"<@{BOT_USER}> collect the api's logs",
        "ts": ts,
        "event_ts": ts,
        "channel": CHANNEL,
    }
    return {"type": "event_callback", "event_id": event_id, "event": event}


def reply_body(event_id: str, ts: str, thread_ts: str, text: str) -> dict[str, Any]:
    event = {
        "type": "message",
        "user": "U_BOB",
        "text": text,
        "ts": ts,
        "event_ts": ts,
        "thread_ts": thread_ts,
        "channel": CHANNEL,
    }
    return {"type": "event_callback", "event_id": event_id, "event": event}


def settings_for(url: str, key_prefix: str, queue_name: str) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        slack_bot_token=TOKEN,
        slack_signing_secret=SECRET,
        redis_url=url,
        chatops_redis_prefix=key_prefix,
        chatops_queue=queue_name,
    )


@pytest.fixture
def proxy(redis_url: str) -> Iterator[TcpProxy]:
    kwargs = redis.Redis.from_url(redis_url).connection_pool.connection_kwargs
    with tcp_proxy(kwargs["host"], kwargs["port"]) as held:
        yield held


def test_a_reply_read_while_its_mention_starts_the_run_reaches_that_run(
    redis_url: str, key_prefix: str, queue_name: str, proxy: TcpProxy
) -> None:
    db = redis.Redis.from_url(redis_url).connection_pool.connection_kwargs.get("db", 0)
    replies = EventHandler(
        web_runtime(settings_for(f"redis://127.0.0.1:{proxy.port}/{db}", key_prefix, queue_name))
    )
    runtime = web_runtime(settings_for(redis_url, key_prefix, queue_name))
    mentions = EventHandler(runtime)
    root, reply_ts = new_ts(), new_ts()
    thread_key = runtime.keys.thread(CHANNEL, root).encode()

    outcomes: list[Outcome] = []
    proxy.hold_answer_to(thread_key)  # the reply's first look at the thread
    replying = threading.Thread(
        target=lambda: outcomes.append(
            replies.reply(reply_body("EvReply", reply_ts, root, "reply 0.0"), BOT_USER)
        )
    )
    replying.start()
    try:
        assert proxy.held.wait(30), "the reply never read the thread"
        started = mentions.mention(mention_body("EvMention", root), BOT_USER)  # in full, meanwhile
        assert started.kind is OutcomeKind.STARTED
    finally:
        proxy.release()
        replying.join(30)
    assert not replying.is_alive()

    [outcome] = outcomes
    assert outcome.kind in (OutcomeKind.INJECTED, OutcomeKind.PARKED), outcome  # acknowledged: stored
    assert [item.text for item in runtime.service().inbox.peek(started.run_id)] == ["reply 0.0"]
