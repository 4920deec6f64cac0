"""One thread per alert group: what a notification does to it, handled by a worker job.

* The first firing notification of a group posts the root message in the route's channel and
  starts a run in its thread with the alert as the first message (``investigate: auto``, within
  the route's storm limit), or offers an **Investigate** button (``investigate: button``, or over
  the storm limit, with the count of what was held back), whose run is told the same.
* A repeat (no new alert in the group) changes nothing but the root's "last notified".
* New alerts joining the group are posted in the thread and injected into the running run.
* ``resolved`` redraws the root as resolved and tells a running run; a group firing again
  within ``REOPEN_SECONDS`` reopens the same thread (told to its run if one is still going, else
  a new run or the button again), later a new one is opened.
* When the run finishes, its answer's first lines are shown on the root message too.

Everything an alert says is the sender's text: it reaches the model as the run's first message
(stored redacted, like a mention) and Slack through the presenter, which shows it inert.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from bot.alerts.changes import alert_changes, change_lines, change_note
from bot.alerts.payloads import Alert, Notification
from bot.alerts.runbooks import alert_runbook, runbook_lines
from bot.alerts.similar import alert_similar
from bot.alerts.store import AlertStore, Group, RoutedNotification, group_id
from bot.changes.reader import ChangeReader
from bot.errors import AlertGroupBusyError
from bot.memory.notes import similar_lines, similar_note
from bot.memory.similar import IncidentMemory, Similar
from bot.runs.presenter import AlertPresenter, AlertView
from bot.runs.service import RunService
from tools.changes.record import Change
from tools.runbooks import AlertRunbook, RunbookLibrary

StartingPoints = tuple[AlertRunbook | None, list[Similar], list[Change]]
"""What an alert's run starts from (``AlertThreads.starting_points``)."""

REOPEN_SECONDS = 3600.0
SENDERS = {"alertmanager": "Alertmanager", "grafana": "Grafana", "pagerduty": "PagerDuty"}
_SUMMARY_CHARS = 600
_MAX_LISTED = 10
_LOCK_POLL_SECONDS = 0.05


