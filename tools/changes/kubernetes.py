"""A Kubernetes target's change journal: its rollout history and its namespace's recent events.

A ``via: kubernetes`` target has no runner scanning a host; what changed in its namespace is in
the API already. A Deployment keeps one ReplicaSet per revision (``deployment.kubernetes.io/
revision``) with the pod template it rolled out and, where the deployer set it, the
``kubernetes.io/change-cause`` annotation; StatefulSets and DaemonSets keep ControllerRevisions
the same way. Each revision's creation is a DEPLOY change (which images, which cause); each event
of the namespace an EVENT change (warnings and the rollout's own Normal events: scaling,
killing, pulling). Read with the target's own kubectl argv (``KubernetesBackend``), never a
namespace the model chose; every text is the cluster's, untrusted, and bounded by ``Change``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tools.base import ToolContext
from tools.builtin.kubernetes_reports import as_object, as_objects, event_time, json_items, parse_time
from tools.builtin.services import KubernetesBackend
from tools.changes.record import DEPLOY, EVENT, Change

MAX_LIST_BYTES = 4_000_000  # a namespace's ReplicaSets and events as JSON: a busy one is ~1 MB
_REVISION = "deployment.kubernetes.io/revision"
_CAUSE = "kubernetes.io/change-cause"
SOURCE = "kubernetes"


def kubernetes_changes(
    backend: KubernetesBackend, ctx: ToolContext, target: str, since: float, until: float
) -> list[Change]:
    """The target's rollouts and events in [since, until], oldest first."""
    replica_sets = backend.kubectl_json(
        ctx, "get", "replicasets", "--output=json", max_output_bytes=MAX_LIST_BYTES
    )
    revisions = backend.kubectl_json(
        ctx, "get", "controllerrevisions", "--output=json", max_output_bytes=MAX_LIST_BYTES
    )
    events = backend.kubectl_json(ctx, "get", "events", "--output=json", max_output_bytes=MAX_LIST_BYTES)
    changes = [
        *rollout_changes(json_items(replica_sets), target),
        *rollout_changes(json_items(revisions), target),
        *event_changes(json_items(events), target),
    ]
    return sorted((c for c in changes if since <= c.at <= until), key=lambda c: c.at)


def rollout_changes(items: Iterable[dict[str, Any]], target: str) -> list[Change]:
    """One DEPLOY per ReplicaSet or ControllerRevision: its owner, revision, images and cause."""
    changes = []
    for item in items:
        metadata = as_object(item.get("metadata"))
        created = parse_time(metadata.get("creationTimestamp"))
        if created is None:
            continue
        annotations = as_object(metadata.get("annotations"))
        owner = next(iter(as_objects(metadata.get("ownerReferences"))), {})
        workload = f"{owner.get('kind', 'ReplicaSet')}/{owner.get('name', metadata.get('name', '?'))}"
        revision = annotations.get(_REVISION) or item.get("revision") or "?"
        images = ", ".join(_images(item)) or "no image listed"
        what = f"rollout of {workload} revision {revision}: {images}"
        cause = annotations.get(_CAUSE)
        if isinstance(cause, str) and cause:
            what += f" (change-cause: {cause})"
        changes.append(Change(target, DEPLOY, created.timestamp(), what, source=SOURCE).bounded())
    return changes


def event_changes(items: Iterable[dict[str, Any]], target: str) -> list[Change]:
    """One EVENT per event: its type, reason, object and message."""
    changes = []
    for item in items:
        when = event_time(item)
        if when is None:
            continue
        involved = as_object(item.get("involvedObject"))
        what = (
            f"{item.get('type', '?')} {item.get('reason', '?')} "
            f"{involved.get('kind', '?')}/{involved.get('name', '?')}: {item.get('message', '')}"
        )
        count = item.get("count")
        if isinstance(count, int) and not isinstance(count, bool) and count > 1:
            what += f" (x{count})"
        changes.append(Change(target, EVENT, when.timestamp(), what, source=SOURCE).bounded())
    return changes


def _images(item: dict[str, Any]) -> list[str]:
    """The containers' images of a ReplicaSet's pod template or a ControllerRevision's data."""
    spec = as_object(item.get("spec")) or as_object(as_object(item.get("data")).get("spec"))
    template = as_object(as_object(spec.get("template")).get("spec"))
    return [str(c.get("image")) for c in as_objects(template.get("containers")) if c.get("image")]
