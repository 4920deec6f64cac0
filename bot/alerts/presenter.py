"""Alert presenters without a chat: ``InMemoryAlertPresenter`` (tests) and ``LoggingAlertPresenter``.

The interface, ``AlertPresenter``, and what a root message shows, ``AlertView``, are on the one
presenter interface of the worker (``bot.runs.presenter``); Slack's is
``bot.slack.delivery.alert_presenter``. A worker's runtime carries one through
``bot.alerts.jobs.AlertJobs``.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.memory.similar import Similar
from bot.runs.presenter import AlertView

log = logging.getLogger(__name__)


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

    def post_similar_note(self, channel: str, thread_ts: str, found: Sequence[Similar]) -> str | None:
        return self._record("post_similar_note", channel, (thread_ts, tuple(found)))


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
