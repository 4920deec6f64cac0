"""The run lease: one holder at a time, growing fencing tokens, renewal, and fencing of memory writes."""

from __future__ import annotations

import time

import pytest
import redis

from agent.errors import LeaseLostError, MemoryStoreError
from agent.redis_memory import RedisMemory
from agent.types import Message, RunState
from bot.keys import Keys
from bot.runs.lease import Lease


def test_one_holder_at_a_time_and_tokens_grow(redis_client: redis.Redis, keys: Keys) -> None:
    first = Lease.acquire(redis_client, keys, "r1", 30, "worker-a")
    assert first is not None
    assert Lease.acquire(redis_client, keys, "r1", 30, "worker-b") is None
    assert first.release()
    second = Lease.acquire(redis_client, keys, "r1", 30, "worker-b")
    assert second is not None and second.token > first.token
    assert redis_client.hget(keys.run("r1"), "leased_by") == b"worker-b"
    assert not first.release()  # releasing someone else's lease does nothing
    assert Lease.holder_token(redis_client, keys, "r1") == second.token


def test_a_crashed_holders_lease_expires(redis_client: redis.Redis, keys: Keys) -> None:
    crashed = Lease.acquire(redis_client, keys, "r1", 0.2, "worker-a")
    assert crashed is not None
    time.sleep(0.3)
    taker = Lease.acquire(redis_client, keys, "r1", 30, "worker-b")
    assert taker is not None
    assert not crashed.renew() and crashed.lost


def test_keep_alive_renews_past_the_ttl_and_releases_at_the_end(
    redis_client: redis.Redis, keys: Keys
) -> None:
    # A TTL a busy machine cannot outlast between two renewals (every third of it), and a block
    # that outlasts three of them.
    lease = Lease.acquire(redis_client, keys, "r1", 1.0, "worker-a")
    assert lease is not None
    with lease.keep_alive():
        time.sleep(3.5)  # more than three TTLs
        assert Lease.acquire(redis_client, keys, "r1", 30, "worker-b") is None
        RedisMemory(redis_client, keys, "r1", fence=lease.token).save_state(RunState())
    assert Lease.holder_token(redis_client, keys, "r1") is None


def test_two_workers_on_one_run_cannot_both_write(redis_client: redis.Redis, keys: Keys) -> None:
    """Worker A stalls past its TTL, worker B takes the run; A wakes up and tries to write."""
    a = Lease.acquire(redis_client, keys, "r1", 0.2, "worker-a")
    assert a is not None
    memory_a = RedisMemory(redis_client, keys, "r1", fence=a.token)
    memory_a.append([Message.user("step 1 by A")], RunState(iteration=1))
    time.sleep(0.3)
    b = Lease.acquire(redis_client, keys, "r1", 30, "worker-b")
    assert b is not None
    memory_b = RedisMemory(redis_client, keys, "r1", fence=b.token)
    memory_b.append([Message.user("step 2 by B")], RunState(iteration=2))
    with pytest.raises(LeaseLostError):
        memory_a.append([Message.user("step 2 by A")], RunState(iteration=2))
    assert [m.content for m in memory_b.load_messages()] == ["step 1 by A", "step 2 by B"]


def test_a_token_handed_out_twice_cannot_make_a_drained_reply_vanish(
    redis_client: redis.Redis, keys: Keys
) -> None:
    """What a failover can do: the promoted replica lacked job A's lease and its fence INCR (both
    unreplicated when the master died), so job B got A's token. A started the run (read the
    history, about to put the system prompt first); B drained a thread reply. A's rewrite is
    refused (``RedisMemory``: the history is not the one A read), the reply stays."""
    a = Lease.acquire(redis_client, keys, "r1", 30, "worker-a")
    assert a is not None
    redis_client.rpush(keys.messages("r1"), Message.user("collect: 4").model_dump_json())
    redis_client.delete(keys.lease("r1"))  # the failover: neither the lease ...
    redis_client.decr(keys.fence("r1"))  # ... nor its INCR reached the replica
    b = Lease.acquire(redis_client, keys, "r1", 30, "worker-b")
    assert b is not None and b.token == a.token  # both pass the fence
    memory_a = RedisMemory(redis_client, keys, "r1", fence=a.token)
    memory_b = RedisMemory(redis_client, keys, "r1", fence=b.token)
    read_by_a = memory_a.load_messages()
    redis_client.rpush(keys.inbox("r1"), '{"id": "i1", "text": "reply 0.0"}')
    memory_b.append([Message.user("reply 0.0", inbox_id="i1")], RunState(iteration=1))
    with pytest.raises(MemoryStoreError):
        memory_a.replace_messages([Message.system("prompt"), *read_by_a], RunState())
    assert [m.content for m in memory_b.load_messages()] == ["collect: 4", "reply 0.0"]
    assert redis_client.llen(keys.inbox("r1")) == 0
