"""RedisMemory against a real Redis: append-only history, one state hash, fencing, inbox hand-off, expiry.

What the bot adds to a run's end (its thread claim, its approvals) is ``tests/bot/runs/test_record.py``'s.
"""

from __future__ import annotations

import json

import pytest
import redis

from agent.config import RunConfig
from agent.errors import LeaseLostError, MemoryStoreError
from agent.findings import Conclusion, Confidence, Findings
from agent.keys import MemoryKeys
from agent.memory import InMemoryMemory, Memory
from agent.redis_memory import INBOX_ID_META, STATE_FIELDS, RedisMemory, TerminalStep
from agent.run import Run
from agent.scripted import ScriptedModel, tool_call
from agent.types import Message, RunState, RunStatus, Usage
from tests.support.tcp_proxy import tcp_proxy
from tests.support.tools import RecordingTool


@pytest.fixture
def keys(key_prefix: str) -> MemoryKeys:
    return MemoryKeys(key_prefix)


def lease(client: redis.Redis, keys: MemoryKeys, run_id: str, token: int, ttl_ms: int = 60_000) -> None:
    """Stand-in for ``bot.runs.lease``: make ``token`` the run's current fencing token."""
    client.set(keys.lease(run_id), token, px=ttl_ms)


def test_history_and_state_round_trip(redis_client: redis.Redis, keys: MemoryKeys) -> None:
    memory: Memory = RedisMemory(redis_client, keys, "r1")
    assert memory.load_state() is None and memory.load_messages() == []
    state = RunState(status=RunStatus.RUNNING, iteration=2, usage=Usage(prompt_tokens=7), loop_window=["a"])
    state.executing_call_id = "call_1"
    messages = [
        Message.system("sys"),
        Message.user("disk?", slack_user="U1"),
        Message.assistant(None, [tool_call("df", "call_1", path="/")]),
    ]
    memory.append(messages[:2], state)
    memory.append(messages[2:], state)
    assert memory.load_messages() == messages
    assert memory.load_state() == state
    assert redis_client.type(keys.run("r1")) == b"hash"  # the whole state is one hash
    assert redis_client.hget(keys.run("r1"), "status") == b"running"


def test_append_adds_items_and_never_rewrites_what_is_stored(
    redis_client: redis.Redis, keys: MemoryKeys
) -> None:
    memory = RedisMemory(redis_client, keys, "r1")
    memory.append([Message.user("one")], RunState())
    first = redis_client.lindex(keys.messages("r1"), 0)
    memory.append([Message.user("two"), Message.user("three")], RunState(iteration=1))
    assert redis_client.llen(keys.messages("r1")) == 3
    assert redis_client.lindex(keys.messages("r1"), 0) == first
    memory.replace_messages([Message.system("summary")], RunState(condense_count=1))
    assert [m.content for m in memory.load_messages()] == ["summary"]
    assert memory.load_state().condense_count == 1  # type: ignore[union-attr]


def test_a_writer_whose_token_is_not_current_cannot_write(
    redis_client: redis.Redis, keys: MemoryKeys
) -> None:
    lease(redis_client, keys, "r1", 1)
    old = RedisMemory(redis_client, keys, "r1", fence=1)
    old.append([Message.user("from the first worker")], RunState(iteration=1))
    lease(redis_client, keys, "r1", 2)  # the lease moved to another worker
    new = RedisMemory(redis_client, keys, "r1", fence=2)
    with pytest.raises(LeaseLostError):
        old.append([Message.user("stale")], RunState(iteration=9))
    with pytest.raises(LeaseLostError):
        old.save_state(RunState(iteration=9))
    with pytest.raises(LeaseLostError):
        old.replace_messages([], RunState(iteration=9))
    new.append([Message.user("from the second worker")], RunState(iteration=2))
    assert [m.content for m in new.load_messages()] == ["from the first worker", "from the second worker"]
    assert new.load_state().iteration == 2  # type: ignore[union-attr]


