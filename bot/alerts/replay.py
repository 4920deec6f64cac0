"""Webhooks are single-use: which delivery a request is, how long it is remembered, when it is too old.

A captured delivery sent again must not act again (a PagerDuty ``incident.triggered`` replayed
after the incident resolved would start a second investigation). The receiver claims each
routed delivery (``AlertStore.claim``, a two-phase ``SET NX PX``: ``bot.claims``) before storing
it; a delivery already claimed is answered 200 and does nothing. How a delivery is known, and for
how long, follows what each sender documents about its retries:

* **PagerDuty** signs the body, and the body names the event: ``event.id`` (the same on every
  attempt) and ``event.occurred_at``. PagerDuty retries a failed delivery "for up to 48 hours",
  then drops it (PagerDuty's developer docs, Webhooks > Behavior, "Temporary Errors and Retries";
  ``docs/webhooks/02-Behavior.md`` in github.com/PagerDuty/developer-docs).
  So an event is remembered until it is ``PAGERDUTY_MAX_AGE_SECONDS`` old (48 h, plus
  ``CLOCK_SKEW_SECONDS`` for the two clocks), and a delivery older than that is refused: it cannot
  be one of PagerDuty's retries. The ``X-Webhook-Id`` header PagerDuty suggests for dedupe is
  not signed, so it is not used: a replayer could change it at will.
* **Alertmanager and Grafana** authenticate with a bearer token, not a signature, and their body
  has no delivery id and no delivery time. A delivery is known by its group key, status, the
  alerts' fingerprints, ``startsAt`` and ``endsAt``, and a SHA-256 of the body, and remembered
  for ``GROUP_INTERVAL_SECONDS``: one notification's retries end before the group's next flush
  (Alertmanager's ``dispatch/group.go``: the flush's context times out after ``group_interval``;
  Grafana's contact points run on the same pipeline), and both default ``group_interval`` to 5
  minutes. Longer would be wrong: a firing notification is re-sent byte for byte at every
  ``repeat_interval``, and after a Prometheus restart a group can fire again with the same
  ``startsAt`` right after it resolved; both are legitimate, and both come at least one
  ``group_interval`` after the previous send. For the same reason there is no "too old" here:
  an old ``startsAt`` does not make a delivery old, and whoever holds the token can forge a
  fresh notification anyway (docs/ALERTS.md, "Replays").
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime

from bot.alerts.payloads import Notification

PAGERDUTY_RETRY_SECONDS = 48 * 3600  # PagerDuty retries a failed delivery for up to 48 hours
CLOCK_SKEW_SECONDS = 5 * 60  # PagerDuty's clock against ours, and one web host's against another's
PAGERDUTY_MAX_AGE_SECONDS = PAGERDUTY_RETRY_SECONDS + CLOCK_SKEW_SECONDS
GROUP_INTERVAL_SECONDS = 5 * 60  # Alertmanager's and Grafana's default group_interval


@dataclass(frozen=True)
class Delivery:
    """One delivery as the receiver remembers it: ``digest`` names it (hex SHA-256)."""

    source: str
    digest: str
    remember_seconds: float


def delivery_of(notification: Notification, body: bytes, now: datetime) -> Delivery:
    """The delivery ``body`` is, remembered until a replay of it would be refused as too old
    (PagerDuty) or for the sender's retry window (Alertmanager, Grafana)."""
    if notification.event_id and notification.occurred_at is not None:
        identity = f"event {notification.event_id}"
        too_old_at = notification.occurred_at.timestamp() + PAGERDUTY_MAX_AGE_SECONDS
        # Past ``too_old_at`` every web process refuses it, give or take their clocks' skew.
        remember = max(too_old_at - now.timestamp(), 0) + CLOCK_SKEW_SECONDS
    else:
        identity = _grouped_identity(notification, body)
        remember = GROUP_INTERVAL_SECONDS
    digest = hashlib.sha256(f"{notification.source}\n{identity}".encode()).hexdigest()
    return Delivery(notification.source, digest, remember)


def too_old(notification: Notification, now: datetime) -> str | None:
    """Why the delivery is refused as older than the replay window (``None``: it is not)."""
    if notification.occurred_at is None:
        return None
    age = (now - notification.occurred_at).total_seconds()
    if age <= PAGERDUTY_MAX_AGE_SECONDS:
        return None
    return (
        f"event.occurred_at: {notification.occurred_at.isoformat()} is {age / 3600:.1f} h old; PagerDuty "
        f"retries for {PAGERDUTY_RETRY_SECONDS // 3600} h, so this is a replay: refused"
    )


def _grouped_identity(notification: Notification, body: bytes) -> str:
    alerts = sorted(
        (
            alert.fingerprint,
            alert.status,
            alert.starts_at.isoformat(),
            alert.ends_at.isoformat() if alert.ends_at else "",
        )
        for alert in notification.alerts
    )
    digest = hashlib.sha256(body).hexdigest()
    return json.dumps([notification.group_key, notification.status, alerts, digest])
