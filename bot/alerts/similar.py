"""Which past incidents an alert's run starts from: the alert's name, labels, target and title,
searched for the alert's own channel by the code every new run uses (``bot.memory.notes``: the
first message's lines and the thread's "Similar:" note; a failed lookup is logged there)."""

from __future__ import annotations

from bot.alerts.lookup import alert_labels
from bot.alerts.store import RoutedNotification
from bot.memory.notes import similar_for_run
from bot.memory.similar import IncidentMemory, Similar


def alert_similar(memory: IncidentMemory | None, routed: RoutedNotification) -> list[Similar]:
    notification = routed.notification
    labels = alert_labels(notification)
    return similar_for_run(
        memory,
        routed.channel,
        query=notification.title,
        alert_name=labels.get("alertname", ""),
        labels=labels,
        targets=(routed.target,) if routed.target else (),
    )