def test_an_expired_lease_refuses_writes_even_if_nobody_took_it(
    redis_client: redis.Redis, keys: MemoryKeys
) -> None:
    memory = RedisMemory(redis_client, keys, "r1", fence=1)
    with pytest.raises(LeaseLostError):
        memory.save_state(RunState())
    assert memory.load_state() is None


def test_writes_renew_the_lease(redis_client: redis.Redis, keys: MemoryKeys) -> None:
    lease(redis_client, keys, "r1", 3, ttl_ms=1000)
    memory = RedisMemory(redis_client, keys, "r1", fence=3, lease_ttl_seconds=60)
    memory.save_state(RunState())
    assert redis_client.pttl(keys.lease("r1")) > 50_000


def inbox_item(client: redis.Redis, keys: MemoryKeys, run_id: str, item_id: str, text: str) -> Message:
    client.rpush(keys.inbox(run_id), f'{{"id": "{item_id}", "text": "{text}"}}')
    return Message.user(text, **{INBOX_ID_META: item_id})


def test_injected_messages_leave_the_inbox_in_the_same_write(
    redis_client: redis.Redis, keys: MemoryKeys
) -> None:
    memory = RedisMemory(redis_client, keys, "r1")
    first = inbox_item(redis_client, keys, "r1", "a", "stop")
    second = inbox_item(redis_client, keys, "r1", "b", "check db")
    inbox_item(redis_client, keys, "r1", "c", "later")
    memory.append([first, second], RunState(iteration=1))
    assert [m.content for m in memory.load_messages()] == ["stop", "check db"]
    assert redis_client.llen(keys.inbox("r1")) == 1
    # Appending them again (a confused retry) is refused as a whole: no duplicate in history.
    with pytest.raises(MemoryStoreError):
        memory.append([first], RunState(iteration=2))
    assert len(memory.load_messages()) == 2
    assert memory.load_state().iteration == 1  # type: ignore[union-attr]


def test_a_fenced_out_writer_leaves_the_inbox_for_the_next_owner(
    redis_client: redis.Redis, keys: MemoryKeys
) -> None:
    lease(redis_client, keys, "r1", 2)
    note = inbox_item(redis_client, keys, "r1", "a", "stop")
    with pytest.raises(LeaseLostError):
        RedisMemory(redis_client, keys, "r1", fence=1).append([note], RunState(iteration=1))
    assert redis_client.llen(keys.inbox("r1")) == 1  # not lost ...
    RedisMemory(redis_client, keys, "r1", fence=2).append([note], RunState(iteration=1))
    assert redis_client.llen(keys.inbox("r1")) == 0  # ... and stored once by the owner
    assert [m.content for m in RedisMemory(redis_client, keys, "r1").load_messages()] == ["stop"]


class TagOnEnd:
    """A terminal extension: expires its keys and records how the run ended, in the terminal write."""

    lua = """
for i = 2, #ext_keys do redis.call('EXPIRE', ext_keys[i], p.retention) end
redis.call('SET', ext_keys[1], p.run_id .. ' ended ' .. p.ext.tag)
"""

    def __init__(self, tag_key: str, expiring: list[str]) -> None:
        self.tag_key, self.expiring, self.asked = tag_key, expiring, 0

    def step(self, run_id: str) -> TerminalStep:
        self.asked += 1
        return TerminalStep([self.tag_key, *self.expiring], {"tag": "here"})


