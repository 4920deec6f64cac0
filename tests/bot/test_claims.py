"""``bot.claims``: once-only claims and token locks, on a real Redis (bytes and text clients alike)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from bot.claims import claim_once, release_lock, take_lock


@pytest.fixture(params=["bytes", "text"])
def client(request: pytest.FixtureRequest, redis_url: str, key_prefix: str) -> Iterator[redis.Redis]:
    """Both kinds of client the processes build: replies as bytes, or decoded to text."""
    made = redis.Redis.from_url(redis_url, decode_responses=request.param == "text")
    yield made
    for key in made.scan_iter(match=f"{key_prefix}*"):
        made.delete(key)
    made.close()


def test_the_first_claim_wins_and_keeps_its_value_for_its_time(client: redis.Redis, key_prefix: str) -> None:
    key = f"{key_prefix}vote"
    assert claim_once(client, key, 60, "up") is True
    assert claim_once(client, key, 60, "down") is False  # a second vote is not counted
    assert client.get(key) in (b"up", "up")
    assert 59_000 < client.pttl(key) <= 60_000


def test_a_lock_is_held_by_one_token_and_freed_by_its_holder_only(
    client: redis.Redis, key_prefix: str
) -> None:
    key = f"{key_prefix}lock"
    token = take_lock(client, key, 60)
    assert token is not None and take_lock(client, key, 60) is None
    assert release_lock(client, key, "guessed") is False and client.exists(key)
    assert release_lock(client, key, token) is True and not client.exists(key)
    assert take_lock(client, key, 60) is not None  # free again for the next holder


def test_a_holder_whose_lock_expired_never_frees_the_next_holders(
    client: redis.Redis, key_prefix: str
) -> None:
    key = f"{key_prefix}lock"
    stale = take_lock(client, key, 60)
    assert stale is not None
    client.delete(key)  # as its TTL would: the holder took too long
    current = take_lock(client, key, 60)
    assert current is not None and current != stale
    assert release_lock(client, key, stale) is False
    assert client.get(key) in (current, current.encode())
