"""What the web process's handlers share: settings, Redis, the run service, the Slack client.

The composition root (``bot.ops.compose.web_runtime``) builds a ``WebRuntime`` from the settings
and hands it its collaborators: nothing here reads a setting to build one. What talks to Redis
or Slack is a ``WebProcess``, built on first use in each process and again after a fork (the
process id is checked), because ``chatops web`` forks its worker processes: a Redis connection
pool opened in the parent and shared by the children would mix their replies on one socket.
Redis timeouts are short because Slack waits at most three seconds for an ack; a Redis that does
not answer in time must turn into a non-2xx answer (Slack retries) rather than a late 200.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis
from slack_sdk import WebClient

from bot.keys import Keys
from bot.observability.metrics import RunMetrics
from bot.runs.limits import LimitSettings
from bot.runs.replication import Replication
from bot.runs.service import RunService
from bot.settings import Settings
from bot.slack.approvers import ApproverPolicy
from bot.slack.handlers.courtesy import CourtesyBudget
from bot.slack.handlers.help import TargetList
from bot.slack.identity import IdentityCache
from bot.slack.policy_clicks import ClickRules


@dataclass(frozen=True)
class WebProcess:
    """What one web process talks through, opened in that process (after the fork)."""

    redis: redis.Redis
    service: RunService
    client: WebClient
    replication: Replication
    courtesy: CourtesyBudget
    metrics: RunMetrics


class WebProcesses:
    """The current process's ``WebProcess``: ``connect`` is called once in each process, on first use."""

    def __init__(self, connect: Callable[[], WebProcess]) -> None:
        self._connect = connect
        self._state: tuple[int, WebProcess] | None = None
        self._lock = threading.Lock()

    def current(self) -> WebProcess:
        state = self._state
        if state is not None and state[0] == os.getpid():
            return state[1]
        with self._lock:
            if self._state is None or self._state[0] != os.getpid():
                self._state = (os.getpid(), self._connect())
            return self._state[1]


@dataclass
class WebRuntime:
    """The web app's collaborators, built by ``bot.ops.compose.web_runtime``; the process-local
    ones (``redis()``, ``service()``, ...) are rebuilt in each forked worker."""

    settings: Settings  # the plain values the handlers read (channels, windows, retention, Slack's app)
    keys: Keys
    processes: WebProcesses
    identity: IdentityCache
    policy: ApproverPolicy
    rules: ClickRules  # the policy file and seal key clicks are judged with
    redact: Callable[[str], str]  # applied to what the web process shows in Slack
    targets: TargetList  # the inventory's targets, for the help reply
    limits: LimitSettings  # on new runs (``bot.runs.limits``)
    # The web process's clock: a thread's follow-up window is judged by it (tests pass their own).
    clock: Callable[[], float] = time.time

    def redis(self) -> redis.Redis:
        return self.processes.current().redis

    def service(self) -> RunService:
        return self.processes.current().service

    def client(self) -> WebClient:
        return self.processes.current().client

    def courtesy(self) -> CourtesyBudget:
        """This process's budget for the calls that are only a courtesy (``bot.slack.handlers.courtesy``)."""
        return self.processes.current().courtesy

    def replication(self) -> Replication:
        """``confirm()`` before Slack is told something is stored (a no-op without sentinels)."""
        return self.processes.current().replication

    def metrics(self) -> RunMetrics:
        return self.processes.current().metrics

    def channel_allowed(self, channel: str) -> bool:
        allowed = self.settings.chatops_channels
        return not allowed or channel in allowed

    def healthy(self) -> bool:
        """Redis answers PING (the web process can store what Slack sends)."""
        try:
            return bool(self.redis().ping())
        except redis.RedisError:
            return False
