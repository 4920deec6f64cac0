"""An executing mark across a real ``redis-server`` SIGKILL, with the persistence the docs require and without.

Each test has a ``redis-server`` of its own; ``kill()`` is a crash (no save, no shutdown
flush), and ``start()`` on the same directory loads what the crash left on disk.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bot.errors import NotDurableError
from bot.keys import Keys
from bot.ops.doctor import Outcome, check_persistence
from bot.runs.durability import Durability, DurabilityMode
from bot.settings import Settings
from tests.reliability.redis_proc import RDB_DEFAULT, RedisProcess

pytestmark = pytest.mark.reliability

MARKS = 50


def durability(server: RedisProcess, mode: DurabilityMode) -> Durability:
    return Durability(server.client(), Keys("test:durability:").durability_probe(), mode=mode)


def test_marks_waited_for_survive_a_sigkill_with_aof_always(durable_redis: RedisProcess) -> None:
    client, checker = durable_redis.client(), durability(durable_redis, DurabilityMode.STRICT)
    for n in range(MARKS):
        client.hset(f"approval:{n}", mapping={"status": "executing"})
        checker.wait()  # returns: the mark is on disk
    durable_redis.kill()
    durable_redis.start()  # from the AOF the crash left
    client = durable_redis.client()
    assert [client.hget(f"approval:{n}", "status") for n in range(MARKS)] == [b"executing"] * MARKS


def test_rdb_only_loses_the_mark_in_a_sigkill_which_is_why_doctor_warns(
    own_redis: Callable[..., RedisProcess],
) -> None:
    server = own_redis(config=RDB_DEFAULT)
    client = server.client()
    client.hset("approval:1", mapping={"status": "executing"})
    with pytest.raises(NotDurableError, match="up to 3600 s of writes"):
        durability(server, DurabilityMode.STRICT).wait()
    durability(server, DurabilityMode.WARN).wait()  # warn mode accepts the risk ...
    server.kill()
    server.start()
    assert server.client().hget("approval:1", "status") is None  # ... and this is the risk: the mark is gone

    check = check_persistence(Settings(_env_file=None, redis_url=server.url), str)  # type: ignore[call-arg]
    assert check.outcome is Outcome.WARN
    assert (
        check.summary
        == "RDB snapshots only (save 3600 1 300 100 60 10000): a crash loses up to 3600 s of writes"
    )
