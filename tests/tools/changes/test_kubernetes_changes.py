"""A Kubernetes target's changes: rollouts (ReplicaSets, ControllerRevisions) and events, through a
fake kubectl on PATH that records its argv and prints canned JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.tools.fakes import FakeCommands
from tools.base import ToolContext
from tools.builtin.services import KubernetesBackend
from tools.changes.kubernetes import event_changes, kubernetes_changes, rollout_changes
from tools.changes.record import MAX_WHAT
from tools.errors import ToolCallError


def ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def replica_set(name: str, revision: str, created: str, image: str, cause: str = "") -> dict[str, Any]:
    annotations = {"deployment.kubernetes.io/revision": revision}
    if cause:
        annotations["kubernetes.io/change-cause"] = cause
    return {
        "metadata": {
            "name": name,
            "creationTimestamp": created,
            "annotations": annotations,
            "ownerReferences": [{"kind": "Deployment", "name": "api"}],
        },
        "spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}},
    }


REPLICA_SETS = [
    replica_set("api-6b7f", "7", "2025-01-06T08:00:00Z", "registry/api:1.4.1"),
    replica_set(
        "api-7c9d", "8", "2025-01-06T09:40:00Z", "registry/api:1.4.2", cause="deploy api 1.4.2 by ci"
    ),
]
STATEFUL = {
    "metadata": {
        "name": "db-5f",
        "creationTimestamp": "2025-01-06T09:50:00Z",
        "ownerReferences": [{"kind": "StatefulSet", "name": "db"}],
    },
    "revision": 3,
    "data": {"spec": {"template": {"spec": {"containers": [{"image": "postgres:16.4"}]}}}},
}
EVENTS = [
    {
        "type": "Normal",
        "reason": "ScalingReplicaSet",
        "involvedObject": {"kind": "Deployment", "name": "api"},
        "lastTimestamp": "2025-01-06T09:40:01Z",
        "message": "Scaled up replica set api-7c9d to 3",
    },
    {
        "type": "Warning",
        "reason": "BackOff",
        "involvedObject": {"kind": "Pod", "name": "api-7c9d-x2k"},
        "lastTimestamp": "2025-01-06T09:45:00Z",
        "message": "Back-off restarting failed container",
        "count": 12,
    },
    {"type": "Normal", "reason": "NoTime", "involvedObject": {"kind": "Pod", "name": "x"}, "message": "?"},
]


def items(*objects: dict[str, Any]) -> dict[str, object]:
    return {"stdout": json.dumps({"kind": "List", "items": list(objects)})}


def test_rollouts_and_events_in_the_window_oldest_first(fake_commands: FakeCommands) -> None:
    fake_commands.add(
        "kubectl",
        when={
            "replicasets": items(*REPLICA_SETS),
            "controllerrevisions": items(STATEFUL),
            "events": items(*EVENTS),
        },
    )
    backend = KubernetesBackend(fake_commands.env, "shop", "prod-eu")
    changes = kubernetes_changes(
        backend,
        ToolContext.starting_now(10),
        "shop-k8s",
        ts("2025-01-06T09:00:00"),
        ts("2025-01-06T10:00:00"),
    )
    assert [(c.kind, c.what) for c in changes] == [
        (
            "deploy",
            "rollout of Deployment/api revision 8: registry/api:1.4.2 (change-cause: deploy api 1.4.2 by ci)",
        ),
        ("event", "Normal ScalingReplicaSet Deployment/api: Scaled up replica set api-7c9d to 3"),
        ("event", "Warning BackOff Pod/api-7c9d-x2k: Back-off restarting failed container (x12)"),
        ("deploy", "rollout of StatefulSet/db revision 3: postgres:16.4"),
    ]
    assert {c.target for c in changes} == {"shop-k8s"} and {c.source for c in changes} == {"kubernetes"}
    # every call in the target's own namespace and context, whatever asked
    for argv in fake_commands.calls("kubectl"):
        assert argv[:2] == ["--namespace=shop", "--context=prod-eu"]


def test_hostile_cluster_text_is_one_bounded_line() -> None:
    hostile = replica_set("x", "9", "2025-01-06T09:40:00Z", "img\n<!channel>", cause="*ok* " + "y" * 5000)
    [change] = rollout_changes([hostile], "t")
    assert "\n" not in change.what and len(change.what) <= MAX_WHAT
    odd = [{"type": {"a": 1}, "reason": None, "involvedObject": "nope", "eventTime": "2025-01-06T09:40:00Z"}]
    [event] = event_changes(odd, "t")
    assert event.what.startswith("{'a': 1} None ?/?")
    assert rollout_changes([{"metadata": "broken"}, {}], "t") == []


@pytest.mark.parametrize("stdout", ["not json", json.dumps({"kind": "List"})])
def test_unreadable_kubectl_output_is_a_call_error(fake_commands: FakeCommands, stdout: str) -> None:
    fake_commands.add("kubectl", stdout=stdout)
    backend = KubernetesBackend(fake_commands.env, "shop", None)
    with pytest.raises(ToolCallError):
        kubernetes_changes(backend, ToolContext.starting_now(10), "t", 0, 2e9)
