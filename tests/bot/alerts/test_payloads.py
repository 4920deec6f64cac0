"""Webhook bodies as Alertmanager, Grafana and PagerDuty send them; every malformed one is a 400 reason."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.alerts.pagerduty import parse_pagerduty
from bot.alerts.payloads import (
    MAX_ALERTS,
    MAX_ANNOTATION_CHARS,
    MAX_BODY_BYTES,
    MAX_LABELS,
    parse_alertmanager,
    parse_grafana,
)
from bot.errors import AlertError, AlertPayloadError

# A real Alertmanager delivery (the example of prometheus/alertmanager's webhook docs, as captured
# by a receiver), byte for byte: nanosecond times, Go's zero endsAt, \u0026 in the URL.
ALERTMANAGER_BODY = rb"""{"receiver":"webhook","status":"firing","alerts":[{"status":"firing","labels":{"alertname":"Test","dc":"eu-west-1","instance":"localhost:9090","job":"prometheus24"},"annotations":{"description":"some description"},"startsAt":"2018-08-03T09:52:26.739266876+02:00","endsAt":"0001-01-01T00:00:00Z","generatorURL":"http://example.com:9090/graph?g0.expr=go_memstats_alloc_bytes+%3E+0\u0026g0.tab=1"}],"groupLabels":{"alertname":"Test","job":"prometheus24"},"commonLabels":{"alertname":"Test","dc":"eu-west-1","instance":"localhost:9090","job":"prometheus24"},"commonAnnotations":{"description":"some description"},"externalURL":"http://example.com:9093","version":"4","groupKey":"{}:{alertname=\"Test\", job=\"prometheus24\"}"}"""

# Captured from Debian's Alertmanager 0.25.0 (webhook_configs with max_alerts: 1, two alerts fired).
ALERTMANAGER_025_TRUNCATED = rb"""{"receiver":"chatops","status":"firing","alerts":[{"status":"firing","labels":{"alertname":"DiskFull","instance":"web-03:9100","severity":"critical","team":"sre"},"annotations":{"summary":"disk full on web-03"},"startsAt":"2026-12-01T17:12:41.174869193Z","endsAt":"0001-01-01T00:00:00Z","generatorURL":"http://prometheus.example/graph?g0.expr=up","fingerprint":"6d703a39bc436f16"}],"groupLabels":{"alertname":"DiskFull"},"commonLabels":{"alertname":"DiskFull","instance":"web-03:9100","severity":"critical","team":"sre"},"commonAnnotations":{"summary":"disk full on web-03"},"externalURL":"http://vm:54231","version":"4","groupKey":"{}:{alertname=\"DiskFull\"}","truncatedAlerts":1}
"""

# Alertmanager >= 0.22 (truncatedAlerts, fingerprint), as the alertmanager-webhook-types crate samples it.
ALERTMANAGER_V022 = {
    "receiver": "sms",
    "status": "firing",
    "alerts": [
        {
            "status": "firing",
            "labels": {
                "alertname": "ProbeFailure",
                "instance": "https://server.example.org",
                "job": "http_checks",
                "monitor": "master",
                "severity": "critical",
            },
            "annotations": {
                "description": "Instance https://server.example.org has been down for over 5m. Job: http_checks",
                "summary": "BlackBox Probe Failure: https://server.example.org",
            },
            "startsAt": "2023-02-06T13:08:45.828Z",
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "http://prometheus.example.org:9090/graph?g0.expr=probe_success+%3D%3D+0&g0.tab=1",
            "fingerprint": "1a30ba71cca2921f",
        }
    ],
    "groupLabels": {"alertname": "ProbeFailure"},
    "commonLabels": {
        "alertname": "ProbeFailure",
        "instance": "https://server.example.org",
        "job": "http_checks",
        "monitor": "master",
        "severity": "critical",
    },
    "commonAnnotations": {
        "description": "Instance https://server.example.org has been down for over 5m. Job: http_checks",
        "summary": "BlackBox Probe Failure: https://server.example.org",
    },
    "externalURL": "http://prometheus.example.org:9093",
    "version": "4",
    "groupKey": '{}/{severity="critical"}:{alertname="ProbeFailure"}',
    "truncatedAlerts": 0,
}

# Grafana's documented webhook contact point body (the message shortened).
GRAFANA_BODY = {
    "receiver": "My Super Webhook",
    "status": "firing",
    "orgId": 1,
    "alerts": [
        {
            "status": "firing",
            "labels": {"alertname": "High memory usage", "team": "blue", "zone": "us-1"},
            "annotations": {
                "description": "The system has high memory usage",
                "runbook_url": "https://myrunbook.com/runbook/1234",
                "summary": "This alert was triggered for zone us-1",
            },
            "startsAt": "2021-10-12T09:51:03.157076+02:00",
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "https://play.grafana.org/alerting/1afz29v7z/edit",
            "fingerprint": "c6eadffa33fcdf37",
            "silenceURL": "https://play.grafana.org/alerting/silence/new?alertmanager=grafana&matchers=alertname%3DT2%2Cteam%3Dblue%2Czone%3Dus-1",
            "dashboardURL": "",
            "panelURL": "",
            "values": {"B": 44.23943737541908, "C": 1},
        },
        {
            "status": "firing",
            "labels": {"alertname": "High CPU usage", "team": "blue", "zone": "eu-1"},
            "annotations": {
                "description": "The system has high CPU usage",
                "runbook_url": "https://myrunbook.com/runbook/1234",
                "summary": "This alert was triggered for zone eu-1",
            },
            "startsAt": "2021-10-12T09:56:03.157076+02:00",
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "https://play.grafana.org/alerting/d1rdpdv7k/edit",
            "fingerprint": "bc97ff14869b13e3",
            "silenceURL": "https://play.grafana.org/alerting/silence/new?alertmanager=grafana&matchers=alertname%3DT1%2Cteam%3Dblue%2Czone%3Deu-1",
            "dashboardURL": "http://localhost/d/abcd?orgId=1",
            "panelURL": "http://localhost/d/abcd?orgId=1&viewPanel=efgh",
            "values": {"B": 44.23943737541908, "C": 1},
        },
    ],
    "groupLabels": {},
    "commonLabels": {"team": "blue"},
    "commonAnnotations": {},
    "externalURL": "https://play.grafana.org/",
    "version": "1",
    "groupKey": "{}:{}",
    "truncatedAlerts": 0,
    "title": "[FIRING:2]  (blue)",
    "state": "alerting",
    "message": "**Firing**\n\nLabels:\n - alertname = T2\n ...",
}


def body(value: Any) -> bytes:
    return json.dumps(value).encode()


def reason(parse: Any, raw: bytes) -> str:
    with pytest.raises(AlertPayloadError) as caught:
        parse(raw)
    assert isinstance(caught.value, AlertError)
    assert caught.value.reason == str(caught.value)
    return caught.value.reason


MISSING: Any = object()  # a field left out of the body


def changed(data: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    merged = {**data, **changes}
    return {key: value for key, value in merged.items() if value is not MISSING}


ALERT: dict[str, Any] = ALERTMANAGER_V022["alerts"][0]  # type: ignore[index]


def am(**changes: Any) -> bytes:
    """The v0.22 Alertmanager body with top-level fields changed (``MISSING`` removes one)."""
    return body(changed(ALERTMANAGER_V022, changes))


def am_alert(**changes: Any) -> bytes:
    """The v0.22 body whose one alert has fields changed (``MISSING`` removes one)."""
    return am(alerts=[changed(ALERT, changes)])


# --- Alertmanager ---


def test_a_real_alertmanager_delivery_parses_into_a_neutral_notification() -> None:
    notification = parse_alertmanager(ALERTMANAGER_BODY)

    assert notification.source == "alertmanager" and notification.event == "notify"
    assert notification.group_key == '{}:{alertname="Test", job="prometheus24"}'
    assert (notification.status, notification.receiver, notification.title) == ("firing", "webhook", "Test")
    assert dict(notification.group_labels) == {"alertname": "Test", "job": "prometheus24"}
    assert notification.common_labels["instance"] == "localhost:9090"
    assert notification.external_url == "http://example.com:9093"
    assert notification.truncated_alerts == 0 and notification.actionable
    (alert,) = notification.alerts
    assert alert.starts_at == datetime(2018, 8, 3, 7, 52, 26, 739266, tzinfo=UTC)  # ns cut, in UTC
    assert alert.ends_at is None  # Go's zero time: still firing
    assert alert.generator_url.endswith("go_memstats_alloc_bytes+%3E+0&g0.tab=1")
    assert alert.annotations == {"description": "some description"}
    assert len(alert.fingerprint) == 16  # none sent (before 0.19): a stable hash of the labels
    assert parse_alertmanager(ALERTMANAGER_BODY).alerts[0].fingerprint == alert.fingerprint


def test_alertmanager_022_keeps_its_fingerprint_and_group_key() -> None:
    notification = parse_alertmanager(am())

    assert notification.alerts[0].fingerprint == "1a30ba71cca2921f"
    assert notification.group_key == '{}/{severity="critical"}:{alertname="ProbeFailure"}'
    assert notification.alerts[0].starts_at == datetime(2023, 2, 6, 13, 8, 45, 828000, tzinfo=UTC)


def test_a_body_captured_from_a_real_alertmanager_counts_what_it_truncated() -> None:
    notification = parse_alertmanager(ALERTMANAGER_025_TRUNCATED)  # with Go's trailing newline

    assert notification.truncated_alerts == 1 and len(notification.alerts) == 1
    assert notification.group_key == '{}:{alertname="DiskFull"}' and notification.title == "DiskFull"
    assert notification.alerts[0].fingerprint == "6d703a39bc436f16"
    assert notification.alerts[0].labels["instance"] == "web-03:9100"


def test_a_resolved_alert_keeps_its_end_in_utc() -> None:
    resolved = changed(ALERT, {"status": "resolved", "endsAt": "2023-02-06T13:18:45.828-01:30"})
    notification = parse_alertmanager(am(status="resolved", alerts=[resolved]))

    assert notification.status == "resolved"
    assert notification.alerts[0].ends_at == datetime(2023, 2, 6, 14, 48, 45, 828000, tzinfo=UTC)


def test_the_parsed_notification_cannot_be_changed_by_anyone_holding_it() -> None:
    notification = parse_alertmanager(am())

    with pytest.raises(TypeError):
        notification.common_labels["team"] = "other"  # type: ignore[index]
    with pytest.raises(TypeError):
        notification.alerts[0].labels["severity"] = "info"  # type: ignore[index]
    with pytest.raises(AttributeError):
        notification.status = "resolved"  # type: ignore[misc]


def test_fields_alertmanager_adds_over_versions_are_ignored() -> None:
    notification = parse_alertmanager(am(notification_reason="new_alerts", routeLabels={"x": "y"}))

    assert notification.title == "ProbeFailure"


def test_more_alerts_than_the_cap_are_dropped_and_counted_as_truncated() -> None:
    many = [{**ALERT, "labels": {**ALERT["labels"], "n": str(n)}} for n in range(MAX_ALERTS + 25)]
    # Beyond the cap even malformed alerts cost nothing: they are not validated.
    many += [{"status": "bogus"}] * 3

    notification = parse_alertmanager(am(alerts=many, truncatedAlerts=7))

    assert len(notification.alerts) == MAX_ALERTS
    assert notification.truncated_alerts == 7 + 25 + 3


def test_a_null_or_missing_label_map_is_empty_as_go_encodes_it() -> None:
    assert dict(parse_alertmanager(am(commonAnnotations=None)).common_annotations) == {}
    assert dict(parse_alertmanager(am(groupLabels=MISSING)).group_labels) == {}
    assert dict(parse_alertmanager(am_alert(annotations=None)).alerts[0].annotations) == {}


def test_optional_fields_may_be_left_out() -> None:
    notification = parse_alertmanager(am(truncatedAlerts=MISSING, externalURL=MISSING))
    assert (notification.truncated_alerts, notification.external_url) == (0, "")
    alert = parse_alertmanager(am_alert(endsAt=MISSING, generatorURL=MISSING, fingerprint=MISSING)).alerts[0]
    assert (alert.ends_at, alert.generator_url, len(alert.fingerprint)) == (None, "", 16)


def test_long_annotations_are_cut_but_kept() -> None:
    notification = parse_alertmanager(
        am_alert(annotations={"description": "x" * (MAX_ANNOTATION_CHARS + 500)})
    )

    description = notification.alerts[0].annotations["description"]
    assert len(description) == MAX_ANNOTATION_CHARS and description.endswith("[cut]")


def test_only_http_links_are_kept() -> None:
    bad_link = changed(ALERT, {"generatorURL": "file:///etc/passwd"})
    notification = parse_alertmanager(am(externalURL="javascript:alert(1)", alerts=[bad_link]))

    assert notification.external_url == "" and notification.alerts[0].generator_url == ""


def test_a_title_is_one_short_line_whatever_the_alertname_holds() -> None:
    hostile = "Disk\nfull <!channel>\x1b[31m " + "A" * 500
    notification = parse_alertmanager(am(commonLabels={"alertname": hostile}, groupLabels={}))

    assert "\n" not in notification.title and "\x1b" not in notification.title
    assert len(notification.title) <= 200 and notification.title.startswith("Disk full <!channel>")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"not json", "the body is not JSON"),
        (b"", "the body is not JSON"),
        (b"\xff\xfe{}", "the body is not UTF-8 text (byte 0)"),
        (b"[1, 2]", "the body must be a JSON object, not a list"),
        (b'"x"', "the body must be a JSON object, not a string"),
        (b"[" * 10000, "the body is not JSON: recursion limit exceeded"),
        (b'{"a": NaN}', "the body is not JSON"),
        (b'{"version": "4", "x": "\\ud800"}', "the body is not JSON"),  # a lone surrogate
        (b'{"version": "4", "n": ' + b"9" * 5000 + b"}", "the body is not JSON"),
    ],
)
def test_a_body_that_is_not_a_json_object_is_refused(raw: bytes, expected: str) -> None:
    assert reason(parse_alertmanager, raw).startswith(expected)


def test_a_body_over_the_size_cap_is_refused_before_parsing() -> None:
    assert "larger than" in reason(parse_alertmanager, b" " * (MAX_BODY_BYTES + 1))


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"version": "3"}, 'version: must be "4" (the Alertmanager webhook format), not "3"'),
        ({"version": 4}, 'version: must be "4" (the Alertmanager webhook format), not a number'),
        ({"version": MISSING}, 'version: must be "4" (the Alertmanager webhook format), not missing'),
        ({"version": None}, 'version: must be "4" (the Alertmanager webhook format), not null'),
        (
            {"version": "1"},
            'version: must be "4" (the Alertmanager webhook format), not "1" (a Grafana webhook?)',
        ),
        ({"groupKey": MISSING}, "groupKey: required field is missing"),
        ({"groupKey": None}, "groupKey: must be a string, not null"),
        ({"groupKey": ""}, "groupKey: String should have at least 1 character"),
        ({"groupKey": ["a"]}, "groupKey: must be a string, not a list"),
        ({"alerts": []}, "alerts: List should have at least 1 item"),
        ({"alerts": MISSING}, "alerts: required field is missing"),
        ({"alerts": {"0": {}}}, "alerts: must be a list, not an object"),
        ({"alerts": ["firing"]}, "alerts[0]: must be an object, not a string"),
        ({"status": "pending"}, "status: must be 'firing' or 'resolved', not \"pending\""),
        ({"status": MISSING}, "status: required field is missing"),
        ({"receiver": MISSING}, "receiver: required field is missing"),
        ({"receiver": 5}, "receiver: must be a string, not a number"),
        ({"truncatedAlerts": -1}, "truncatedAlerts: Input should be greater than or equal to 0"),
        ({"truncatedAlerts": "2"}, "truncatedAlerts: must be an integer, not a string"),
        ({"truncatedAlerts": True}, "truncatedAlerts: must be an integer, not a boolean"),
        ({"commonLabels": ["a"]}, "commonLabels: must be an object, not a list"),
        ({"commonLabels": {"severity": 2}}, "commonLabels.severity: must be a string, not a number"),
        ({"groupLabels": {"": "x"}}, 'groupLabels[""]: the name should have at least 1 character'),
        ({"groupLabels": {"x" * 300: "x"}}, "groupLabels"),
        ({"commonLabels": {"a b": None}}, 'commonLabels["a b"]: must be a string, not null'),
        ({"externalURL": "x" * 10000}, "externalURL: String should have at most 8192 characters"),
    ],
)
def test_every_malformed_top_level_field_is_named_in_the_reason(
    changes: dict[str, Any], expected: str
) -> None:
    assert reason(parse_alertmanager, am(**changes)).startswith(expected)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"labels": MISSING}, "alerts[0].labels: required field is missing"),
        ({"labels": {"severity": ["critical"]}}, "alerts[0].labels.severity: must be a string, not a list"),
        ({"labels": {"severity": True}}, "alerts[0].labels.severity: must be a string, not a boolean"),
        ({"labels": {"n": "x" * 5000}}, "alerts[0].labels.n: String should have at most 4096 characters"),
        (
            {"labels": {f"l{n}": "v" for n in range(MAX_LABELS + 1)}},
            "alerts[0].labels: must have at most 128 entries, not 129",
        ),
        (
            {"annotations": {"summary": {"text": "x"}}},
            "alerts[0].annotations.summary: must be a string, not an object",
        ),
        ({"startsAt": MISSING}, "alerts[0].startsAt: required field is missing"),
        (
            {"startsAt": None},
            "alerts[0].startsAt: must be an RFC 3339 timestamp (2024-05-01T12:00:00Z), not null",
        ),
        (
            {"startsAt": "yesterday"},
            'alerts[0].startsAt: must be an RFC 3339 timestamp (2024-05-01T12:00:00Z), not "yesterday"',
        ),
        (
            {"startsAt": 1700000000},
            "alerts[0].startsAt: must be an RFC 3339 timestamp (2024-05-01T12:00:00Z), not a number",
        ),
        (
            {"startsAt": "2023-02-30T00:00:00Z"},
            'alerts[0].startsAt: is not a valid time: "2023-02-30T00:00:00Z"',
        ),
        ({"startsAt": "2023-02-06T13:08:45"}, "alerts[0].startsAt: must be an RFC 3339 timestamp"),  # no zone
        ({"startsAt": "2023-02-06T13:08:45+99:00"}, "alerts[0].startsAt: is not a valid time"),
        ({"startsAt": "0001-01-01T00:00:00+02:00"}, "alerts[0].startsAt: is not a valid time"),
        ({"endsAt": "soon"}, "alerts[0].endsAt: must be an RFC 3339 timestamp"),
        ({"status": "pending"}, "alerts[0].status: must be 'firing' or 'resolved', not \"pending\""),
        ({"fingerprint": 12}, "alerts[0].fingerprint: must be a string, not a number"),
    ],
)
def test_every_malformed_alert_field_is_named_in_the_reason(changes: dict[str, Any], expected: str) -> None:
    assert reason(parse_alertmanager, am_alert(**changes)).startswith(expected)


def test_a_reason_says_how_many_more_problems_there_are_and_stays_short() -> None:
    alert = {"status": "x" * 100_000, "labels": 1, "startsAt": "y" * 100_000}

    message = reason(parse_alertmanager, am(alerts=[alert]))

    assert message.endswith("(and 2 more problems)") and len(message) < 200


def test_a_body_near_the_size_cap_parses_fast() -> None:
    full = {**ALERT, "labels": {f"l{n}": "v" * 16 for n in range(MAX_LABELS)}}
    raw = am(alerts=[full] * (MAX_BODY_BYTES // len(json.dumps(full)) - 1))
    assert len(raw) <= MAX_BODY_BYTES

    started = time.monotonic()
    notification = parse_alertmanager(raw)

    assert len(notification.alerts) == MAX_ALERTS and notification.truncated_alerts > 0
    assert time.monotonic() - started < 5


# --- Grafana ---


def test_grafanas_documented_body_parses_with_its_links() -> None:
    notification = parse_grafana(body(GRAFANA_BODY))

    assert notification.source == "grafana" and notification.group_key == "{}:{}"
    assert dict(notification.common_labels) == {"team": "blue"} and dict(notification.group_labels) == {}
    assert notification.title == "High memory usage and 1 more"  # no shared alertname
    first, second = notification.alerts
    assert first.fingerprint == "c6eadffa33fcdf37"
    assert first.starts_at == datetime(2021, 10, 12, 7, 51, 3, 157076, tzinfo=UTC)
    assert dict(first.links) == {"silence": GRAFANA_BODY["alerts"][0]["silenceURL"]}  # type: ignore[index]
    assert second.links["dashboard"] == "http://localhost/d/abcd?orgId=1"
    assert second.links["panel"].endswith("viewPanel=efgh")


def test_grafana_and_alertmanager_bodies_are_told_apart_by_version() -> None:
    assert 'not "4" (an Alertmanager webhook?)' in reason(parse_grafana, am())
    assert 'not "1" (a Grafana webhook?)' in reason(parse_alertmanager, body(GRAFANA_BODY))


def test_a_malformed_grafana_link_is_named() -> None:
    data = json.loads(json.dumps(GRAFANA_BODY))
    data["alerts"][1]["dashboardURL"] = 5

    assert reason(parse_grafana, body(data)) == "alerts[1].dashboardURL: must be a string, not a number"


# --- PagerDuty ---

PD_INCIDENT = {
    "id": "PGR0VU2",
    "type": "incident",
    "self": "https://api.pagerduty.com/incidents/PGR0VU2",
    "html_url": "https://acme.pagerduty.com/incidents/PGR0VU2",
    "number": 2,
    "status": "triggered",
    "incident_key": "d3640fbd41094207a1c11e58e46b1662",
    "created_at": "2020-04-09T15:16:27Z",
    "title": "A little bump in the road",
    "service": {
        "html_url": "https://acme.pagerduty.com/services/PF9KMXH",
        "id": "PF9KMXH",
        "self": "https://api.pagerduty.com/services/PF9KMXH",
        "summary": "API Service",
        "type": "service_reference",
    },
    "assignees": [{"id": "PTUXL6G", "summary": "User 123", "type": "user_reference"}],
    "escalation_policy": {"id": "PUS0KTE", "summary": "Default", "type": "escalation_policy_reference"},
    "teams": [{"id": "PFCVPS0", "summary": "Engineering", "type": "team_reference"}],
    "priority": {"id": "PSO75BM", "summary": "P1", "type": "priority_reference"},
    "urgency": "high",
    "conference_bridge": {
        "conference_number": "+1 1234123412,,987654321#",
        "conference_url": "https://example.com",
    },
    "resolve_reason": None,
}


def pd_event(event_type: str, data: Any = None, **changes: Any) -> bytes:
    """A V3 body like PagerDuty's documented example, of ``event_type``."""
    event = {
        "id": "5ac64822-4adc-4fda-ade0-410becf0de4f",
        "event_type": event_type,
        "resource_type": "incident",
        "occurred_at": "2020-10-02T18:45:22.169Z",
        "agent": {
            "html_url": "https://acme.pagerduty.com/users/PLH1HKV",
            "id": "PLH1HKV",
            "self": "https://api.pagerduty.com/users/PLH1HKV",
            "summary": "Tenex Engineer",
            "type": "user_reference",
        },
        "client": {"name": "PagerDuty"},
        "data": PD_INCIDENT if data is None else data,
        **changes,
    }
    return body({"event": event})


