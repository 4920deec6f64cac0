"""How an alert group's thread is shown: the root message, its updates, notes in the thread.

``AlertView`` is what the root message shows; ``AlertPresenter`` is the transport's side (Slack:
``bot.slack.delivery.alert_presenter``). Everything in a view that came from an alert (labels,
annotations, titles) is the sender's text, untrusted: the transport shows it inert.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AlertView:
    group_id: str
    source: str
    status: str  # firing | resolved
    title: str
    severity: str = ""
    target: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    summary: str = ""
    links: tuple[tuple[str, str], ...] = ()  # (what, url): source, dashboard, panel, silence
    alerts: int = 1
    resolved_alerts: int = 0  # of a firing group: how many of its alerts have ended
    notifications: int = 1
    last_notified_at: float = 0.0
    resolved_at: float = 0.0
    investigate_button: bool = False  # no automatic run: offer a button
    held: int = 0  # held back by storm control: the route's groups held in its window (shown as a count)
    answer: str = ""  # the investigation's short summary, once it finished
    investigated_by: str = ""  # the Slack user ID who clicked Investigate (from Slack's signed click)

    def encode(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def decode(cls, text: str) -> AlertView | None:
        try:
            data = json.loads(text)
            data["labels"] = tuple(tuple(pair) for pair in data.get("labels", ()))
            data["links"] = tuple(tuple(pair) for pair in data.get("links", ()))
            return cls(**data)
        except (ValueError, TypeError):
            return None


@runtime_checkable
class AlertPresenter(Protocol):
    def post_alert(self, channel: str, view: AlertView) -> str | None:
        """Post the root message of a new alert thread; its ts (raises when it cannot be posted)."""
        ...

    def update_alert(self, channel: str, ts: str, view: AlertView) -> None:
        """Redraw the root message (a repeat, a resolution, the investigation's summary)."""
        ...

    def post_alert_note(self, channel: str, thread_ts: str, text: str) -> str | None:
        """A message in the alert's thread (new alerts of the group, resolved); its ts."""
        ...


@dataclass
class InMemoryAlertPresenter:
    """Records every call and answers with fake message timestamps (tests)."""

    calls: list[tuple[str, str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _ts: itertools.count[int] = field(default_factory=lambda: itertools.count(1), repr=False)

    def _record(self, method: str, channel: str, payload: Any) -> str:
        with self._lock:
            self.calls.append((method, channel, payload))
            return f"{1_800_000_000 + next(self._ts)}.000200"

    def of(self, method: str) -> list[Any]:
        with self._lock:
            return [payload for name, _, payload in self.calls if name == method]

    def post_alert(self, channel: str, view: AlertView) -> str | None:
        return self._record("post_alert", channel, view)

    def update_alert(self, channel: str, ts: str, view: AlertView) -> None:
        self._record("update_alert", channel, (ts, view))

    def post_alert_note(self, channel: str, thread_ts: str, text: str) -> str | None:
        return self._record("post_alert_note", channel, (thread_ts, text))


class LoggingAlertPresenter:
    """Writes the alert threads to the log (workers without a Slack token)."""

    def post_alert(self, channel: str, view: AlertView) -> str | None:
        log.info("alert %s in %s: %s (%s)", view.group_id, channel, view.title, view.status)
        return None

    def update_alert(self, channel: str, ts: str, view: AlertView) -> None:
        log.info("alert %s: now %s", view.group_id, view.status)

    def post_alert_note(self, channel: str, thread_ts: str, text: str) -> str | None:
        log.info("alert thread %s/%s: %s", channel, thread_ts, text)
        return None