def test_a_terminal_state_expires_the_run_and_runs_the_extension(
    redis_client: redis.Redis, keys: MemoryKeys
) -> None:
    run, theirs, tag = keys.run("r1"), f"{keys.prefix}theirs", f"{keys.prefix}tag"
    redis_client.hset(run, mapping={"channel": "C1", "status": "queued"})  # the owner's own fields
    redis_client.set(theirs, "x")
    extension = TagOnEnd(tag, [theirs])
    memory = RedisMemory(redis_client, keys, "r1", retention_seconds=3600, on_terminal=extension)
    memory.append([Message.user("hi")], RunState(status=RunStatus.RUNNING))
    assert redis_client.ttl(run) == -1 and redis_client.ttl(keys.messages("r1")) == -1
    assert extension.asked == 0 and not redis_client.exists(tag)  # not terminal: no extension
    memory.append([Message.assistant("done")], RunState(status=RunStatus.COMPLETED))
    for key in (run, keys.messages("r1"), theirs):
        assert 3500 < redis_client.ttl(key) <= 3600, key
    assert redis_client.get(tag) == b"r1 ended here" and extension.asked == 1
    # The memory wrote its own fields only; the owner's stay as they were.
    stored = {k.decode() for k in redis_client.hkeys(run)}
    assert stored - STATE_FIELDS == {"channel"}
    assert redis_client.hget(run, "channel") == b"C1"


def test_a_refused_terminal_write_runs_no_extension(redis_client: redis.Redis, keys: MemoryKeys) -> None:
    lease(redis_client, keys, "r1", 2)
    tag = f"{keys.prefix}tag"
    memory = RedisMemory(redis_client, keys, "r1", fence=1, on_terminal=TagOnEnd(tag, []))
    with pytest.raises(LeaseLostError):
        memory.save_state(RunState(status=RunStatus.FAILED))
    assert not redis_client.exists(tag) and memory.load_state() is None


def test_the_loop_runs_and_resumes_on_redis_memory(redis_client: redis.Redis, keys: MemoryKeys) -> None:
    disk = RecordingTool("disk_usage", respond=lambda args: "/ 97% used")
    model = ScriptedModel([tool_call("disk_usage", path="/"), "Disk is 97% full."])
    # What ``bot.runs.service`` stores for a new run: the record and the first message, no state yet.
    redis_client.hset(keys.run("r1"), mapping={"status": "queued", "requester": "U1"})
    redis_client.rpush(keys.messages("r1"), Message.user("web-03 is out of disk").model_dump_json())
    memory = RedisMemory(redis_client, keys, "r1")
    assert memory.load_state() is None
    result = Run(RunConfig(models=[model], memory=memory, tools=[disk])).execute()
    assert result.status is RunStatus.COMPLETED and result.output == "Disk is 97% full."
    fresh = RedisMemory(redis_client, keys, "r1")
    assert [m.role for m in fresh.load_messages()] == ["system", "user", "assistant", "tool", "assistant"]
    assert fresh.load_state().status is RunStatus.COMPLETED  # type: ignore[union-attr]


# -- writes sent without waiting (tool results) -------------------------------------------------------


def test_a_write_sent_without_waiting_is_confirmed_before_the_next_call(
    redis_client: redis.Redis, keys: MemoryKeys
) -> None:
    memory = RedisMemory(redis_client, keys, "r1")
    memory.append([Message.user("one")], RunState(iteration=1), wait=False)
    memory.append([Message.user("two")], RunState(iteration=2), wait=False)
    assert [m.content for m in memory.load_messages()] == ["one", "two"]  # in order, both landed
    memory.save_state(RunState(iteration=3))
    assert RedisMemory(redis_client, keys, "r1").load_state().iteration == 3  # type: ignore[union-attr]


def test_a_refused_write_sent_without_waiting_is_raised_at_the_next_call(
    redis_client: redis.Redis, keys: MemoryKeys
) -> None:
    lease(redis_client, keys, "r1", 1)
    memory = RedisMemory(redis_client, keys, "r1", fence=1)
    memory.append([Message.user("mine")], RunState(iteration=1))
    lease(redis_client, keys, "r1", 2)  # the lease moved while the result was on its way
    memory.append([Message.tool("call_1", "/ 97% used")], RunState(iteration=1), wait=False)
    with pytest.raises(LeaseLostError):
        memory.flush()
    assert [m.content for m in RedisMemory(redis_client, keys, "r1").load_messages()] == ["mine"]
    memory.flush()  # the refusal was reported once; the memory can still be used
    with pytest.raises(LeaseLostError):  # ... and a later write is refused too
        memory.append([Message.user("stale")], RunState(iteration=2))


