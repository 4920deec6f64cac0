"""The alert job: a worker applies one accepted notification to its group's thread.

Enqueued by the web receiver (``bot.alerts.receiver``) through the one queueing module
(``bot.runs.queueing.NotificationQueue``), on the alerts' own queue (taken by every worker before
the runs' queue); it takes the group's lock (notifications of one group are applied one at a
time, in any worker) and, when another worker holds it, comes back a second later.

``AlertJobs`` is the alerts' seam of a worker's runtime (``Runtime.alerts``): the alert threads'
presenter (Slack, or the log on purpose) and what a run that answered tells its alert's root. A
job on a runtime without it fails loudly; a worker started on such a runtime refuses to start
(``bot.ops.compose``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from bot.alerts.store import AlertStore, group_id
from bot.alerts.threads import AlertThreads
from bot.errors import BotConfigurationError
from bot.runs.incident_capture import AlertFacts
from bot.runs.presenter import AlertPresenter
from bot.runs.queueing import NotificationQueue
from bot.runs.runtime import AlertSeam, Runtime, current_runtime

log = logging.getLogger(__name__)
_LOCKED_RETRY_SECONDS = 1.0


@dataclass(frozen=True)
class AlertJobs:
    """``Runtime.alerts``: the alert threads shown by ``presenter`` (``bot.runs.runtime.AlertSeam``)."""

    presenter: AlertPresenter

    def run_answered(self, runtime: Runtime, run_id: str, answer: str) -> None:
        """A run that investigated an alert shows its answer on the alert's root message (a run of a
        thread nobody alerted does nothing here)."""
        threads_for(runtime, self).run_finished(run_id, answer)

    def alert_facts(self, runtime: Runtime, run_id: str) -> AlertFacts | None:
        """The alert a run investigated, for its incident (``bot.runs.incident_capture``): its
        name (``alertname``, else the group's title), the labels its root shows, its fingerprints."""
        group = AlertStore(runtime.redis, runtime.keys, runtime.redact).group_of_run(run_id)
        if group is None:
            return None
        try:
            shown = json.loads(group.view) if group.view else {}
            labels = {str(k): str(v) for k, v in shown.get("labels") or []}
        except (ValueError, TypeError, AttributeError):
            labels = {}
        return AlertFacts(labels.get("alertname") or group.title, labels, tuple(group.fingerprints))


def seam_of(runtime: Runtime) -> AlertSeam:
    """The runtime's alerts' seam, or a configuration error naming what is missing."""
    if runtime.alerts is None:
        raise BotConfigurationError(
            "this worker's runtime has no alert seam (Runtime.alerts), so it cannot show alert threads: "
            "build it with bot.alerts.jobs.AlertJobs(presenter)"
        )
    return runtime.alerts


def threads_for(runtime: Runtime, alerts: AlertSeam) -> AlertThreads:
    store = AlertStore(runtime.redis, runtime.keys, runtime.redact)
    return AlertThreads(
        store,
        runtime.service(),
        alerts.presenter,
        runtime.clock,
        runbooks=runtime.runbooks,
        memory=runtime.memory,
        changes=runtime.changes,
    )


def handle_notification(notification_id: str) -> str:
    """The RQ job: apply the notification, once, under its group's lock (what its run would start
    from is looked up before the lock is taken)."""
    runtime = current_runtime()
    alerts = seam_of(runtime)
    store = AlertStore(runtime.redis, runtime.keys, runtime.redact)
    routed = store.notification(notification_id)
    if routed is None:
        return "gone"  # applied already (a retried job), or expired
    gid = group_id(routed.notification.source, routed.notification.group_key)
    threads = threads_for(runtime, alerts)
    # Looked up before the lock (a runbook_url may be slow to fetch; a click waits on the lock),
    # and only for a firing that opens or reopens a thread: a repeat needs none. Should the group
    # change before the lock is taken, ``handle`` looks them up itself.
    opens = routed.notification.status != "resolved" and threads.opens_thread(store.group(gid))
    points = threads.starting_points(routed) if opens else None
    token = store.lock(gid)
    if token is None:
        queue = NotificationQueue(runtime.redis, runtime.options.queue_name)
        queue.enqueue(notification_id, delay=_LOCKED_RETRY_SECONDS)
        return "deferred"
    try:
        outcome = threads.handle(routed, points)
        store.forget(notification_id)
    finally:
        store.unlock(gid, token)
    log.info("alert %s (%s): %s", routed.notification.title, routed.route, outcome)
    return outcome
