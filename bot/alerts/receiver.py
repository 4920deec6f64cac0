"""The web process's alert webhooks: ``POST /alerts/alertmanager``, ``/alerts/grafana``, ``/alerts/pagerduty``.

Each request is authenticated first (the bearer token Alertmanager and Grafana send, or
PagerDuty's ``X-PagerDuty-Signature``): a bad one is 401 and nothing is stored. A malformed body
is 400 with the reason (the sender logs it and does not retry). A notification that matches no
route is acknowledged and logged, never posted. A routed one is stored and its job enqueued
before the 2xx (``bot.alerts.store``, ``bot.alerts.jobs``); if Redis cannot take it the answer is
503, so the sender retries. PagerDuty events other than incident triggered, acknowledged and
resolved (its pings) are acknowledged and ignored.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

import redis
from rq import Queue

from bot.alerts.auth import bearer_ok, pagerduty_signature_ok
from bot.alerts.jobs import enqueue
from bot.alerts.pagerduty import parse_pagerduty
from bot.alerts.payloads import PAGERDUTY_INCIDENT_EVENTS, Notification, parse_alertmanager, parse_grafana
from bot.alerts.routing import AlertRoutes
from bot.alerts.store import AlertStore, RoutedNotification
from bot.errors import AlertPayloadError

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
    queue: Queue
    routes: AlertRoutes
    token: str
    pagerduty_secrets: tuple[str, ...]
    target_names: Collection[str] = ()

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
        route = self.routes.route_for(notification)
        if route is None:
            log.info("alert %r (%s) matches no route: acknowledged, not posted", notification.title, source)
            return Answer(200, "no route")
        first = notification.alerts[0] if notification.alerts else None
        target = route.target_for(first, self.target_names) if first is not None else None
        routed = RoutedNotification(
            id=uuid.uuid4().hex,
            notification=notification,
            route=route.name,
            channel=route.channel,
            investigate=route.investigate,
            target=target,
            max_runs=route.storm.max_runs,
            window_seconds=float(route.storm.window_seconds),
        )
        try:
            self.store.accept(routed, then=lambda pipe: enqueue(self.queue, routed.id, pipeline=pipe))
        except redis.RedisError as error:
            log.error("could not store an alert notification (the sender will retry): %s", error)
            return Answer(503, "cannot store the notification now; retry")
        return Answer(200, "accepted")

    def _authentic(self, source: str, headers: Mapping[str, str], body: bytes) -> bool:
        if source == "pagerduty":
            return pagerduty_signature_ok(body, headers.get("x-pagerduty-signature"), self.pagerduty_secrets)
        return bearer_ok(headers.get("authorization"), self.token)
