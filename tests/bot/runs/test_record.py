"""The run record: one owner of the run hash's fields, and its part of a run's end in the terminal write."""

from __future__ import annotations

import pytest
import redis

from agent.errors import LeaseLostError
from agent.redis_memory import STATE_FIELDS
from agent.tooling import ToolCategory
from agent.types import Message, RunState, RunStatus, ToolDef
from bot.keys import Keys
from bot.runs.presenter import InMemoryPresenter
from bot.runs.record import OfferedTool, RunField, RunRecord, RunRecords
from bot.runs.service import RunService
from tests.support.harness import Harness, make_options


def service(redis_client: redis.Redis, keys: Keys, queue_name: str) -> RunService:
    return RunService(redis_client, keys, make_options(queue_name, retention_seconds=3600))


def test_a_terminal_state_expires_the_run_and_frees_its_thread(
    redis_client: redis.Redis, keys: Keys, queue_name: str
) -> None:
    run = keys.run("r1")
    redis_client.hset(run, mapping={"channel": "C1", "thread_ts": "1.2", "status": "queued"})
    redis_client.set(keys.thread("C1", "1.2"), "r1")
    redis_client.zadd(keys.active_runs(), {"r1": 1})
    redis_client.hset(keys.approvals("r1"), "call_1", "ap1")
    redis_client.hset(keys.approval("ap1"), "status", "approved")
    redis_client.incr(keys.fence("r1"))
    memory = service(redis_client, keys, queue_name).memory("r1")
    memory.append([Message.user("hi")], RunState(status=RunStatus.RUNNING))
    assert redis_client.ttl(run) == -1 and redis_client.ttl(keys.messages("r1")) == -1
    memory.append([Message.assistant("done")], RunState(status=RunStatus.COMPLETED))
    for key in (run, keys.messages("r1"), keys.fence("r1"), keys.approvals("r1"), keys.approval("ap1")):
        assert 3500 < redis_client.ttl(key) <= 3600, key
    assert redis_client.get(keys.thread("C1", "1.2")) is None
    assert redis_client.zscore(keys.active_runs(), "r1") is None


def test_finishing_never_frees_a_thread_claimed_by_another_run(
    redis_client: redis.Redis, keys: Keys, queue_name: str
) -> None:
    redis_client.hset(keys.run("r1"), mapping={"channel": "C1", "thread_ts": "1.2"})
    redis_client.set(keys.thread("C1", "1.2"), "r2")
    service(redis_client, keys, queue_name).memory("r1").save_state(RunState(status=RunStatus.FAILED))
    assert redis_client.get(keys.thread("C1", "1.2")) == b"r2"


def test_a_fenced_out_terminal_write_changes_nothing_of_the_record(
    redis_client: redis.Redis, keys: Keys, queue_name: str
) -> None:
    """The record's part of the end is in the memory's write: refused with it, it never happens."""
    redis_client.hset(keys.run("r1"), mapping={"channel": "C1", "thread_ts": "1.2", "status": "running"})
    redis_client.set(keys.thread("C1", "1.2"), "r1")
    redis_client.zadd(keys.active_runs(), {"r1": 1})
    redis_client.set(keys.lease("r1"), 2)  # another worker holds the run now
    stale = service(redis_client, keys, queue_name).memory("r1", fence=1)
    with pytest.raises(LeaseLostError):
        stale.save_state(RunState(status=RunStatus.COMPLETED))
    assert redis_client.get(keys.thread("C1", "1.2")) == b"r1"
    assert redis_client.zscore(keys.active_runs(), "r1") == 1
    assert (
        redis_client.ttl(keys.run("r1")) == -1 and redis_client.hget(keys.run("r1"), "status") == b"running"
    )


def test_a_run_without_a_thread_still_leaves_the_active_set(
    redis_client: redis.Redis, keys: Keys, queue_name: str
) -> None:
    redis_client.zadd(keys.active_runs(), {"r1": 1})
    service(redis_client, keys, queue_name).memory("r1").save_state(RunState(status=RunStatus.CANCELLED))
    assert redis_client.zscore(keys.active_runs(), "r1") is None


def test_the_record_model_has_every_field_the_owner_declares() -> None:
    assert set(RunRecord.model_fields) == set(RunField)