def test_flush_gives_the_connection_back_to_the_pool(redis_client: redis.Redis, keys: MemoryKeys) -> None:
    memory = RedisMemory(redis_client, keys, "r1")
    pool = redis_client.connection_pool
    memory.load_state()  # one connection made and back in the pool
    idle = len(pool._available_connections)  # type: ignore[attr-defined]
    memory.append([Message.user("one")], RunState(), wait=False)
    assert len(pool._available_connections) == idle - 1  # type: ignore[attr-defined]  # pinned
    memory.flush()
    assert len(pool._available_connections) == idle  # type: ignore[attr-defined]


def test_a_write_whose_answer_was_lost_is_sent_again_and_lands_once(redis_url: str, keys: MemoryKeys) -> None:
    upstream = redis.Redis.from_url(redis_url)
    host, port = (
        upstream.connection_pool.connection_kwargs["host"],
        upstream.connection_pool.connection_kwargs["port"],
    )
    with tcp_proxy(host, port) as proxy:
        client = redis.Redis(
            host="127.0.0.1", port=proxy.port, db=upstream.connection_pool.connection_kwargs.get("db", 0)
        )
        try:
            memory = RedisMemory(client, keys, "r1")
            memory.append([Message.user("one")], RunState(iteration=1))
            proxy.drop_next_answer()  # Redis applies the next write; its answer never comes back
            memory.append([Message.user("two")], RunState(iteration=2), wait=False)
            assert [m.content for m in memory.load_messages()] == ["one", "two"]  # sent again, stored once
            assert proxy.dropped.is_set()
            assert memory.load_state().iteration == 2  # type: ignore[union-attr]
        finally:
            client.close()
            for key in upstream.scan_iter(match=f"{keys.prefix}*"):
                upstream.delete(key)
            upstream.close()


def test_a_run_leaves_no_connection_checked_out(redis_client: redis.Redis, keys: MemoryKeys) -> None:
    disk = RecordingTool("disk_usage", respond=lambda args: "/ 97% used")
    model = ScriptedModel([tool_call("disk_usage", path="/"), tool_call("disk_usage", path="/var"), "Full."])
    redis_client.rpush(keys.messages("r1"), Message.user("web-03 is out of disk").model_dump_json())
    memory = RedisMemory(redis_client, keys, "r1")
    result = Run(RunConfig(models=[model], memory=memory, tools=[disk])).execute()
    assert result.status is RunStatus.COMPLETED
    assert not redis_client.connection_pool._in_use_connections  # type: ignore[attr-defined]
    roles = [m.role for m in RedisMemory(redis_client, keys, "r1").load_messages()]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]


def test_a_rewrite_never_drops_what_another_writer_appended_meanwhile(
    redis_client: redis.Redis, keys: MemoryKeys
) -> None:
    """Two writers passing one fence (a failover handed the token out twice): A starts the run
    (``Run._load``: no state yet, so it reads the history to put the system prompt first), B
    drains a thread reply into the history, then A's rewrite lands. It must be refused: the
    reply has left the inbox, and deleting the list would lose it for good."""
    lease(redis_client, keys, "r1", 7)
    redis_client.rpush(keys.messages("r1"), Message.user("collect: 4").model_dump_json())
    reply = inbox_item(redis_client, keys, "r1", "a", "reply 0.0")
    a = RedisMemory(redis_client, keys, "r1", fence=7)
    b = RedisMemory(redis_client, keys, "r1", fence=7)
    assert a.load_state() is None
    read_by_a = a.load_messages()
    b.append([reply], RunState(iteration=1))
    assert redis_client.llen(keys.inbox("r1")) == 0
    a.load_messages()  # a later read by A does not make B's append part of what A rewrites
    with pytest.raises(MemoryStoreError, match="HISTORY_CHANGED"):
        a.replace_messages([Message.system("prompt"), *read_by_a], RunState())
    assert [m.content for m in a.load_messages()] == ["collect: 4", "reply 0.0"]


