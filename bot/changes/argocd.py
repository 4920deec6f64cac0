"""Argo CD notifications' webhook, with the template docs/CHANGES.md prints, as deploy markers.

Argo CD's ``service.webhook`` sends whatever body its template renders; ours (the "chatops"
template of docs/CHANGES.md "Deploy markers") renders exactly these fields, and any other is
refused (400) so a mistyped template is found at its first delivery::

    {"app", "namespace", "revision", "phase", "sync_status", "health", "finished_at", "who", "url"}

``app``, ``namespace`` and ``phase`` are required. A ``phase`` of ``Succeeded`` is "argocd synced",
``Failed`` or ``Error`` "argocd sync failed"; ``Running`` and ``Terminating`` are acknowledged and
ignored. Go templates render a missing field as ``<no value>`` (an automated sync has no
``initiatedBy.username``): that counts as absent.

Which targets: every target of the inventory whose label ``namespace`` is the application's
destination namespace, and every Kubernetes target of that namespace; none is a 422 saying so.
The time is ``finished_at`` (the operation's end), else when the delivery arrived.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.changes.markers import Markers, deploys, json_object, not_future, refuse, rfc3339, text, web_url
from tools.inventory_types import Inventory, Target

FIELDS = ("app", "namespace", "revision", "phase", "sync_status", "health", "finished_at", "who", "url")
NO_VALUE = "<no value>"  # what a Go template renders for a missing field
MARKED = {"Succeeded": "argocd synced", "Failed": "argocd sync failed", "Error": "argocd sync failed"}
NAMESPACE_LABEL = "namespace"


def parse_argocd(body: bytes, inventory: Inventory, now: float) -> Markers:
    raw = json_object(body)
    unknown = [key for key in raw if key not in FIELDS]
    if unknown:
        shown = ", ".join(repr(" ".join(key.split())[:40]) for key in unknown[:5])
        raise refuse(f"unknown field(s) {shown}; the chatops template has {', '.join(FIELDS)}")
    fields = {name: _given(raw, name) for name in FIELDS}
    for name in ("app", "namespace", "phase"):
        if not fields[name]:
            raise refuse(f"{name}: required (see the template in docs/CHANGES.md)")
    phase = fields["phase"]
    if phase not in MARKED:
        return Markers(ignored=f"phase {phase[:20]!r}: only Succeeded, Failed and Error are markers")
    at = (
        not_future(rfc3339(fields["finished_at"], "finished_at"), now, "finished_at")
        if fields["finished_at"]
        else now
    )
    state = ", ".join(part for part in (fields["sync_status"], fields["health"]) if part)
    what = f"{MARKED[phase]} {fields['app']}"
    what += f" to {fields['revision'][:40]}" if fields["revision"] else ""
    what += f" in {fields['namespace']}" + (f" ({state})" if state else "")
    return Markers(
        deploys(
            _targets(inventory, fields["namespace"]),
            what=what,
            at=at,
            source="argocd",
            who=fields["who"],
            url=web_url(fields["url"]),
        )
    )


def _given(raw: Mapping[str, Any], name: str) -> str:
    value = text(raw, name).strip()
    return "" if value == NO_VALUE else value


def _targets(inventory: Inventory, namespace: str) -> list[Target]:
    found = [
        target
        for target in inventory
        if target.labels.get(NAMESPACE_LABEL) == namespace
        or (target.kubernetes is not None and target.kubernetes.namespace == namespace)
    ]
    if not found:
        raise refuse(
            f"namespace: no target of the inventory has the label {NAMESPACE_LABEL}={namespace[:60]!r} or "
            "is a Kubernetes target of that namespace: nothing stored",
            422,
        )
    return found
