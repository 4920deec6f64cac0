"""What every look-up an alert's run starts from shares (its runbook: ``bot.alerts.runbooks``, past
incidents: ``bot.alerts.similar``, recent changes: ``bot.alerts.changes``): the alert's labels and
the rule that a look-up that fails is logged and the alert goes on without it. Each is a help,
never a reason for an alert thread not to open."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from bot.alerts.payloads import Notification
from bot.alerts.store import RoutedNotification

log = logging.getLogger(__name__)
T = TypeVar("T")


def alert_labels(notification: Notification) -> dict[str, str]:
    """The routing labels over the first alert's own: its ``alertname`` and what matches it."""
    first = notification.alerts[0] if notification.alerts else None
    return {**(first.labels if first else {}), **notification.group_labels, **notification.common_labels}


def started_at(notification: Notification) -> datetime | None:
    """When the notification's firing began: the earliest ``startsAt`` of its firing alerts."""
    starts = [alert.starts_at for alert in notification.alerts if alert.status != "resolved"]
    return min(starts) if starts else None


def looked_up(what: str, routed: RoutedNotification, lookup: Callable[[], T], otherwise: T) -> T:
    """``lookup()``, or ``otherwise`` when it raises (logged, naming ``what`` and the alert)."""
    try:
        return lookup()
    except Exception:
        log.exception("alert %s: the %s lookup failed", routed.notification.title, what)
        return otherwise
