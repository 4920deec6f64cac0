"""Finished runs become incidents, and later runs find them through ``similar_incidents`` within the
channel boundary (real RQ jobs on real Redis, the plan-following scripted model)."""

from __future__ import annotations

from dataclasses import dataclass

import redis

from bot.keys import Keys
from bot.memory.similar import IncidentMemory
from bot.memory.store import IncidentStore
from bot.runs.runtime import Runtime
from tests.support.harness import Harness

SECRET = "xoxb-123456789012-abcdefghijklmnop"


@dataclass
class Facts:
    public: frozenset[str]

    def is_private(self, channel: str) -> bool:
        return channel not in self.public

    def permalink(self, channel: str, ts: str) -> str:
        return f"https://example.slack.com/archives/{channel}/p{ts.replace('.', '')}"


class MemoryHarness(Harness):
    public: frozenset[str] = frozenset({"CPUB"})

    def store(self) -> IncidentStore:
        return IncidentStore(self.redis, self.keys, retention_days=180)

    def runtime(self) -> Runtime:
        runtime = super().runtime()
        runtime.memory = IncidentMemory(self.store())
        runtime.channel_facts = Facts(self.public)
        return runtime

    def run_in(self, channel: str, text: str, thread_ts: str) -> str:
        submission = self.service.submit(channel, thread_ts, requester="U_REQ", text=text)
        assert submission.created
        self.work()
        return submission.run_id


def memory_harness(harness: Harness) -> MemoryHarness:
    return MemoryHarness(
        harness.redis, harness.keys, harness.options, harness.directory, harness.models, harness.tools
    )


def test_a_finished_run_is_remembered_redacted(
    harness: Harness, redis_client: redis.Redis, keys: Keys
) -> None:
    h = memory_harness(harness)
    run = h.run_in("CPRIV", f"plan: check_health web-03 disk full token {SECRET}", "200.1")
    incident = h.store().get(run)
    assert incident is not None
    assert incident.channel == "CPRIV" and incident.private and incident.status == "completed"
    assert "disk full" in incident.question
    assert SECRET.encode() not in bytes(redis_client.get(keys.memory_incident(run)) or b"")  # type: ignore[arg-type]
    assert incident.link.endswith("/CPRIV/p2001")


def test_private_incident_stays_in_its_channel_through_runs(harness: Harness) -> None:
    h = memory_harness(harness)
    private = h.run_in("CPRIV", "plan: check_health payroll disk full", "300.1")
    public = h.run_in("CPUB", "plan: check_health api disk full", "300.2")
    other = h.run_in("COTHER", "plan: similar_incidents", "300.3")
    seen_elsewhere = " ".join(h.tool_results(other))
    assert public in seen_elsewhere and private not in seen_elsewhere and "payroll" not in seen_elsewhere
    home = h.run_in("CPRIV", "plan: similar_incidents", "300.4")
    assert private in " ".join(h.tool_results(home))


def test_a_thumbs_down_marks_the_incident_disputed(harness: Harness) -> None:
    from bot.observability.run_metrics import RunMetrics
    from bot.slack.handlers.feedback import Feedback, FeedbackOutcome

    h = memory_harness(harness)
    run = h.run_in("CPUB", "plan: check_health api disk full", "400.1")
    service = h.service
    metrics = RunMetrics.for_redis(h.redis, h.keys, enabled=False)
    feedback = Feedback(
        h.redis, h.keys, service, service.audit, metrics, retention_seconds=60, incidents=h.store()
    )
    assert feedback.record(f"negative:{run}", "U_BOB", "CPUB", "1.0") is FeedbackOutcome.COUNTED
    assert feedback.record(f"positive:{run}", "U_AL", "CPUB", "1.0") is FeedbackOutcome.COUNTED
    incident = h.store().get(run)
    assert incident is not None and incident.disputed