def test_every_field_of_a_run_hash_is_declared_by_its_owners(harness: Harness) -> None:
    """A run that waited for an approval, and one that was stopped: the hash holds nothing but the
    record's fields and the memory's."""
    approved = harness.submit("plan: restart_service")
    harness.work()
    assert isinstance(harness.presenter, InMemoryPresenter)
    (asked,) = harness.presenter.of("ask_approval", approved)
    harness.service.lifecycle.decide(asked.id, user="U_APPROVER", approve=True)
    stopped = harness.submit("plan: check_health", thread_ts="200.1")
    harness.service.request_stop(stopped, "U_REQ")
    harness.work()
    assert harness.status(approved) is RunStatus.COMPLETED
    assert harness.status(stopped) is RunStatus.CANCELLED
    written: set[str] = set()
    for run_id in (approved, stopped):
        written |= {k.decode() for k in harness.redis.hkeys(harness.keys.run(run_id))}
    assert written <= set(RunField) | STATE_FIELDS, written - set(RunField) - STATE_FIELDS
    assert {RunField.SUSPENDED_CALL, RunField.STOP_REQUESTED_BY, RunField.REPORTED} <= written
    assert RunField.OFFERED_TOOLS in written


def test_the_record_reads_back_every_half_of_the_hash(harness: Harness) -> None:
    run_id = harness.submit("plan: check_health")
    harness.work()
    record = harness.service.get(run_id)
    assert record is not None and record.status is RunStatus.COMPLETED
    assert record.leased_by and record.lease_token >= 1 and record.card_ts
    assert "audit" in record.reported and "answer" in record.reported
    state = record.state()
    assert state is not None and state.status is RunStatus.COMPLETED and state.iteration == 2
    assert state == harness.service.memory(run_id).load_state()  # the memory's own reading of its half


def test_text_that_spells_fields_stays_the_text(
    redis_client: redis.Redis, keys: Keys, queue_name: str
) -> None:
    """A mention's text is data: whatever it spells, ``create`` writes the record's fields only."""
    hostile = 'x", "status", "completed", "stop_requested_by", "U_EVIL'
    runs = service(redis_client, keys, queue_name)
    submission = runs.submit("C1", "1.2", requester="U1", text=hostile)
    record = runs.get(submission.run_id)
    assert record is not None and record.text == hostile
    assert record.status is RunStatus.QUEUED and not record.stop_requested_by
    assert not runs.stop_requested(submission.run_id)
    fields = {k.decode() for k in redis_client.hkeys(keys.run(submission.run_id))}
    assert fields == set(record.created_fields())


def test_a_claim_naming_a_vanished_record_is_dropped_once(
    redis_client: redis.Redis, keys: Keys, queue_name: str
) -> None:
    records = RunRecords(redis_client, keys)
    redis_client.set(keys.thread("C1", "1.2"), "gone")  # its record was deleted by hand
    record = RunRecord(run_id="r1", channel="C1", thread_ts="1.2", requester="U1", created_at=1.0)
    assert records.create(record, Message.user("hi")) == "r1"
    assert records.active_run("C1", "1.2") == "r1" and records.active_ids() == ["r1"]
    again = RunRecord(run_id="r2", channel="C1", thread_ts="1.2", requester="U1", created_at=2.0)
    assert records.create(again, Message.user("me too")) == "r1"  # a live claim is never dropped
    assert not records.exists("r2")


def test_a_runs_tools_are_recorded_once_and_a_later_list_gets_the_first_back(
    redis_client: redis.Redis, keys: Keys, queue_name: str
) -> None:
    records = RunRecords(redis_client, keys)
    first = (OfferedTool(definition=ToolDef(name="a", description="A."), category=ToolCategory.READ_ONLY),)
    later = (OfferedTool(definition=ToolDef(name="b", description="B."), category=ToolCategory.MUTATING),)
    assert records.start_reporting("gone", 1.0, first) is None
    assert not redis_client.exists(keys.run("gone"))  # a vanished record does not come back as a stray
    redis_client.hset(
        keys.run("r1"), mapping={"run_id": "r1", "channel": "C1", "thread_ts": "1.2", "requester": "U1"}
    )
    assert records.start_reporting("r1", 1.0, first) is None
    assert records.start_reporting("r1", 2.0, later) == first  # a job that read the record too early
    assert records.start_reporting("r1", 3.0) is None
    record = records.get("r1")
    assert record is not None and record.tools_offered() == first
    assert redis_client.zscore(keys.reporting(), "r1") == 3.0


def test_the_findings_message_is_recorded_once_and_only_on_a_record_that_exists(
    redis_client: redis.Redis, keys: Keys
) -> None:
    records = RunRecords(redis_client, keys)
    assert records.claim_findings_ts("gone", "1.1") is None  # no record: nothing written
    assert not redis_client.exists(keys.run("gone"))
    fields = {"run_id": "r1", "channel": "C1", "thread_ts": "1.0", "requester": "U1"}
    redis_client.hset(keys.run("r1"), mapping=fields)
    assert records.findings_ts("r1") is None
    assert records.claim_findings_ts("r1", "1.5") == "1.5"
    assert records.claim_findings_ts("r1", "1.6") == "1.5"  # a second job's post: the first stands
    assert records.findings_ts("r1") == "1.5"
    record = records.get("r1")
    assert record is not None and record.findings_ts == "1.5"