def pd_delivery(event_type: str, age: timedelta = timedelta(0)) -> bytes:
    """``pd_event`` as PagerDuty sends it now: an id of its own, ``occurred_at`` ``age`` ago (an
    event older than the replay window is refused: ``bot.alerts.replay``)."""
    occurred = (datetime.now(UTC) - age).isoformat().replace("+00:00", "Z")
    return pd_event(event_type, id=str(uuid.uuid4()), occurred_at=occurred)


# PagerDuty's test event, exactly as it arrives when a subscription is saved.
PAGEY_PING = b'{"event":{"id":"01FKZOXA868SHYEE4DVNWB5P9W","event_type":"pagey.ping","resource_type":"pagey","occurred_at":"2025-04-07T03:00:55.532Z","agent":{"id":"PVE0ZR9","type":"user_reference"},"client":null,"data":{"message":"Hello from your friend Pagey!","type":"ping"}}}'


def test_a_triggered_incident_is_one_firing_alert_with_routable_labels() -> None:
    notification = parse_pagerduty(pd_event("incident.triggered"))

    assert (notification.source, notification.event, notification.status) == (
        "pagerduty",
        "incident.triggered",
        "firing",
    )
    assert notification.actionable and notification.group_key == "PGR0VU2"
    assert notification.title == "A little bump in the road" and notification.receiver == "API Service"
    assert dict(notification.common_labels) == {
        "alertname": "A little bump in the road",
        "service": "API Service",
        "service_id": "PF9KMXH",
        "urgency": "high",
        "priority": "P1",
        "escalation_policy": "Default",
    }
    (alert,) = notification.alerts
    assert alert.fingerprint == "PGR0VU2" and alert.ends_at is None
    assert alert.starts_at == datetime(2020, 4, 9, 15, 16, 27, tzinfo=UTC)
    assert alert.links == {
        "incident": "https://acme.pagerduty.com/incidents/PGR0VU2",
        "service": "https://acme.pagerduty.com/services/PF9KMXH",
    }
    assert alert.annotations["agent"] == "Tenex Engineer"
    assert alert.annotations["incident_key"] == "d3640fbd41094207a1c11e58e46b1662"


