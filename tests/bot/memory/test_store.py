"""The incident memory on a real Redis: store, index, scope, forget, retention, hostile records."""

from __future__ import annotations

import json
from typing import Any

import redis

from bot.keys import Keys
from bot.memory.incident import Action, Incident, Supported
from bot.memory.similar import IncidentMemory, memory_tools
from bot.memory.store import IncidentStore

NOW = 1_800_000_000.0


def incident(n: int, **fields: object) -> Incident:
    base: dict[str, object] = dict(
        id=f"run{n}",
        channel="CPUB",
        private=False,
        thread_ts=f"{n}.0001",
        link=f"https://example.slack.com/archives/CPUB/p{n}0001",
        at=NOW - 3600 * n,
        question="disk full on web-03",
        alert_name="HighDiskUsage",
        labels={"alertname": "HighDiskUsage", "service": "api"},
        targets=("web-03",),
        status="completed",
        conclusion="root_cause_found",
        answer="The nginx access log filled /var.",
        supported=(Supported("nginx access log filled /var", ("/var 100% used",)),),
        actions=(Action("logrotate_force", "web-03", "U1"),),
    )
    base.update(fields)
    return Incident(**base)  # type: ignore[arg-type]


def store(client: redis.Redis, keys: Keys, days: float = 180, now: float = NOW) -> IncidentStore:
    return IncidentStore(client, keys, retention_days=days, clock=lambda: now)


def call(tool_list: list[Any], **args: object) -> str:
    (tool,) = tool_list
    return str(tool.execute(json.dumps(args), timeout=5).output)


def test_similar_ranks_by_alert_target_and_words(redis_client: redis.Redis, keys: Keys) -> None:
    s = store(redis_client, keys)
    s.import_new([incident(1)])
    s.save(
        incident(
            2,
            alert_name="HighCPU",
            labels={"service": "db"},
            targets=("db-01",),
            question="cpu hot",
            answer="a cron job",
            supported=(),
        )
    )
    s.save(
        incident(3, alert_name="", labels={}, targets=(), question="why is the disk full", answer="tmp files")
    )
    found = IncidentMemory(s).similar(
        "COTHER", query="disk", alert_name="HighDiskUsage", labels={"service": "api"}, targets=("web-03",)
    )
    assert [f.incident.id for f in found] == ["run1", "run3"]
    assert "alert HighDiskUsage" in found[0].reasons and "target web-03" in found[0].reasons


def test_private_channel_never_reaches_another_channel(redis_client: redis.Redis, keys: Keys) -> None:
    s = store(redis_client, keys)
    s.save(incident(1, channel="CSECRET", private=True, question="payroll db disk full"))
    memory = IncidentMemory(s)
    # A hostile model names the private channel and everything the incident holds: the channel is
    # bound in code, and the tool has no argument to change it.
    hostile = call(
        memory_tools(memory, "CPUB"),
        query="payroll disk CSECRET",
        target="web-03",
        labels={"alertname": "HighDiskUsage", "channel": "CSECRET"},
    )
    assert "run1" not in hostile and "payroll" not in hostile
    assert "run1" in call(memory_tools(memory, "CSECRET"), query="payroll")


def test_channel_scope_keeps_public_incidents_home(redis_client: redis.Redis, keys: Keys) -> None:
    s = store(redis_client, keys)
    s.save(incident(1))
    assert IncidentMemory(s, scope="channel").similar("COTHER", targets=("web-03",)) == []
    assert IncidentMemory(s, scope="channel").similar("CPUB", targets=("web-03",))
    assert IncidentMemory(s).similar("COTHER", targets=("web-03",))


def test_disputed_comes_last(redis_client: redis.Redis, keys: Keys) -> None:
    s = store(redis_client, keys)
    s.save(incident(1))
    s.save(incident(2))
    assert s.set_feedback("run1", "down")
    out = call(memory_tools(IncidentMemory(s), "CPUB"), target="web-03")
    assert out.index("run2") < out.index("run1") and "DISPUTED" in out


def test_forget_removes_it_everywhere(redis_client: redis.Redis, keys: Keys) -> None:
    s = store(redis_client, keys)
    s.save(incident(1))
    s.save(incident(2))
    assert s.forget("run1")
    assert s.get("run1") is None
    assert [item.id for item in s.listed()] == ["run2"]
    for key in redis_client.scan_iter(match=keys.memory_index_pattern()):
        assert redis_client.zscore(key, "run1") is None
    assert not s.forget("run1")
    assert s.forget_before(NOW) == 1
    assert list(redis_client.scan_iter(match=f"{keys.prefix}memory:*")) == []


def test_retention_ttl_and_pruning(redis_client: redis.Redis, keys: Keys) -> None:
    s = store(redis_client, keys, days=1)
    s.save(incident(1))
    assert 0 < redis_client.ttl(keys.memory_incident("run1")) <= 86_400
    later = store(redis_client, keys, days=1, now=NOW + 2 * 86_400)
    later.save(incident(0, id="fresh", at=NOW + 2 * 86_400))
    assert [i.id for i in later.listed()] == ["fresh"]  # the expired one's time entry is pruned
    assert [f.incident.id for f in IncidentMemory(later).similar("CPUB", targets=("web-03",))] == ["fresh"]
    for key in redis_client.scan_iter(match=keys.memory_index_pattern()):
        assert redis_client.zscore(key, "run1") is None  # pruned from every index the query read


def test_hostile_records_do_not_crash_the_tool(redis_client: redis.Redis, keys: Keys) -> None:
    s = store(redis_client, keys)
    s.save(incident(1))
    s.save(incident(2))
    redis_client.set(keys.memory_incident("run1"), b"\xff not json")
    redis_client.set(keys.memory_incident("run2"), json.dumps({"id": "run2", "channel": 5, "at": "x"}))
    s.save(incident(3))
    out = call(memory_tools(IncidentMemory(s), "CPUB"), target="web-03")
    assert "run3" in out and "run1" not in out and "run2" not in out
    # a record claiming another id than its key is not shown as that id either
    redis_client.set(keys.memory_incident("run3"), incident(9, id="evil").to_json())
    assert "evil" not in call(memory_tools(IncidentMemory(s), "CPUB"), target="web-03")
    assert [item.incident for item in s.listed() if item.id == "run1"] == [None]
    assert s.forget("run1")  # a malformed record is forgotten from every index too
    for key in redis_client.scan_iter(match=keys.memory_index_pattern()):
        assert redis_client.zscore(key, "run1") is None
