"""The change journal: sealed per target, deduplicated, bounded, and deaf to a hostile Redis writer."""

from __future__ import annotations

import json

import pytest
import redis

from bot.changes.journal import DAY, PER_TARGET, ChangeJournal, sealed_member
from bot.fleet.target_keys import target_key
from bot.keys import Keys
from tools.changes.record import MAX_WHAT, Change

SECRET = b"journal-test-secret"
NOW = 1_800_000_000.0


def _key_of(target: str) -> bytes:
    return target_key(SECRET, target)


def _journal(redis_client: redis.Redis, keys: Keys, now: float = NOW, days: int = 30) -> ChangeJournal:
    return ChangeJournal(redis_client, keys, _key_of, days=days, clock=lambda: now)


def _change(at: float, what: str = "upgrade nginx", target: str = "web-03") -> Change:
    return Change(target=target, kind="package", at=at, what=what)


def test_changes_come_back_oldest_first_within_the_window(redis_client: redis.Redis, keys: Keys) -> None:
    journal = _journal(redis_client, keys)
    changes = [_change(NOW - 300, "b"), _change(NOW - 900, "a"), _change(NOW + 60, "later")]
    assert journal.append(changes) == 3
    assert [c.what for c in journal.between("web-03", NOW - 3600, NOW)] == ["a", "b"]
    assert journal.between("db-01", NOW - 3600, NOW) == []


def test_the_same_change_twice_is_stored_once(redis_client: redis.Redis, keys: Keys) -> None:
    journal = _journal(redis_client, keys)
    assert journal.append([_change(NOW - 10)]) == 1
    assert journal.append([_change(NOW - 10), _change(NOW - 10)]) == 0
    assert len(journal.between("web-03", 0, NOW)) == 1


def test_changes_are_bounded_before_they_are_stored(redis_client: redis.Redis, keys: Keys) -> None:
    journal = _journal(redis_client, keys)
    journal.append([_change(NOW, "x" * 10_000 + "\n<!channel>")])
    [stored] = journal.between("web-03", 0, NOW)
    assert len(stored.what) == MAX_WHAT and "\n" not in stored.what


def test_the_newest_limit_is_returned(redis_client: redis.Redis, keys: Keys) -> None:
    journal = _journal(redis_client, keys)
    journal.append([_change(NOW - i, f"c{i}") for i in range(10)])
    assert [c.what for c in journal.between("web-03", 0, NOW, limit=3)] == ["c2", "c1", "c0"]


def test_retention_drops_old_changes_and_the_key_expires(redis_client: redis.Redis, keys: Keys) -> None:
    _journal(redis_client, keys).append([_change(NOW - 40 * DAY, "old")])
    journal = _journal(redis_client, keys)
    journal.append([_change(NOW - DAY, "recent")])
    assert [c.what for c in journal.between("web-03", 0, NOW)] == ["recent"]
    assert 0 < redis_client.ttl(keys.changes("web-03")) <= 30 * DAY


def test_a_target_keeps_at_most_its_newest_changes(redis_client: redis.Redis, keys: Keys) -> None:
    journal = _journal(redis_client, keys)
    journal.append([_change(NOW - i, f"c{i}") for i in range(PER_TARGET + 5)])
    assert redis_client.zcard(keys.changes("web-03")) == PER_TARGET
    oldest = redis_client.zrange(keys.changes("web-03"), 0, 0, withscores=True)[0][1]
    assert oldest == NOW - (PER_TARGET - 1)


@pytest.mark.parametrize(
    "forged",
    [
        "not json",
        json.dumps({"c": _change(NOW).to_json(), "s": "0" * 64}),  # no key: a guessed seal
        json.dumps({"c": _change(NOW).to_json()}),
        json.dumps({"c": {"target": "web-03"}, "s": "x"}),
        json.dumps(["c", "s"]),
        # web-03's change sealed with db-01's key (db-01's runner writing for web-03)
        sealed_member(target_key(SECRET, "db-01"), _change(NOW)),
        # db-01's change, rightly sealed, copied into web-03's journal
        sealed_member(target_key(SECRET, "db-01"), _change(NOW, target="db-01")),
        # sealed under another deployment's secret
        sealed_member(target_key(b"another secret", "web-03"), _change(NOW)),
    ],
)
def test_a_member_chatops_did_not_seal_for_this_target_is_skipped(
    redis_client: redis.Redis, keys: Keys, forged: str
) -> None:
    journal = _journal(redis_client, keys)
    journal.append([_change(NOW - 5, "real")])
    redis_client.zadd(keys.changes("web-03"), {forged: NOW - 1})
    assert [c.what for c in journal.between("web-03", 0, NOW)] == ["real"]


def test_a_runner_key_cannot_write_another_targets_journal(redis_client: redis.Redis, keys: Keys) -> None:
    own = target_key(SECRET, "web-03")

    def runner_key(target: str) -> bytes:
        if target != "web-03":
            raise PermissionError(f"web-03's runner holds no key for {target}")
        return own

    runner = ChangeJournal(redis_client, keys, runner_key, clock=lambda: NOW)
    with pytest.raises(PermissionError):
        runner.append([_change(NOW, target="db-01")])
    assert redis_client.exists(keys.changes("db-01")) == 0
    runner.append([_change(NOW)])
    assert len(_journal(redis_client, keys).between("web-03", 0, NOW)) == 1


def test_changes_of_several_targets_land_in_one_transaction_with_the_callers_commands(
    redis_client: redis.Redis, keys: Keys
) -> None:
    journal = _journal(redis_client, keys)
    mark = f"{keys.prefix}test:mark"
    changes = [_change(NOW - 5, "a"), _change(NOW - 5, "a", target="db-01"), _change(NOW - 6, "b")]
    assert journal.append(changes, then=lambda pipe: pipe.set(mark, "done")) == 3
    assert redis_client.get(mark) == b"done"
    assert journal.append(changes[:2], then=lambda pipe: pipe.delete(mark)) == 0  # stored before
    assert redis_client.get(mark) is None
    assert [c.what for c in journal.between("db-01", 0, NOW)] == ["a"]