def test_an_acknowledgement_is_firing_and_keeps_its_event_and_who() -> None:
    incident = {**PD_INCIDENT, "status": "acknowledged"}
    notification = parse_pagerduty(pd_event("incident.acknowledged", incident))

    assert (notification.status, notification.event) == ("firing", "incident.acknowledged")
    assert notification.alerts[0].annotations["status"] == "acknowledged"
    assert notification.alerts[0].annotations["agent"] == "Tenex Engineer"


def test_a_resolution_is_resolved_and_ends_when_it_occurred() -> None:
    incident = {**PD_INCIDENT, "status": "resolved"}
    notification = parse_pagerduty(pd_event("incident.resolved", incident))

    assert notification.status == "resolved"
    assert notification.alerts[0].ends_at == datetime(2020, 10, 2, 18, 45, 22, 169000, tzinfo=UTC)


def test_the_ping_parses_but_is_not_actionable() -> None:
    notification = parse_pagerduty(PAGEY_PING)

    assert notification.event == "pagey.ping" and not notification.actionable
    assert notification.alerts == () and notification.group_key == "01FKZOXA868SHYEE4DVNWB5P9W"


@pytest.mark.parametrize(
    ("event_type", "data"),
    [
        ("incident.priority_updated", PD_INCIDENT),
        (
            "incident.annotated",
            {"incident": {"id": "PGR0VU2"}, "id": "P2LA89X", "content": 5, "type": "incident_note"},
        ),
        ("service.updated", {"id": "PF9KMXH", "summary": "testing service updates", "type": "service"}),
        ("incident.future_thing", {"anything": ["goes", {"here": None}]}),
    ],
)
def test_other_event_types_parse_from_the_envelope_so_the_receiver_can_ignore_them(
    event_type: str, data: Any
) -> None:
    notification = parse_pagerduty(pd_event(event_type, data))

    assert notification.event == event_type and not notification.actionable
    assert notification.alerts == ()
    assert notification.group_key in {"PGR0VU2", "PF9KMXH", "5ac64822-4adc-4fda-ade0-410becf0de4f"}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (body({}), "event: required field is missing"),
        (body({"event": []}), "event: must be an object, not a list"),
        (pd_event("incident.triggered", id=None), "event.id: must be a string, not null"),
        (pd_event("", None), "event.event_type: String should have at least 1 character"),
        (
            pd_event("incident.triggered", occurred_at="2020-10-02"),
            "event.occurred_at: must be an RFC 3339 timestamp",
        ),
        (pd_event("incident.triggered", data=[]), "event.data: must be an object, not a list"),
        (
            pd_event("incident.triggered", {**PD_INCIDENT, "id": None}),
            "event.data.id: must be a string, not null",
        ),
        (
            pd_event("incident.triggered", {**PD_INCIDENT, "type": "incident_note"}),
            "event.data.type: must be 'incident'",
        ),
        (
            pd_event("incident.triggered", {**PD_INCIDENT, "title": ""}),
            "event.data.title: String should have at least 1",
        ),
        (
            pd_event("incident.triggered", {**PD_INCIDENT, "status": "open"}),
            "event.data.status: must be 'triggered', 'acknowledged' or 'resolved'",
        ),
        (
            pd_event("incident.triggered", {**PD_INCIDENT, "created_at": "now"}),
            "event.data.created_at: must be an RFC 3339",
        ),
        (
            pd_event("incident.triggered", {**PD_INCIDENT, "service": "API"}),
            "event.data.service: must be an object, not a string",
        ),
        (
            pd_event("incident.triggered", {"type": "incident"}),
            "event.data.id: required field is missing (and 2 more problems)",
        ),
    ],
)
def test_a_malformed_pagerduty_body_is_named_in_the_reason(raw: bytes, expected: str) -> None:
    assert reason(parse_pagerduty, raw).startswith(expected)
