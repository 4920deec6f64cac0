"""PagerDuty V3 webhooks: one incident event becomes a ``Notification`` of one ``Alert``.

A V3 body holds one event, ``{"event": {"id", "event_type", "resource_type", "occurred_at",
"agent", "client", "data"}}``, whose ``data`` depends on the type. The bot acts on three types
(``payloads.PAGERDUTY_INCIDENT_EVENTS``): ``incident.triggered`` and ``incident.acknowledged``
are ``firing``, ``incident.resolved`` is ``resolved``; ``event`` keeps which one it was, so an
acknowledgement can say who acknowledged. Their ``data`` is an incident and is checked
strictly (id, ``type: incident``, title, status).

Every other type (``pagey.ping``, the test event PagerDuty sends when a subscription is saved;
``incident.annotated``; ``service.updated``...) is parsed from its envelope alone into a
notification with no alerts whose ``actionable`` is false, so the receiver answers 200 and
drops it: a 4xx would make PagerDuty retry and eventually disable the subscription.

The incident becomes labels routes can match, as an Alertmanager alert's would:
``alertname`` (the title), ``service``, ``service_id``, ``urgency``, ``priority`` (its name,
``P1``), ``escalation_policy``; and annotations for people: ``summary`` (the title),
``status``, ``incident_key``, ``agent`` (who triggered, acknowledged or resolved it). Missing
values are left out rather than set to empty strings.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError

from bot.alerts.payload_reasons import describe
from bot.alerts.payloads import (
    MAX_LABEL_VALUE_CHARS,
    PAGERDUTY_INCIDENT_EVENTS,
    Alert,
    BodyModel,
    Key,
    Notification,
    OptionalTimestamp,
    Status,
    Text,
    Timestamp,
    load_json_object,
    one_line,
    web_url,
)
from bot.errors import AlertPayloadError

Title = Annotated[str, Field(min_length=1, max_length=MAX_LABEL_VALUE_CHARS)]


class _Reference(BodyModel):
    """A PagerDuty reference (``service``, ``priority``, ``agent``...): only what we show."""

    id: Text = ""
    summary: Text = ""
    html_url: Text = ""


class _Incident(BodyModel):
    id: Key
    type: Literal["incident"]
    title: Title
    status: Literal["triggered", "acknowledged", "resolved"]
    urgency: Text = ""
    html_url: Text = ""
    incident_key: Text | None = None
    created_at: OptionalTimestamp = None
    service: _Reference | None = None
    priority: _Reference | None = None
    escalation_policy: _Reference | None = None


class _Event(BodyModel):
    id: Key
    event_type: Annotated[str, Field(min_length=1, max_length=200)]
    resource_type: Text = ""
    occurred_at: Timestamp
    agent: _Reference | None = None
    data: dict[str, Any] | None = None


class _Envelope(BodyModel):
    event: _Event


def parse_pagerduty(body: bytes) -> Notification:
    """A V3 webhook body; raises ``AlertPayloadError`` (a 400 reason) when it is malformed.

    The signature is checked before (``auth.pagerduty_signature_ok``, on the raw body).
    """
    data = load_json_object(body)
    try:
        event = _Envelope.model_validate(data).event
    except ValidationError as exc:
        raise AlertPayloadError(describe(exc)) from None
    status = PAGERDUTY_INCIDENT_EVENTS.get(event.event_type)
    if status is None:
        return _ignored(event)
    try:
        incident = _Incident.model_validate(event.data)
    except ValidationError as exc:
        raise AlertPayloadError(describe(exc, "event.data")) from None
    return _incident_notification(event, incident, status)


def _incident_notification(event: _Event, incident: _Incident, status: Status) -> Notification:
    labels = _present(
        alertname=one_line(incident.title, MAX_LABEL_VALUE_CHARS),
        service=_summary(incident.service),
        service_id=incident.service.id if incident.service else "",
        urgency=incident.urgency,
        priority=_summary(incident.priority),
        escalation_policy=_summary(incident.escalation_policy),
    )
    annotations = _present(
        summary=incident.title,
        status=incident.status,
        incident_key=incident.incident_key or "",
        agent=_summary(event.agent),
    )
    links = _present(
        incident=web_url(incident.html_url),
        service=web_url(incident.service.html_url) if incident.service else "",
    )
    alert = Alert(
        fingerprint=incident.id,
        status=status,
        labels=labels,
        annotations=annotations,
        starts_at=incident.created_at or event.occurred_at,
        ends_at=event.occurred_at if status == "resolved" else None,
        generator_url=web_url(incident.html_url),
        links=links,
    )
    return Notification(
        source="pagerduty",
        group_key=incident.id,
        status=status,
        receiver=_summary(incident.service),
        group_labels={},
        common_labels=labels,
        common_annotations=annotations,
        external_url=web_url(incident.html_url),
        truncated_alerts=0,
        alerts=(alert,),
        event=event.event_type,
        title=one_line(incident.title),
        event_id=event.id,
        occurred_at=event.occurred_at,
    )


def _ignored(event: _Event) -> Notification:
    """An event the bot does not act on, from its envelope: nothing in ``data`` is trusted."""
    data = event.data or {}
    subject = data.get("incident") if isinstance(data.get("incident"), dict) else data
    subject_id = subject.get("id") if isinstance(subject, dict) else None
    resolved = data.get("status") == "resolved"
    return Notification(
        source="pagerduty",
        group_key=subject_id if isinstance(subject_id, str) and subject_id else event.id,
        status="resolved" if resolved else "firing",
        receiver="",
        group_labels={},
        common_labels={},
        common_annotations={},
        external_url="",
        truncated_alerts=0,
        alerts=(),
        event=event.event_type,
        title=one_line(event.event_type),
    )


def _summary(reference: _Reference | None) -> str:
    return one_line(reference.summary, MAX_LABEL_VALUE_CHARS) if reference else ""


def _present(**values: str) -> dict[str, str]:
    return {name: value for name, value in values.items() if value}
