"""Feedback buttons under a streamed answer: what a click records (their blocks: ``bot.slack.rendering.feedback_buttons``).

The buttons are Slack's ``feedback_buttons`` element in a ``context_actions`` block, which
``chat.stopStream`` renders at the bottom of the finished answer (``bot.slack.delivery.streaming``). Each
button's value is ``positive:<run id>`` or ``negative:<run id>``.

A click is a claim by whoever sent it, so it is checked before it counts:

* the value must be exactly one of the two forms (a forged payload names nothing else);
* the run must exist, and the click must come from the run's own channel (a button copied into
  another channel, or a payload naming another channel's run, records nothing);
* a person counts once per run: the first click is audited (``answer_feedback``) and counted
  (``chatops_answer_feedback_total``); later clicks by the same person change nothing, so a
  script clicking all day cannot move the numbers. The flag (``slack:feedback:{run}:{user}``,
  this module's record) lives as long as a run's records (``CHATOPS_RETENTION_DAYS``);
* a counted click marks the run's incident (``bot.memory``): one 👎 makes it disputed for good
  (a later 👍 does not clear it), so ``similar_incidents`` returns it last. A click on a run whose
  incident is not stored yet (the memory is the report's last step) is kept for it, and the
  incident carries it when it is stored (``IncidentStore.set_feedback``: atomic either way round).
"""

from __future__ import annotations

import logging
import re
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import redis
from slack_bolt import Ack, App

from bot.claims import claim_once
from bot.keys import Keys
from bot.memory.store import IncidentStore
from bot.observability.audit import AuditKind, AuditLog
from bot.observability.run_metrics import RunMetrics
from bot.runs.service import RunService
from bot.slack.rendering.feedback_buttons import ACTION_FEEDBACK

if TYPE_CHECKING:
    from bot.slack.handlers.runtime import WebRuntime

log = logging.getLogger(__name__)

_VALUE = re.compile(r"(positive|negative):([0-9a-f]{32})")
_USER = re.compile(r"[UW][A-Z0-9_]{1,40}")


class FeedbackOutcome(StrEnum):
    COUNTED = "counted"
    REPEAT = "repeat"  # this person's feedback on this run was already counted
    REFUSED = "refused"  # a malformed value, an unknown run, or a click from another channel


class Feedback:
    """Records feedback clicks (the web process; any thread)."""

    def __init__(
        self,
        redis_client: redis.Redis,
        keys: Keys,
        service: RunService,
        audit: AuditLog,
        metrics: RunMetrics,
        *,
        retention_seconds: int,
        incidents: IncidentStore | None = None,
    ) -> None:
        self._incidents = incidents  # the run's incident (bot.memory) is marked disputed on a 👎
        self._redis = redis_client
        self._keys = keys
        self._service = service
        self._audit = audit
        self._metrics = metrics
        self._retention = max(1, retention_seconds)

    def record(self, value: str, user: str, channel: str, message_ts: str) -> FeedbackOutcome:
        """One click on a feedback button: counted once per person and run, or refused."""
        match = _VALUE.fullmatch(value)
        if match is None or not _USER.fullmatch(user):
            return FeedbackOutcome.REFUSED
        verdict, run_id = match.group(1), match.group(2)
        record = self._service.get(run_id)
        if record is None or record.channel != channel:
            return FeedbackOutcome.REFUSED
        flag = self._keys.slack("feedback", run_id, user)
        if not claim_once(self._redis, flag, self._retention, verdict):
            return FeedbackOutcome.REPEAT
        self._audit.record(
            AuditKind.ANSWER_FEEDBACK,
            run_id,
            user=user,
            value=verdict,
            channel=channel,
            message_ts=message_ts,
        )
        self._metrics.answer_feedback(verdict)
        if self._incidents is not None:  # kept for the incident, stored now or at the run's end
            self._incidents.set_feedback(run_id, "down" if verdict == "negative" else "up")
        return FeedbackOutcome.COUNTED


def _text(node: object, *path: str) -> str:
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, str) else ""


def register_feedback(app: App, runtime: WebRuntime) -> None:
    """The feedback buttons' handler: recorded before the ack (one Redis write or two, no Slack
    call), so a 200 means the click counted (or was a repeat, or refused: logged)."""

    def feedback(body: dict[str, Any], ack: Ack) -> None:
        actions = body.get("actions")
        action = actions[0] if isinstance(actions, list) and actions and isinstance(actions[0], dict) else {}
        service = runtime.service()
        memory = runtime.memory()
        recorder = Feedback(
            runtime.redis(),
            runtime.keys,
            service,
            service.audit,
            runtime.metrics(),
            retention_seconds=runtime.settings.chatops_retention_days * 86400,
            incidents=memory.store if memory is not None else None,
        )
        outcome = recorder.record(
            _text(action, "value"),
            _text(body, "user", "id"),
            _text(body, "container", "channel_id") or _text(body, "channel", "id"),
            _text(body, "container", "message_ts"),
        )
        if outcome is FeedbackOutcome.REFUSED:
            log.warning("a feedback click by %r was refused", _text(body, "user", "id")[:40])
        ack()

    app.action(ACTION_FEEDBACK)(feedback)