@dataclass
class AlertThreads:
    store: AlertStore
    service: RunService
    presenter: AlertPresenter
    clock: Callable[[], float] = time.time
    lock_wait_seconds: float = 3.0  # how long a click waits for a notification job to finish
    runbooks: RunbookLibrary | None = None  # the runbook an alert's run starts from (``bot.alerts.runbooks``)
    memory: IncidentMemory | None = None  # past incidents an alert's run starts from (``bot.alerts.similar``)
    changes: ChangeReader | None = None  # what changed on its target before it (``bot.alerts.changes``)

    def handle(self, routed: RoutedNotification, points: StartingPoints | None = None) -> str:
        """Apply one notification to its group's thread; what it did (for the job's result).
        ``points``: what a firing's run starts from, looked up before the group's lock was taken
        (``starting_points``; looked up here when not given)."""
        notification = routed.notification
        gid = group_id(notification.source, notification.group_key)
        group = self.store.group(gid)
        now = self.clock()
        if group is None or (group.status == "resolved" and now - group.resolved_at > REOPEN_SECONDS):
            if notification.status == "resolved":
                return "resolved-unknown"  # nothing open to close (it fired before we listened)
            return self._open(routed, Group(gid, notification.source, notification.group_key), points)
        group.notifications += 1
        group.last_notified_at = now
        if notification.status == "resolved":
            return self._resolve(routed, group)
        if group.status == "resolved":
            return self._reopen(routed, group, points)
        return self._join(routed, group)

    # -- the moves ------------------------------------------------------------------------------

    def _open(self, routed: RoutedNotification, group: Group, points: StartingPoints | None) -> str:
        notification = routed.notification
        group.channel, group.title = routed.channel, notification.title
        group.fingerprints = fingerprints(notification)
        group.resolved_fingerprints = ended_fingerprints(notification)
        group.notifications, group.last_notified_at, group.status = 1, self.clock(), "firing"
        found, similar, changed = points or self.starting_points(routed)
        group.brief = alert_message(routed, found, [*similar_lines(similar), *change_lines(routed, changed)])
        group.asked = alert_request(routed)
        group.source_url = source_url(routed)
        auto = self._admitted(routed, group)
        shown = replace(
            view(routed, group, button=not auto),
            runbook=found.title if found else "",
            changes=change_note(changed),
        )
        group.view = shown.encode()
        root = self.presenter.post_alert(routed.channel, shown)
        group.root_ts = root or f"alert-{group.id}"  # a headless presenter: the thread is ours alone
        if similar and root:
            self._similar_note(routed.channel, root, similar)
        if auto:
            self._investigate(group, requester=SENDERS.get(notification.source, "alert"))
        self.store.save(group)
        return "opened" if auto else "held"

    def _similar_note(self, channel: str, root: str, similar: list[Similar]) -> None:
        """The thread's "Similar:" note: with Forget buttons where the presenter has them (Slack's),
        recorded so that a click on one may forget its incident (``bot.memory.store``)."""
        post = getattr(self.presenter, "post_similar_note", None)  # a custom presenter may not have it
        if not callable(post):
            self.presenter.post_alert_note(channel, root, similar_note(similar))
            return
        ts = post(channel, root, similar)
        if ts and self.memory is not None:
            self.memory.store.remember_note(channel, str(ts), [s.incident.id for s in similar])

    def _join(self, routed: RoutedNotification, group: Group) -> str:
        """A firing notification of an open group: alerts that joined it, fired again or ended
        (Alertmanager lists an alert that resolved while others still fire) are told to the
        thread and the run; anything else is a repeat."""
        alerts = routed.notification.alerts
        firing = [alert for alert in alerts if alert.status != "resolved"]
        new = [alert for alert in firing if alert.fingerprint not in group.fingerprints]
        back = [alert for alert in firing if alert.fingerprint in group.resolved_fingerprints]
        ended = [
            alert
            for alert in alerts
            if alert.status == "resolved"
            and alert.fingerprint in group.fingerprints
            and alert.fingerprint not in group.resolved_fingerprints
        ]
        if not (new or back or ended):
            self._redraw(routed, group)
            self.store.save(group)
            return "repeat"
        group.fingerprints += [alert.fingerprint for alert in new]
        returned = {alert.fingerprint for alert in back}
        group.resolved_fingerprints = [
            *(fp for fp in group.resolved_fingerprints if fp not in returned),
            *(alert.fingerprint for alert in ended),
        ]
        self._tell(routed, group, self._changes(group, new, back, ended))
        self._redraw(routed, group)
        self.store.save(group)
        return "joined" if new else "changed"

    def _changes(self, group: Group, new: list[Alert], back: list[Alert], ended: list[Alert]) -> str:
        parts = []
        if new:
            parts.append(f"{len(new)} more alert(s) joined this group:\n" + listed(new))
        if back:
            parts.append(f"{len(back)} alert(s) of this group are firing again:\n" + listed(back))
        if ended:
            when = time.strftime("%H:%M:%S UTC", time.gmtime(self.clock()))
            still = len(group.fingerprints) - len(group.resolved_fingerprints)
            parts.append(
                f"{len(ended)} alert(s) of this group resolved at {when}; {still} still firing:\n"
                + listed(ended)
            )
        return "\n".join(parts)

    def _resolve(self, routed: RoutedNotification, group: Group) -> str:
        if group.status == "resolved":
            self.store.save(group)
            return "repeat"
        group.status, group.resolved_at = "resolved", self.clock()
        group.resolved_fingerprints = []  # the whole group ended: no part of it is still firing
        when = time.strftime("%H:%M:%S UTC", time.gmtime(group.resolved_at))
        self._tell(routed, group, f"The alert resolved at {when} ({routed.notification.title}).")
        self._redraw(routed, group)
        self.store.save(group)
        return "resolved"

    def _reopen(self, routed: RoutedNotification, group: Group, points: StartingPoints | None) -> str:
        group.status, group.resolved_at = "firing", 0.0
        group.fingerprints = list(dict.fromkeys([*group.fingerprints, *fingerprints(routed.notification)]))
        group.resolved_fingerprints = ended_fingerprints(routed.notification)
        found, similar, changed = points or self.starting_points(routed)
        group.brief = alert_message(routed, found, [*similar_lines(similar), *change_lines(routed, changed)])
        group.asked = alert_request(routed)
        group.source_url = source_url(routed)
        last = AlertView.decode(group.view)
        if last is not None:  # this firing's changes on the root, not the last one's
            group.view = replace(last, changes=change_note(changed)).encode()
        self._tell(routed, group, "The alert is firing again:\n" + listed(routed.notification.alerts))
        over = self.service.active_run(group.channel, group.root_ts) is None
        if over:
            # The last investigation is over: this firing is a new one. It gets a run of its own
            # within the storm limit, or the Investigate button again (``_redraw``), never neither.
            group.run_id = ""
            if self._admitted(routed, group):
                self._investigate(group, requester=SENDERS.get(routed.notification.source, "alert"))
        self._redraw(routed, group, same_investigation=not over)
        self.store.save(group)
        return "reopened"

    @staticmethod
    def opens_thread(group: Group | None) -> bool:
        """Whether a firing notification of ``group`` opens or reopens its thread (no group yet,
        or a resolved one): the firings whose run needs its starting points."""
        return group is None or group.status == "resolved"

    def starting_points(self, routed: RoutedNotification) -> StartingPoints:
        """What the alert's run starts from: its runbook, past incidents, recent changes. Looked up
        before the group's lock is taken (``bot.alerts.jobs``): a ``runbook_url`` fetched from a
        slow wiki must not hold the lock an Investigate click waits on."""
        return (
            alert_runbook(self.runbooks, routed),
            alert_similar(self.memory, routed),
            alert_changes(self.changes, routed),
        )

    # -- the run -----------------------------------------------------------------------------------

    def investigate(self, gid: str, user: str) -> str | None:
        """The Investigate button: start the run (requested by whoever clicked) and redraw the
        root without the button, naming who started it; the run's id (``None``: no such thread).

        It holds the group's lock, as a notification job does, so a notification applied at the
        same moment cannot put the button back or lose the run's id. A lock still held after
        ``lock_wait_seconds`` raises ``AlertGroupBusyError``: nothing was started."""
        token = self._lock_within(gid, self.lock_wait_seconds)
        try:
            group = self.store.group(gid)
            if group is None or not group.root_ts:
                return None
            active = self.service.active_run(group.channel, group.root_ts)
            if active is not None:
                return active
            self._investigate(group, requester=user)
            group.held = 0
            self._show_again(group, investigate_button=False, held=0, investigated_by=user)
            return group.run_id
        finally:
            self.store.unlock(gid, token)

    def _lock_within(self, gid: str, seconds: float) -> str:
        deadline = time.monotonic() + seconds
        while (token := self.store.lock(gid)) is None:
            if time.monotonic() >= deadline:
                raise AlertGroupBusyError(gid)
            time.sleep(_LOCK_POLL_SECONDS)  # a notification job holds it for one Slack call or two
        return token

    def _admitted(self, routed: RoutedNotification, group: Group) -> bool:
        """Whether this firing starts a run by itself: an ``auto`` route within its storm limit.
        Over the limit the group counts as held back (the root's count); a button route holds nothing."""
        if routed.investigate != "auto":
            return False
        if self.store.storm_allows(routed.route, routed.max_runs, routed.window_seconds):
            return True
        group.held = self.store.held_back(routed.route, group.id, routed.window_seconds)
        return False

    def _investigate(self, group: Group, *, requester: str) -> None:
        """The run in the group's thread, told what its last firing said (``group.brief``: the
        alert, its labels and links, whether it starts by itself or from the button); a group
        stored before there was a brief gets its title."""
        text = group.brief or (
            f"Investigate this alert: {group.title}" if group.title else "Investigate this alert."
        )
        submission = self.service.submit(
            group.channel,
            group.root_ts,
            requester=requester,
            text=text,
            source_url=group.source_url,
            requested=group.asked or "alert",  # never the brief: its annotations are read text
        )
        group.run_id = submission.run_id

    def run_finished(self, run_id: str, answer: str) -> None:
        """Show the investigation's answer, shortened, on the root message."""
        group = self.store.group_of_run(run_id)
        if group is None or not group.root_ts or group.root_ts.startswith("alert-"):
            return
        summary = answer.strip()
        if len(summary) > _SUMMARY_CHARS:
            summary = summary[: _SUMMARY_CHARS - 1].rstrip() + "…"
        self._show_again(group, answer=summary, investigate_button=False)

    def _show_again(self, group: Group, **changes: Any) -> None:
        """Save the group with its root as last shown plus ``changes``, and redraw the root."""
        last = AlertView.decode(group.view) or AlertView(group.id, group.source, group.status, group.title)
        shown = replace(last, **changes)
        group.view = shown.encode()
        self.store.save(group)
        if not group.root_ts.startswith("alert-"):  # a thread whose root could not be posted
            self.presenter.update_alert(group.channel, group.root_ts, shown)

    # -- helpers ---------------------------------------------------------------------------------

    def _tell(self, routed: RoutedNotification, group: Group, text: str) -> None:
        """A note in the thread, and the same text into the running run (it reads it next)."""
        ts = self.presenter.post_alert_note(group.channel, group.root_ts, text) or f"{routed.id}.1"
        if self.service.active_run(group.channel, group.root_ts) is not None:
            sender = SENDERS.get(routed.notification.source, "alert")
            self.service.deliver(group.channel, group.root_ts, user=sender, text=text, ts=ts)

    def _redraw(self, routed: RoutedNotification, group: Group, *, same_investigation: bool = True) -> None:
        """The root as this notification shows it; the last investigation's answer and who
        started it are kept while it is still the group's investigation."""
        if group.root_ts.startswith("alert-"):
            return
        button = not group.run_id and self.service.active_run(group.channel, group.root_ts) is None
        last = AlertView.decode(group.view)
        shown = view(routed, group, button=button)
        if last is not None:
            clicker = last.investigated_by if same_investigation and not button else ""
            shown = replace(
                shown, answer=last.answer, investigated_by=clicker, runbook=last.runbook, changes=last.changes
            )
        group.view = shown.encode()
        self.presenter.update_alert(group.channel, group.root_ts, shown)


