"""Webhooks are single-use, on the real web app: a captured delivery sent again does nothing.

Through the served web process with PagerDuty's signature and Grafana's and Alertmanager's
bearer token: a replay after the group resolved is answered 200, stores nothing, starts no run,
posts nothing and is counted; a PagerDuty event older than its replay window is refused; a
delivery whose store failed after its claim is taken again when the sender retries.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from agent.scripted import FunctionModel
from bot.alerts.pagerduty import parse_pagerduty
from bot.alerts.payloads import parse_alertmanager, parse_grafana
from bot.alerts.replay import (
    CLOCK_SKEW_SECONDS,
    GROUP_INTERVAL_SECONDS,
    PAGERDUTY_MAX_AGE_SECONDS,
    delivery_of,
    too_old,
)
from bot.alerts.store import AlertStore, Group, group_id
from bot.observability.metrics import WEBHOOK_REPLAYS, MetricsStore
from bot.runs.queueing import alerts_queue_name, worker_queue
from tests.bot.alerts.conftest import ALERT_CHANNEL
from tests.bot.alerts.test_payloads import GRAFANA_BODY, pd_delivery
from tests.support.slack_bot import SlackBot
from tests.support.waiting import wait_for

TOKEN = "alert-token-0123456789abcdef"
SECRET = "pd-secret-0123456789abcdef"
ROUTES = f"""
alerts:
  routes:
    - name: pager
      matchers: ['urgency=~"high|low"']
      channel: {ALERT_CHANNEL}
      investigate: auto
    - name: grafana
      matchers: ['team="blue"']
      channel: {ALERT_CHANNEL}
      investigate: auto
    - name: sre
      matchers: ['team="sre"']
      channel: {ALERT_CHANNEL}
      investigate: auto
"""


@pytest.fixture
def web(make_bot: Callable[..., SlackBot], tmp_path: Path) -> SlackBot:
    routes = tmp_path / "alerts.yaml"
    routes.write_text(ROUTES)
    model = FunctionModel(lambda request: "Nothing left to do: it recovered.", model="answers")
    return make_bot(
        models=[model],
        tools=[],
        chatops_alerts_file=routes,
        chatops_alerts_token=TOKEN,
        chatops_pagerduty_secret=[SECRET],
    )


def post(bot: SlackBot, path: str, body: bytes, **headers: str) -> httpx.Response:
    assert bot.server is not None
    return httpx.post(f"{bot.server.url}{path}", content=body, headers=headers, trust_env=False, timeout=10)


def pagerduty(bot: SlackBot, body: bytes, webhook_id: str = "") -> httpx.Response:
    signature = "v1=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {"X-PagerDuty-Signature": signature, "X-Webhook-Id": webhook_id or uuid.uuid4().hex}
    return post(bot, "/alerts/pagerduty", body, **headers)


def bearer(bot: SlackBot, path: str, body: bytes) -> httpx.Response:
    return post(bot, path, body, Authorization=f"Bearer {TOKEN}")


def grouped(template: dict[str, Any], status: str) -> bytes:
    """A firing notification of ``template`` (Grafana's or Alertmanager's), or its resolution."""
    alerts = [
        {
            **alert,
            "status": status,
            "endsAt": "2026-12-01T10:05:00Z" if status == "resolved" else alert["endsAt"],
        }
        for alert in template["alerts"]
    ]
    return json.dumps({**template, "status": status, "alerts": alerts}).encode()


ALERTMANAGER = {
    "version": "4",
    "groupKey": '{}:{alertname="DiskFull"}',
    "truncatedAlerts": 0,
    "status": "firing",
    "receiver": "chatops",
    "groupLabels": {"alertname": "DiskFull"},
    "commonLabels": {"alertname": "DiskFull", "team": "sre"},
    "commonAnnotations": {"summary": "disk full on web-03"},
    "externalURL": "http://alertmanager.example",
    "alerts": [
        {
            "status": "firing",
            "labels": {"alertname": "DiskFull", "team": "sre", "instance": "web-03:9100"},
            "annotations": {"summary": "disk full on web-03"},
            "startsAt": "2026-12-01T10:00:00Z",
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "http://prometheus.example/graph?g0.expr=up",
            "fingerprint": "6d703a39bc436f16",
        }
    ],
}


def group_of(bot: SlackBot, source: str, key: str) -> Group | None:
    bot.work()
    return AlertStore(bot.redis, bot.keys).group(group_id(source, key))


def investigated(bot: SlackBot, source: str, key: str) -> Group:
    """The group once its run has answered (the run is over: a new firing would start another)."""

    def finished() -> Group | None:
        group = group_of(bot, source, key)
        record = bot.service.get(group.run_id) if group is not None and group.run_id else None
        return group if record is not None and record.status.terminal else None

    return wait_for(finished, what="the alert's investigation")


def replays_counted(bot: SlackBot) -> dict[tuple[str, str], float]:
    raw = MetricsStore(bot.redis, bot.keys).read().get(WEBHOOK_REPLAYS, {})
    return {tuple(json.loads(labels)): float(value) for labels, value in raw.items()}


def notifications_stored(bot: SlackBot) -> list[Any]:
    return list(bot.redis.scan_iter(match=f"{bot.keys.prefix}alerts:notification:*"))


def runs(bot: SlackBot) -> int:
    """Runs ever created (their records: ``{p}run:{id}``, not ``{p}run:{id}:messages``...)."""
    start = f"{bot.keys.prefix}run:"
    return sum(":" not in key.decode()[len(start) :] for key in bot.redis.scan_iter(match=f"{start}*"))


def roots(bot: SlackBot) -> list[dict[str, Any]]:
    """The channel's top-level messages: one per alert thread."""
    return list(bot.control.messages(ALERT_CHANNEL))


