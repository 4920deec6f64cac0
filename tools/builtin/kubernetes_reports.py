"""How the Kubernetes tools (``tools.builtin.kubernetes``) report what kubectl returned: pods and events.

Everything here reads kubectl's JSON defensively (a field of the wrong type reads as missing) and
bounds what it prints.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tools.errors import ToolCallError
from tools.text import human_duration, shorten, table

_NEVER = datetime.min.replace(tzinfo=UTC)  # events without a time sort as the oldest
_MAX_REASON_CHARS = 160
MAX_MESSAGE_CHARS = 200


def pods_report(
    pods: list[dict[str, Any]], now: datetime, limit: int, selector: str | None, where: str
) -> str:
    scope = f"{where}" + (f", selector {selector}" if selector else "")
    if not pods:
        return f"No pods in {scope}."
    rows = sorted((_pod_row(pod, now) for pod in pods), key=lambda row: (row[0], row[1][0]))
    failing = sum(1 for healthy, _ in rows if not healthy)
    lines = [f"{len(rows)} pods in {scope}; {failing} not ready or failing."]
    shown = [cells for _, cells in rows[:limit]]
    lines.append(table(("NAME", "READY", "PHASE", "RESTARTS", "AGE", "NODE", "REASON"), shown, right=(3,)))
    if len(rows) > limit:
        lines.append(f"... {len(rows) - limit} more pods not shown (narrow with a selector).")
    return "\n".join(lines)


def _pod_row(pod: dict[str, Any], now: datetime) -> tuple[bool, list[str]]:
    """Whether the pod is healthy, and its cells."""
    meta, spec, status = (
        as_object(pod.get("metadata")),
        as_object(pod.get("spec")),
        as_object(pod.get("status")),
    )
    containers = as_objects(status.get("containerStatuses"))
    every = [*as_objects(status.get("initContainerStatuses")), *containers]
    ready = sum(1 for container in containers if container.get("ready") is True)
    total = len(as_objects(spec.get("containers"))) or len(containers)
    restarts = sum(as_int(container.get("restartCount")) for container in every)
    phase = str(status.get("phase") or "Unknown")
    if meta.get("deletionTimestamp"):
        phase += " (terminating)"
    reasons = _pod_reasons(status, every)
    healthy = phase == "Succeeded" or (phase == "Running" and ready == total and not reasons)
    cells = [
        str(meta.get("name") or "?"),
        f"{ready}/{total}",
        phase,
        str(restarts),
        age(parse_time(meta.get("creationTimestamp")), now),
        str(spec.get("nodeName") or "-"),
        shorten("; ".join(reasons), _MAX_REASON_CHARS) or "-",
    ]
    return healthy, cells


def _pod_reasons(status: dict[str, Any], containers: list[dict[str, Any]]) -> list[str]:
    """Why the pod or its containers are not simply running: ``app: CrashLoopBackOff (last:
    OOMKilled, exit 137)``, ``Evicted``, ``Unschedulable``."""
    reasons = [str(status["reason"])] if status.get("reason") else []
    for condition in as_objects(status.get("conditions")):
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            reasons.append(str(condition.get("reason") or "not scheduled"))
    for container in containers:
        state, last = (
            as_object(container.get("state")),
            as_object(as_object(container.get("lastState")).get("terminated")),
        )
        waiting, terminated = as_object(state.get("waiting")), as_object(state.get("terminated"))
        current = waiting.get("reason") or (
            terminated.get("reason") if terminated.get("reason") != "Completed" else None
        )
        previous = (
            f"last: {last.get('reason') or 'terminated'}, exit {last.get('exitCode', '?')}" if last else ""
        )
        if current or (previous and not container.get("ready")):
            detail = f" ({previous})" if previous else ""
            reasons.append(f"{container.get('name', '?')}: {current or 'not ready'}{detail}")
    return reasons


def events_report(
    events: list[dict[str, Any]],
    now: datetime,
    limit: int,
    about: str | None,
    warnings_only: bool,
    where: str,
) -> str:
    scope = where + (f", about {about}" if about else "")
    if not events:
        return f"No {'warning ' if warnings_only else ''}events in {scope}."
    newest = sorted(events, key=lambda event: event_time(event) or _NEVER, reverse=True)
    ordered = sorted(newest, key=lambda event: event.get("type") != "Warning")  # stable: newest first
    warnings = sum(1 for event in events if event.get("type") == "Warning")
    lines = [f"{len(events)} events in {scope} ({warnings} warnings); warnings first, newest first."]
    rows = [_event_row(event, now) for event in ordered[:limit]]
    lines.append(table(("LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"), rows))
    if len(events) > limit:
        lines.append(f"... {len(events) - limit} more events not shown.")
    return "\n".join(lines)


def event_time(event: dict[str, Any]) -> datetime | None:
    """When the event was last seen (``None``: it carries no readable time)."""
    for value in (
        event.get("lastTimestamp"),
        as_object(event.get("series")).get("lastObservedTime"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        as_object(event.get("metadata")).get("creationTimestamp"),
    ):
        when = parse_time(value)
        if when is not None:
            return when
    return None


def _event_row(event: dict[str, Any], now: datetime) -> list[str]:
    involved = as_object(event.get("involvedObject"))
    count = as_int(event.get("count")) or as_int(as_object(event.get("series")).get("count"))
    message = " ".join(str(event.get("message") or "").split())
    if count > 1:
        message = f"{message} (x{count})"
    return [
        age(event_time(event), now, " ago"),
        str(event.get("type") or "?"),
        str(event.get("reason") or "?"),
        f"{str(involved.get('kind') or '?').lower()}/{involved.get('name') or '?'}",
        shorten(message, MAX_MESSAGE_CHARS),
    ]


def json_items(info: dict[str, Any]) -> list[dict[str, Any]]:
    items = info.get("items")
    if not isinstance(items, list):
        raise ToolCallError("kubectl printed no list of items")
    return [item for item in items if isinstance(item, dict)]


def as_object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_objects(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def age(when: datetime | None, now: datetime, suffix: str = "") -> str:
    return "?" if when is None else human_duration(max(0.0, (now - when).total_seconds())) + suffix