def fingerprints(notification: Notification) -> list[str]:
    return list(dict.fromkeys(alert.fingerprint for alert in notification.alerts))


def ended_fingerprints(notification: Notification) -> list[str]:
    """Alerts a firing notification lists as resolved (the rest of their group still fires)."""
    return list(dict.fromkeys(a.fingerprint for a in notification.alerts if a.status == "resolved"))


def listed(alerts: tuple[Alert, ...] | list[Alert]) -> str:
    lines = [f"- {_alert_line(alert)}" for alert in list(alerts)[:_MAX_LISTED]]
    if len(alerts) > _MAX_LISTED:
        lines.append(f"- … and {len(alerts) - _MAX_LISTED} more")
    return "\n".join(lines)


def _alert_line(alert: Alert) -> str:
    name = alert.labels.get("alertname", "alert")
    where = alert.labels.get("instance") or alert.labels.get("job") or ""
    summary = alert.annotations.get("summary") or alert.annotations.get("description") or ""
    parts = [name, f"on {where}" if where else "", f"({alert.status})", summary]
    return " ".join(part for part in parts if part)


def alert_message(
    routed: RoutedNotification, runbook: AlertRunbook | None = None, similar: Sequence[str] = ()
) -> str:
    """The run's first message: what fired, where, the labels and links, the runbook's outline,
    what the other look-ups found (``similar``: past incidents, ``bot.alerts.similar``, and recent
    changes, ``bot.alerts.changes``), and what to do."""
    notification = routed.notification
    sender = SENDERS.get(notification.source, notification.source)
    lines = [f"Alert from {sender} ({notification.status}): {notification.title}"]
    if routed.target:
        lines.append(f"Target: {routed.target} (from the inventory)")
    labels = {**notification.group_labels, **notification.common_labels}
    if labels:
        lines.append("Labels: " + ", ".join(f"{key}={value}" for key, value in sorted(labels.items())))
    for key in ("summary", "description", "runbook_url"):
        if notification.common_annotations.get(key):
            lines.append(f"{key}: {notification.common_annotations[key]}")
    lines.append(f"Alerts in the group ({len(notification.alerts)}):\n" + listed(notification.alerts))
    links = [alert.generator_url for alert in notification.alerts if alert.generator_url][:3]
    if links:
        lines.append("Source: " + " ".join(links))
    lines += runbook_lines(runbook)
    lines += similar
    lines.append("Investigate what caused it with read-only tools first, and say what you found.")
    return "\n".join(lines)


