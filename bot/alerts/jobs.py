"""The alert job: a worker applies one accepted notification to its group's thread.

Enqueued by the web receiver (``bot.alerts.receiver``) on the alerts' own queue (taken by every
worker before the runs' queue: ``bot.runs.queueing.worker_queue_names``); it takes the group's
lock (notifications of one group are applied one at a time, in any worker) and, when another
worker holds it, comes back a second later. The ``AlertPresenter`` is the worker runtime's
``extras["alerts"]`` (Slack, or the log without a token).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from redis.client import Pipeline
from rq import Queue, Retry

from bot.alerts.presenter import AlertPresenter, LoggingAlertPresenter
from bot.alerts.store import AlertStore, group_id
from bot.alerts.threads import AlertThreads
from bot.runs.queueing import alerts_queue_name, worker_queue
from bot.runs.runtime import Runtime, current_runtime

log = logging.getLogger(__name__)
PRESENTER = "alerts"  # the key of the runtime's extras holding the AlertPresenter
_LOCKED_RETRY_SECONDS = 1.0
_JOB_TIMEOUT = 120


def alerts_queue(runtime: Runtime) -> Queue:
    """The notifications' own queue on the runtime's connection (workers take it before the runs')."""
    return worker_queue(alerts_queue_name(runtime.options.queue_name), runtime.redis)


def threads_for(runtime: Runtime) -> AlertThreads:
    presenter = runtime.extras.get(PRESENTER)
    if not isinstance(presenter, AlertPresenter):
        presenter = LoggingAlertPresenter()
    store = AlertStore(runtime.redis, runtime.keys, runtime.redact)
    return AlertThreads(store, runtime.service(), presenter, runtime.clock)


def handle_notification(notification_id: str) -> str:
    """The RQ job: apply the notification, once, under its group's lock."""
    runtime = current_runtime()
    store = AlertStore(runtime.redis, runtime.keys, runtime.redact)
    routed = store.notification(notification_id)
    if routed is None:
        return "gone"  # applied already (a retried job), or expired
    gid = group_id(routed.notification.source, routed.notification.group_key)
    token = store.lock(gid)
    if token is None:
        enqueue(alerts_queue(runtime), notification_id, delay=_LOCKED_RETRY_SECONDS)
        return "deferred"
    try:
        outcome = threads_for(runtime).handle(routed)
        store.forget(notification_id)
    finally:
        store.unlock(gid, token)
    log.info("alert %s (%s): %s", routed.notification.title, routed.route, outcome)
    return outcome


def announce_answer(runtime: Runtime, run_id: str, answer: str) -> None:
    """``Runtime.on_finished``: a run that investigated an alert shows its answer on the alert's
    root message (a run of a thread nobody alerted does nothing here)."""
    threads = threads_for(runtime)
    threads.run_finished(run_id, answer)


def enqueue(
    queue: Queue, notification_id: str, *, delay: float | None = None, pipeline: Pipeline | None = None
) -> None:
    """The notification's job; with ``pipeline`` it goes out with the caller's other writes."""
    options = {
        "job_timeout": _JOB_TIMEOUT,
        "retry": Retry(max=3, interval=[1, 5, 15]),
        "description": f"alert notification {notification_id}",
        "failure_ttl": 7 * 24 * 3600,
    }
    if delay:
        queue.enqueue_in(timedelta(seconds=delay), handle_notification, notification_id, **options)
    else:
        queue.enqueue(handle_notification, notification_id, pipeline=pipeline, **options)
