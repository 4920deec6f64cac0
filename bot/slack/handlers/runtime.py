"""What the web process's handlers share: settings, Redis, the run service, the Slack client.

The composition root (``bot.ops.compose_web.web_runtime``) builds a ``WebRuntime`` from the
settings and hands it its collaborators: nothing here reads a setting to build one. What talks to
Redis or Slack is a ``WebProcess``, built on first use in each process and again after a fork
(``tools.fork_local``), because ``chatops web`` forks its worker processes: a Redis connection
pool opened in the parent and shared by the children would mix their replies on one socket.
Redis timeouts are short because Slack waits at most three seconds for an ack; a Redis that does
not answer in time must turn into a non-2xx answer (Slack retries) rather than a late 200.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import redis
from slack_sdk import WebClient

from bot.changes.journal import ChangeJournal
from bot.keys import Keys
from bot.memory.similar import IncidentMemory
from bot.observability.run_metrics import RunMetrics
from bot.policy.deciders import Deciders
from bot.runs.approvals import Approval
from bot.runs.limits import LimitSettings
from bot.runs.replication import REPLICA_WAIT_MS, Replication
from bot.runs.service import RunService
from bot.settings import Settings
from bot.slack.handlers.courtesy import CourtesyBudget
from bot.slack.handlers.help import TargetList
from bot.slack.identity import IdentityCache
from bot.slack.policy_identity import CACHE_SECONDS
from tools.fork_local import ForkLocal

# A mention no worker has picked up after this many seconds gets the "queued" note
# (``bot.slack.handlers.queued_note``). A constant since 0.2.0 (it was CHATOPS_QUEUED_NOTE_SECONDS): an idle
# worker takes a run within milliseconds, so 2 s means every worker is busy, and a person who sees
# nothing for longer than that starts wondering whether the bot heard them.
QUEUED_NOTE_SECONDS = 2.0


@dataclass(frozen=True)
class WebTuning:
    """The web process's timings: constants in production, each named where it is defined; a test
    passes others (a queued note at once, or never; an approver cache that trusts nothing)."""

    queued_note_seconds: float = QUEUED_NOTE_SECONDS  # 0: no queued note
    approver_cache_seconds: float = CACHE_SECONDS  # ``bot.slack.policy_identity``
    replica_wait_ms: int = REPLICA_WAIT_MS  # ``bot.runs.replication``, with sentinels only


@dataclass(frozen=True)
class WebProcess:
    """What one web process talks through, opened in that process (after the fork)."""

    redis: redis.Redis
    service: RunService
    client: WebClient
    replication: Replication
    courtesy: CourtesyBudget
    metrics: RunMetrics
    memory: IncidentMemory | None = None  # past incidents (``bot.memory``); None: none kept


@dataclass
class WebRuntime:
    """The web app's collaborators, built by ``bot.ops.compose_web.web_runtime``; the process-local
    ones (``redis()``, ``service()``, ...) are rebuilt in each forked worker."""

    settings: Settings  # the plain values the handlers read (channels, windows, retention, Slack's app)
    keys: Keys
    processes: ForkLocal[WebProcess]
    identity: IdentityCache
    deciders: Deciders[Approval]  # who may decide (``bot.policy.deciders``)
    redact: Callable[[str], str]  # applied to what the web process shows in Slack
    targets: TargetList  # the inventory's targets, for the help reply
    limits: LimitSettings  # on new runs (``bot.runs.limits``)
    # The web process's clock: a thread's follow-up window is judged by it (tests pass their own).
    clock: Callable[[], float] = time.time
    tuning: WebTuning = field(default_factory=WebTuning)
    # The change journal on a process's Redis (``CHATOPS_RUNNER_SECRET`` checks its seals); None: none.
    journal_of: Callable[[redis.Redis], ChangeJournal] | None = None

    def redis(self) -> redis.Redis:
        return self.processes.get().redis

    def service(self) -> RunService:
        return self.processes.get().service

    def client(self) -> WebClient:
        return self.processes.get().client

    def courtesy(self) -> CourtesyBudget:
        """This process's budget for the calls that are only a courtesy (``bot.slack.handlers.courtesy``)."""
        return self.processes.get().courtesy

    def replication(self) -> Replication:
        """``confirm()`` before Slack is told something is stored (a no-op without sentinels)."""
        return self.processes.get().replication

    def metrics(self) -> RunMetrics:
        return self.processes.get().metrics

    def memory(self) -> IncidentMemory | None:
        """Past incidents: what a mention's run starts from, what a Forget click removes."""
        return self.processes.get().memory

    def journal(self) -> ChangeJournal | None:
        """The change journal (what ``/ops handoff`` lists as changed on the targets), or None."""
        return self.journal_of(self.redis()) if self.journal_of is not None else None

    def channel_allowed(self, channel: str) -> bool:
        allowed = self.settings.chatops_channels
        return not allowed or channel in allowed

    def healthy(self) -> bool:
        """Redis answers PING (the web process can store what Slack sends)."""
        try:
            return bool(self.redis().ping())
        except redis.RedisError:
            return False