def assert_replay_ignored(bot: SlackBot, source: str, key: str, resolved: Group, times: int) -> None:
    """Nothing moved: no notification stored or queued, the group still resolved, no new run, no
    new thread, and every replay counted."""
    assert not notifications_stored(bot)
    after = group_of(bot, source, key)
    assert after is not None and after.status == "resolved"
    assert (after.run_id, after.notifications, after.root_ts) == (
        resolved.run_id,
        resolved.notifications,
        resolved.root_ts,
    )
    assert runs(bot) == 1
    assert len(roots(bot)) == 1
    assert replays_counted(bot) == {(source, "ignored"): float(times)}


def test_a_pagerduty_trigger_replayed_after_the_incident_resolved_is_ignored_and_counted(
    web: SlackBot,
) -> None:
    triggered = pd_delivery("incident.triggered")
    assert pagerduty(web, triggered).text == "accepted"
    first = investigated(web, "pagerduty", "PGR0VU2")
    assert pagerduty(web, pd_delivery("incident.resolved")).text == "accepted"
    resolved = wait_for(lambda: (g := group_of(web, "pagerduty", "PGR0VU2")) and g.status == "resolved" and g)
    assert resolved.run_id == first.run_id
    # The captured delivery, signed by PagerDuty, sent three times; a fresh X-Webhook-Id (not
    # signed) each time changes nothing.
    for _ in range(3):
        answer = pagerduty(web, triggered)
        assert (answer.status_code, answer.text) == (200, "already received: ignored")
    assert_replay_ignored(web, "pagerduty", "PGR0VU2", resolved, times=3)


def test_a_grafana_notification_replayed_after_its_group_resolved_is_ignored(web: SlackBot) -> None:
    firing = grouped(GRAFANA_BODY, "firing")
    assert bearer(web, "/alerts/grafana", firing).text == "accepted"
    investigated(web, "grafana", "{}:{}")
    assert bearer(web, "/alerts/grafana", grouped(GRAFANA_BODY, "resolved")).text == "accepted"
    resolved = wait_for(lambda: (g := group_of(web, "grafana", "{}:{}")) and g.status == "resolved" and g)
    answer = bearer(web, "/alerts/grafana", firing)
    assert (answer.status_code, answer.text) == (200, "already received: ignored")
    assert_replay_ignored(web, "grafana", "{}:{}", resolved, times=1)


def test_an_alertmanager_notification_replayed_after_its_group_resolved_is_ignored(web: SlackBot) -> None:
    key = ALERTMANAGER["groupKey"]
    assert isinstance(key, str)
    firing = grouped(ALERTMANAGER, "firing")
    assert bearer(web, "/alerts/alertmanager", firing).text == "accepted"
    investigated(web, "alertmanager", key)
    assert bearer(web, "/alerts/alertmanager", grouped(ALERTMANAGER, "resolved")).text == "accepted"
    resolved = wait_for(lambda: (g := group_of(web, "alertmanager", key)) and g.status == "resolved" and g)
    for _ in range(2):
        answer = bearer(web, "/alerts/alertmanager", firing)
        assert (answer.status_code, answer.text) == (200, "already received: ignored")
    assert_replay_ignored(web, "alertmanager", key, resolved, times=2)


def test_a_pagerduty_event_older_than_its_replay_window_is_refused(web: SlackBot) -> None:
    """Past PagerDuty's 48 hours of retries an event can only be a replay: 400 with the reason,
    nothing stored, counted. One still inside the window is a retry PagerDuty may send: taken."""
    window = timedelta(seconds=PAGERDUTY_MAX_AGE_SECONDS)
    stale = pagerduty(web, pd_delivery("incident.triggered", age=window + timedelta(minutes=10)))
    assert stale.status_code == 400
    assert stale.text.startswith("event.occurred_at: ") and "so this is a replay: refused" in stale.text
    web.work()
    assert not list(web.redis.scan_iter(match=f"{web.keys.prefix}alerts:*"))
    assert replays_counted(web) == {("pagerduty", "refused"): 1.0}
    late = pagerduty(web, pd_delivery("incident.triggered", age=window - timedelta(minutes=10)))
    assert (late.status_code, late.text) == (200, "accepted")


