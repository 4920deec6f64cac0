"""``chatops doctor``'s sentinel check against real sentinels: the view, and WAIT 1 possible or not."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.ops.doctor import Outcome, run_checks
from bot.ops.doctor_sentinel import check_sentinel
from bot.settings import Settings
from tests.support.sentinel_group import MASTER_NAME, SentinelGroup, free_port, sentinel_group


@pytest.fixture
def group(tmp_path: Path) -> Iterator[SentinelGroup]:
    yield from sentinel_group(tmp_path / "sentinel")


def settings_of(addresses: list[str], key_prefix: str, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "redis_url": "redis://127.0.0.1:9/0",
        "redis_sentinels": addresses,
        "redis_sentinel_master": MASTER_NAME,
        "chatops_redis_prefix": key_prefix,
        **overrides,
    }
    return Settings(_env_file=None, **values)  # type: ignore[call-arg, arg-type]


def test_a_healthy_group_passes_and_names_master_replica_and_wait(
    group: SentinelGroup, key_prefix: str
) -> None:
    check = check_sentinel(settings_of(group.addresses, key_prefix))
    assert check.outcome is Outcome.WARN, check  # one replica: a failover leaves none
    assert f"master {MASTER_NAME!r} at 127.0.0.1:{group.master.port}; 1 replica(s) online" in check.summary
    assert "WAIT 1 confirmed by a replica in" in check.summary
    for sentinel in group.sentinels:
        assert (
            f"{sentinel.address}: master 127.0.0.1:{group.master.port}, replicas {group.replica.address}"
            in check.summary
        )
    assert "one replica" in check.summary


def test_no_replica_online_fails_since_wait_1_is_impossible(group: SentinelGroup, key_prefix: str) -> None:
    group.replica.kill()
    group.wait_replicas(group.master, 0)
    check = check_sentinel(settings_of(group.addresses, key_prefix))
    assert check.outcome is Outcome.FAIL, check
    assert "WAIT 1 is not possible: not confirmed by a replica" in check.summary


def test_a_silent_sentinel_is_named(group: SentinelGroup, key_prefix: str) -> None:
    silent = f"127.0.0.1:{free_port()}"
    check = check_sentinel(settings_of([*group.addresses, silent], key_prefix))
    assert f"{silent} gave no answer" in check.summary
    assert check.outcome is Outcome.WARN


def test_no_sentinel_answering_fails(key_prefix: str) -> None:
    check = check_sentinel(settings_of([f"127.0.0.1:{free_port()}"], key_prefix))
    assert check.outcome is Outcome.FAIL
    assert f"no sentinel names the master {MASTER_NAME!r}" in check.summary


def test_doctor_runs_the_check_only_with_sentinels(redis_url: str, key_prefix: str) -> None:
    out = io.StringIO()
    plain = Settings(_env_file=None, redis_url=redis_url, chatops_redis_prefix=key_prefix)  # type: ignore[call-arg]
    names = [check.name for check in run_checks(plain, None, out)]
    assert "sentinel" not in names and "redis" in names
