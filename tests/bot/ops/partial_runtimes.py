"""Runtimes a ``chatops worker`` must refuse at start (``CHATOPS_RUNTIME=tests.bot.ops.partial_runtimes:<name>``):
each is a custom runtime as one written before alerts had a typed seam, or without a type checker,
would build it. ``whole`` is the same runtime with the seam, which the worker accepts."""

from __future__ import annotations

from typing import cast

import redis

from bot.alerts.jobs import AlertJobs
from bot.alerts.presenter import LoggingAlertPresenter
from bot.keys import Keys
from bot.runs.presenter import AlertPresenter, AlertView, LoggingPresenter
from bot.runs.runtime import AlertSeam, Runtime
from bot.runs.service import RunOptions
from bot.settings import Settings
from tests.bot.runtimes import plan_model


def _runtime(settings: Settings, alerts: AlertSeam | None) -> Runtime:
    return Runtime(
        redis=redis.Redis.from_url(settings.redis_url),
        keys=Keys(settings.chatops_redis_prefix),
        options=RunOptions.from_settings(settings),
        models=[plan_model()],
        tools=[],
        presenter=LoggingPresenter(),
        alerts=alerts,
        owns_connection=True,
    )


def whole(settings: Settings) -> Runtime:
    return _runtime(settings, AlertJobs(LoggingAlertPresenter()))


def without_alerts(settings: Settings) -> Runtime:
    """No alert seam at all: before, every alert thread went to the log, without a word."""
    return _runtime(settings, None)


class RootsOnly:
    """An alert presenter that posts and redraws root messages, and has no notes in the thread."""

    def post_alert(self, channel: str, view: AlertView) -> str | None:
        return None

    def update_alert(self, channel: str, ts: str, view: AlertView) -> None:
        return None


def with_half_a_presenter(settings: Settings) -> Runtime:
    return _runtime(settings, AlertJobs(cast(AlertPresenter, RootsOnly())))


class Disguised:
    """A seam whose parts have the right names but are not what they claim (not callable)."""

    presenter = LoggingAlertPresenter()
    run_answered = "announce"


def with_a_disguised_seam(settings: Settings) -> Runtime:
    return _runtime(settings, cast(AlertSeam, Disguised()))