def test_a_delivery_whose_store_failed_after_its_claim_is_taken_when_the_sender_retries(
    web: SlackBot, queue_name: str
) -> None:
    """A Redis error after the claim (here: a Redis writer broke the alerts' queue, so the job's
    RPUSH fails inside the MULTI) answers 503 and releases the claim: the retry is stored, not
    answered "already received"."""
    queue_key = worker_queue(alerts_queue_name(queue_name), web.redis).key
    web.redis.set(queue_key, "not a list")
    try:
        body = grouped(ALERTMANAGER, "firing")
        failed = bearer(web, "/alerts/alertmanager", body)
        assert failed.status_code == 503 and "retry" in failed.text
    finally:
        web.redis.delete(queue_key)
        forget_half_enqueued_jobs(web)
    assert not list(web.redis.scan_iter(match=f"{web.keys.prefix}alerts:delivery:*"))
    retried = bearer(web, "/alerts/alertmanager", body)
    assert (retried.status_code, retried.text) == (200, "accepted")
    group = investigated(web, "alertmanager", str(ALERTMANAGER["groupKey"]))
    assert group.status == "firing" and len(roots(web)) == 1
    assert replays_counted(web) == {}


def forget_half_enqueued_jobs(bot: SlackBot) -> None:
    """The failed ``MULTI`` still wrote the job's hash (Redis does not roll back): RQ's keys are
    not under the test's prefix, so the fixtures would leave it behind."""
    stored = [key.decode().rsplit(":", 1)[1] for key in notifications_stored(bot)]
    for job in bot.redis.scan_iter(match="rq:job:*", _type="hash"):
        description = (bot.redis.hget(job, "description") or b"").decode()
        if any(notification in description for notification in stored):
            bot.redis.delete(job)


def test_a_claim_held_by_another_request_is_answered_503_so_the_sender_comes_back(
    web: SlackBot, redis_client: redis.Redis
) -> None:
    """While another request is storing the same delivery (its claim ``pending``), a second copy
    is neither stored twice nor told "already received" for an attempt that may yet fail."""
    body = grouped(ALERTMANAGER, "firing")
    assert bearer(web, "/alerts/alertmanager", body).text == "accepted"
    (claim,) = redis_client.scan_iter(match=f"{web.keys.prefix}alerts:delivery:alertmanager:*")
    ttl = redis_client.pttl(claim)
    redis_client.set(claim, "pending", px=ttl)
    answer = bearer(web, "/alerts/alertmanager", body)
    assert (answer.status_code, answer.text) == (503, "this delivery is being stored now; retry")


@pytest.mark.parametrize("age_hours", [0.0, 1.0, 47.9, 48.08])
def test_a_pagerduty_event_is_remembered_at_least_until_it_is_refused_as_too_old(age_hours: float) -> None:
    """No gap between the memory and the refusal: when the claim expires, a replay is too old ..."""
    now = datetime.now(UTC)
    notification = parse_pagerduty(pd_delivery("incident.triggered", age=timedelta(hours=age_hours)))
    assert too_old(notification, now) is None
    forgotten_at = now + timedelta(seconds=delivery_of(notification, b"", now).remember_seconds)
    # ... even by a web host whose clock is behind by almost the skew allowed.
    assert too_old(notification, forgotten_at - timedelta(seconds=CLOCK_SKEW_SECONDS - 1)) is not None


def test_an_alertmanager_delivery_is_its_exact_body_for_the_senders_retry_window() -> None:
    now = datetime.now(UTC)
    firing = grouped(ALERTMANAGER, "firing")
    first = delivery_of(parse_alertmanager(firing), firing, now)
    assert first == delivery_of(parse_alertmanager(firing), firing, now + timedelta(hours=1))
    assert first.remember_seconds == GROUP_INTERVAL_SECONDS
    resolved = grouped(ALERTMANAGER, "resolved")
    reworded = firing.replace(b"disk full on web-03", b"disk 99% full on web-03")
    others = {delivery_of(parse_alertmanager(body), body, now).digest for body in (resolved, reworded)}
    as_grafana = {**ALERTMANAGER, "version": "1"}
    grafana = json.dumps(as_grafana).encode()
    others.add(delivery_of(parse_grafana(grafana), grafana, now).digest)
    assert first.digest not in others and len(others) == 3
