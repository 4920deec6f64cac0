"""The web process's alert webhooks: ``POST /alerts/alertmanager``, ``/alerts/grafana``, ``/alerts/pagerduty``.

Each request is authenticated first (the bearer token Alertmanager and Grafana send, or
PagerDuty's ``X-PagerDuty-Signature``): a bad one is 401 and nothing is stored. A malformed body
is 400 with the reason (the sender logs it and does not retry). A notification that matches no
route is acknowledged and logged, never posted. A routed one is stored and its job enqueued
(``bot.runs.queueing.NotificationQueue``) before the 2xx (``bot.alerts.store``); if Redis cannot
take it the answer is 503, so the sender retries. PagerDuty events other than incident triggered,
acknowledged and resolved (its pings) are acknowledged and ignored.

Webhooks are single-use (``bot.alerts.replay``): a routed delivery is claimed before it is stored.
One stored before (a replay, or a retry of an attempt whose 2xx was lost) is answered 200 and does
nothing; one another request is storing right now, 503 (the sender comes back); a PagerDuty event
older than its replay window, 400 with the reason. Replays and refusals are counted
(``chatops_webhook_replays_total``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

import redis

from bot.alerts.auth import bearer_ok, pagerduty_signature_ok
from bot.alerts.pagerduty import parse_pagerduty
from bot.alerts.payloads import PAGERDUTY_INCIDENT_EVENTS, Notification, parse_alertmanager, parse_grafana
from bot.alerts.replay import Delivery, delivery_of, too_old
from bot.alerts.routing import AlertRoutes, Route
from bot.alerts.store import AlertStore, RoutedNotification
from bot.claims import ClaimState
from bot.errors import AlertPayloadError
from bot.observability.run_metrics import RunMetrics
from bot.runs.queueing import NotificationQueue

log = logging.getLogger(__name__)
PATHS = {
    "/alerts/alertmanager": "alertmanager",
    "/alerts/grafana": "grafana",
    "/alerts/pagerduty": "pagerduty",
}
_PARSERS: dict[str, Callable[[bytes], Notification]] = {
    "alertmanager": parse_alertmanager,
    "grafana": parse_grafana,
    "pagerduty": parse_pagerduty,
}


@dataclass(frozen=True)
class Answer:
    status: int
    text: str


@dataclass
class AlertReceiver:
    store: AlertStore
    jobs: NotificationQueue
    routes: AlertRoutes
    token: str
    pagerduty_secrets: tuple[str, ...]
    target_names: Collection[str] = ()
    metrics: RunMetrics = field(default_factory=lambda: RunMetrics(None))
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    def receive(self, path: str, headers: Mapping[str, str], body: bytes) -> Answer:
        """``headers`` by lower-case name."""
        source = PATHS.get(path)
        if source is None:
            return Answer(404, "no such alert receiver")
        if not self._authentic(source, headers, body):
            log.warning("refused an alert webhook on %s: bad credentials", path)
            return Answer(401, "unauthorized")
        try:
            notification = _PARSERS[source](body)
        except AlertPayloadError as error:
            log.warning("refused an alert webhook on %s: %s", path, error.reason)
            return Answer(400, error.reason)
        if source == "pagerduty" and notification.event not in PAGERDUTY_INCIDENT_EVENTS:
            return Answer(200, f"ignored: {notification.event}")
        now = self.clock()
        stale = too_old(notification, now)
        if stale is not None:
            log.warning("refused an alert webhook on %s: %s", path, stale)
            self.metrics.webhook_replay(source, "refused")
            return Answer(400, stale)
        route = self.routes.route_for(notification)
        if route is None:
            log.info("alert %r (%s) matches no route: acknowledged, not posted", notification.title, source)
            return Answer(200, "no route")
        return self._store_once(self._routed(notification, route), delivery_of(notification, body, now))

    def _routed(self, notification: Notification, route: Route) -> RoutedNotification:
        first = notification.alerts[0] if notification.alerts else None
        return RoutedNotification(
            id=uuid.uuid4().hex,
            notification=notification,
            route=route.name,
            channel=route.channel,
            investigate=route.investigate,
            target=route.target_for(first, self.target_names) if first is not None else None,
            max_runs=route.storm.max_runs,
            window_seconds=float(route.storm.window_seconds),
        )

    def _store_once(self, routed: RoutedNotification, delivery: Delivery) -> Answer:
        """Claim the delivery, then store it with its job (``store_once``)."""
        refused = store_once(
            self.store,
            delivery,
            lambda: self.store.accept(
                routed, then=lambda pipe: self.jobs.enqueue(routed.id, pipeline=pipe), delivery=delivery
            ),
            self.metrics,
            f"alert notification ({routed.notification.title})",
        )
        return refused or Answer(200, "accepted")

    def _authentic(self, source: str, headers: Mapping[str, str], body: bytes) -> bool:
        if source == "pagerduty":
            return pagerduty_signature_ok(body, headers.get("x-pagerduty-signature"), self.pagerduty_secrets)
        return bearer_ok(headers.get("authorization"), self.token)


def store_once(
    store: AlertStore, delivery: Delivery, save: Callable[[], object], metrics: RunMetrics, what: str
) -> Answer | None:
    """Claim ``delivery``, then ``save`` it (which marks the claim done, ``AlertStore.accept`` or
    ``.delivered``, in the ``MULTI`` that stores it); ``None`` once saved, else the answer: a
    replay is 200 and does nothing, a delivery another request is storing now 503, and so is a
    Redis that failed (the claim released, so the sender's retry is taken as new rather than
    answered "already received"). Shared with the deploy markers' receiver (``bot.web.change_receiver``)."""
    try:
        claim = store.claim(delivery)
    except redis.RedisError as error:
        log.error("could not claim a %s webhook delivery (the sender will retry): %s", delivery.source, error)
        return Answer(503, "cannot store it now; retry")
    if claim is ClaimState.DONE:
        log.warning("ignored a replayed %s webhook delivery: %s", delivery.source, what)
        metrics.webhook_replay(delivery.source, "ignored")
        return Answer(200, "already received: ignored")
    if claim is ClaimState.IN_PROGRESS:
        return Answer(503, "this delivery is being stored now; retry")
    try:
        save()
    except redis.RedisError as error:
        store.release(delivery)
        log.error("could not store a %s (the sender will retry): %s", what, error)
        return Answer(503, "cannot store it now; retry")
    return None
