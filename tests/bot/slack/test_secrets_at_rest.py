"""A person pastes a secret into a mention or a thread reply (the bot's own LLM key, say): Redis,
the audit stream and the model only ever hold the redacted text."""

from __future__ import annotations

from collections.abc import Callable

import redis

from agent.scripted import ScriptedModel
from agent.types import RunStatus
from tests.support.slack_bot import SlackBot

SECRET = "sk-proj-4f9c2a7e1b3d5f8a0c6e"


def everything_stored(client: redis.Redis, prefix: str) -> str:
    """Every value under the bot's prefix, as text: strings, hashes, lists and streams."""
    parts: list[str] = []
    for key in client.scan_iter(match=f"{prefix}*"):
        kind = client.type(key)
        if kind == b"string":
            parts.append(repr(client.get(key)))
        elif kind == b"hash":
            parts.append(repr(client.hgetall(key)))
        elif kind == b"list":
            parts.append(repr(client.lrange(key, 0, -1)))
        elif kind == b"stream":
            parts.append(repr(client.xrange(key)))
    return "\n".join(parts)


def test_a_secret_pasted_into_a_mention_is_never_stored_nor_sent_to_the_model(
    make_bot: Callable[..., SlackBot],
) -> None:
    model = ScriptedModel(["noted"])
    bot = make_bot(models=[model], tools=[], llm_api_key=SECRET)
    ts = bot.mention(f"is this key still valid? {SECRET}")
    bot.work()
    assert bot.status(bot.run_id(ts)) is RunStatus.COMPLETED
    sent = model.requests[0].model_dump_json()
    assert SECRET not in sent and "[REDACTED]" in sent
    assert SECRET not in everything_stored(bot.redis, bot.settings.chatops_redis_prefix)


def test_a_secret_in_a_thread_reply_is_stored_redacted(make_bot: Callable[..., SlackBot]) -> None:
    bot = make_bot(models=[ScriptedModel(["ok"])], tools=[], llm_api_key=SECRET)
    submitted = bot.service.submit("C_INC", "1.0", requester="U_ALICE", text="check web-03")
    delivery = bot.service.deliver("C_INC", "1.0", user="U_ALICE", text=f"token is {SECRET}", ts="2.0")
    assert submitted.created and delivery.stored
    stored = everything_stored(bot.redis, bot.settings.chatops_redis_prefix)
    assert SECRET not in stored and "token is [REDACTED]" in stored