_REQUESTED_ALERTS = 50  # alerts whose own labels count as the request (a storm's group is bounded)


def alert_request(routed: RoutedNotification) -> str:
    """What the alert asks of its run as a person's request (``agent.provenance``): the target the
    operator's route resolved and the alert's labels, never its annotations or descriptions."""
    notification = routed.notification
    labels = {**notification.group_labels, **notification.common_labels}
    lines = [f"Target: {routed.target}"] if routed.target else []
    if labels:
        lines.append("Labels: " + ", ".join(f"{key}={value}" for key, value in sorted(labels.items())))
    for alert in list(notification.alerts)[:_REQUESTED_ALERTS]:  # each alert's own labels (its rule's)
        lines.append(
            "Alert labels: " + ", ".join(f"{key}={value}" for key, value in sorted(alert.labels.items()))
        )
    return "\n".join(lines) or "alert"


def source_url(routed: RoutedNotification) -> str:
    """The first alert's link to where it came from (the run card links back to it)."""
    return next((alert.generator_url for alert in routed.notification.alerts if alert.generator_url), "")


def view(routed: RoutedNotification, group: Group, *, button: bool) -> AlertView:
    notification = routed.notification
    labels = {**notification.group_labels, **notification.common_labels}
    first = notification.alerts[0] if notification.alerts else None
    links: list[tuple[str, str]] = []
    if first is not None and first.generator_url:
        links.append(("source", first.generator_url))
    if first is not None:
        links += [(what, url) for what, url in first.links.items() if url]
    summary = notification.common_annotations.get("summary") or (
        first.annotations.get("summary", "") if first else ""
    )
    return replace(
        AlertView(group.id, notification.source, group.status, group.title or notification.title),
        severity=labels.get("severity", ""),
        target=routed.target,
        labels=tuple(sorted(labels.items())),
        summary=summary,
        links=tuple(links),
        alerts=len(group.fingerprints),
        resolved_alerts=len(group.resolved_fingerprints) if group.status == "firing" else 0,
        notifications=group.notifications,
        last_notified_at=group.last_notified_at,
        resolved_at=group.resolved_at,
        investigate_button=button,
        held=group.held,
    )