def test_a_writer_may_rewrite_the_history_it_read_and_appended_to(
    redis_client: redis.Redis, keys: MemoryKeys
) -> None:
    """Its own writes (waited for or not) and its own rewrites keep the expected length right."""
    lease(redis_client, keys, "r1", 1)
    redis_client.rpush(keys.messages("r1"), Message.user("go").model_dump_json())
    memory = RedisMemory(redis_client, keys, "r1", fence=1)
    loaded = memory.load_messages()
    memory.replace_messages([Message.system("prompt"), *loaded], RunState())
    memory.append([Message.assistant("one")], RunState(iteration=1), wait=False)
    memory.append([Message.assistant("two")], RunState(iteration=2))
    memory.replace_messages([Message.system("prompt"), Message.user("summary")], RunState(iteration=2))
    memory.append([Message.assistant("three")], RunState(iteration=3))
    memory.replace_messages([Message.system("prompt"), Message.user("shorter")], RunState(iteration=3))
    assert [m.content for m in memory.load_messages()] == ["prompt", "shorter"]


def test_findings_are_sent_with_the_write_that_replaced_them_and_not_again(
    redis_client: redis.Redis, keys: MemoryKeys
) -> None:
    """Their dump grows with what they cite: a write that did not replace them does not pay for it."""
    memory = RedisMemory(redis_client, keys, "r1")
    findings = some_findings(Conclusion.INVESTIGATING, Confidence.LOW)
    state = RunState(status=RunStatus.RUNNING, findings=findings)
    memory.save_state(state)
    redis_client.hset(keys.run("r1"), "findings", "sent once")  # what a resend would overwrite
    state.iteration = 1
    memory.save_state(state)  # the same (frozen) findings: not sent again
    assert redis_client.hget(keys.run("r1"), "findings") == b"sent once"
    assert redis_client.hget(keys.run("r1"), "iteration") == b"1"
    state.findings = findings.model_copy(update={"version": 2})
    memory.save_state(state)
    loaded = memory.load_state()
    assert loaded is not None and loaded.findings == state.findings
    assert redis_client.hget(keys.run("r1"), "findings") == findings_json(state.findings)
    state.findings = None  # gone again: stored as null, read back as none
    memory.save_state(state)
    loaded = memory.load_state()
    assert loaded is not None and loaded.findings is None


def some_findings(conclusion: Conclusion, confidence: Confidence) -> Findings:
    return Findings(
        conclusion=conclusion,
        claimed_conclusion=conclusion,
        confidence=confidence,
        claimed_confidence=confidence,
    )


def findings_json(findings: Findings | None) -> bytes:
    """The field as ``model_dump(mode="json")`` and a compact encoder would have written it."""
    assert findings is not None
    return json.dumps(findings.model_dump(mode="json"), separators=(",", ":")).encode()


@pytest.mark.parametrize("make", [InMemoryMemory, None], ids=["in-memory", "redis"])
def test_findings_kept_by_identity_read_back_equal_and_apart_from_the_rest_of_the_state(
    make: type[InMemoryMemory] | None, redis_client: redis.Redis, keys: MemoryKeys
) -> None:
    memory: Memory = make() if make is not None else RedisMemory(redis_client, keys, "r2")
    findings = some_findings(Conclusion.NO_FAULT_FOUND, Confidence.MEDIUM)
    state = RunState(status=RunStatus.RUNNING, findings=findings)
    memory.append([Message.user("go")], state)
    state.iteration = 3  # a later change of the caller's state is not in what was stored
    loaded = memory.load_state()
    assert loaded is not None and loaded.findings == findings and loaded.iteration == 0
    state.findings = findings.model_copy(update={"version": 2})
    memory.save_state(state)
    again = memory.load_state()
    assert again is not None and again.findings == state.findings and again.iteration == 3
