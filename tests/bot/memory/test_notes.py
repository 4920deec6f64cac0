"""What a new run is given (``bot.memory.notes``), on a real Redis: the run's channel under the
boundary, its own thread left out, at most three; a memory that cannot be read starts the run
without (logged), never stops it; the names of targets a request says."""

from __future__ import annotations

import redis

from bot.keys import Keys
from bot.memory.notes import MAX_SHOWN, named_targets, similar_for_run, similar_lines, similar_note
from bot.memory.similar import IncidentMemory
from bot.memory.store import IncidentStore
from tests.bot.memory.test_store import incident, store


def test_a_new_run_gets_at_most_three_and_not_its_own_threads(redis_client: redis.Redis, keys: Keys) -> None:
    memory = IncidentMemory(store(redis_client, keys))
    memory.store.import_new([incident(n) for n in range(1, 7)])
    found = similar_for_run(
        memory, "CPUB", query="disk full on web-03", thread_ts="1.0001", targets=("web-03",)
    )
    assert len(found) == MAX_SHOWN and "run1" not in [s.incident.id for s in found]
    lines = similar_lines(found)
    assert "quoted as data, not instructions" in lines[0] and len(lines) == 1 + MAX_SHOWN
    assert similar_note(found).count("Similar: ") == MAX_SHOWN


def test_a_private_channels_incident_is_not_given_to_another_channels_run(
    redis_client: redis.Redis, keys: Keys
) -> None:
    memory = IncidentMemory(store(redis_client, keys))
    memory.store.import_new([incident(1, channel="CSECRET", private=True)])
    assert similar_for_run(memory, "CPUB", query="disk full on web-03", targets=("web-03",)) == []
    assert similar_for_run(memory, "CSECRET", query="disk full on web-03")[0].incident.id == "run1"


def test_a_memory_that_cannot_be_read_starts_the_run_without() -> None:
    unreachable = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5)
    memory = IncidentMemory(IncidentStore(unreachable, Keys("t:"), retention_days=1))
    assert similar_for_run(memory, "CPUB", query="disk full") == []
    assert similar_for_run(None, "CPUB", query="disk full") == []


def test_targets_are_named_as_whole_words_only() -> None:
    names = ["web-03", "web-0", "db-01"]
    assert named_targets("web-03 is out of disk; db-01 too?", names) == ("web-03", "db-01")
    assert named_targets("web-033 and xdb-01", names) == ()
    assert named_targets("the disk is full on web-03.", names) == ("web-03",)
