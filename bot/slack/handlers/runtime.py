"""What the web process's handlers share: settings, Redis, the run service, the Slack client.

Everything is created lazily and again after a fork (``tools.fork_local``), because
``chatops web`` forks its worker processes: a Redis connection pool opened in the parent
and shared by the children would mix their replies on one socket. Redis timeouts are short
because Slack waits at most three seconds for an ack; a Redis that does not answer in time must
turn into a non-2xx answer (Slack retries) rather than a late 200.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import redis
from slack_sdk import WebClient

from bot.keys import Keys
from bot.observability.logs import redactor_for
from bot.policy.break_glass import BreakGlassLog
from bot.policy.deciders import Deciders
from bot.redis_connection import open_redis
from bot.runs.approvals import Approval
from bot.runs.replication import REPLICA_WAIT_MS, Replication
from bot.runs.service import RunOptions, RunService
from bot.settings import Settings
from bot.slack.delivery.client import make_client
from bot.slack.delivery.sender import RetryAfter
from bot.slack.handlers.courtesy import CourtesyBudget
from bot.slack.identity import IdentityCache
from bot.slack.policy_identity import CACHE_SECONDS, SlackIdentity, deciders_for
from tools.fork_local import ForkLocal

LOOKUP_TIMEOUT = 1  # seconds for each of the deciders' Slack lookups: a click is decided inside Slack's 3 s (user, then group: 2 s at worst)
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


@dataclass
class _ProcessState:
    redis: redis.Redis
    service: RunService
    client: WebClient
    replication: Replication
    courtesy: CourtesyBudget


@dataclass
class WebRuntime:
    """Process-local resources of the web app, rebuilt in each forked worker."""

    settings: Settings
    # The web process's clock: a thread's follow-up window is judged by it (tests pass their own).
    clock: Callable[[], float] = time.time
    tuning: WebTuning = field(default_factory=WebTuning)
    keys: Keys = field(init=False)
    identity: IdentityCache = field(init=False)
    deciders: Deciders[Approval] = field(init=False)  # who may decide (``bot.policy.deciders``)
    redact: Callable[[str], str] = field(init=False)  # applied to what the web process shows in Slack
    _process: ForkLocal[_ProcessState] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._process = ForkLocal(self._build)
        self.keys = Keys(self.settings.chatops_redis_prefix)
        self.identity = IdentityCache(self.redis, self.keys, self._identity_client)
        identity = SlackIdentity(
            self._lookup_client, bot_team=self._bot_team, ttl=self.tuning.approver_cache_seconds
        )
        self.deciders = deciders_for(self.settings, identity, self._break_glass_until)
        self.redact = redactor_for(self.settings).redact

    def _current(self) -> _ProcessState:
        return self._process.get()

    def _build(self) -> _ProcessState:
        # Behind sentinels its one blocking command is WAIT 1 before an answer (bot.runs.replication).
        waits = self.tuning.replica_wait_ms / 1000 if self.settings.redis_sentinels else 0.0
        client = open_redis(self.settings, blocking_seconds=waits)
        service = RunService(
            client, self.keys, RunOptions.from_settings(self.settings), deciders=self.deciders
        )
        replication = Replication.from_settings(
            client, self.keys, self.settings, timeout_ms=self.tuning.replica_wait_ms
        )

        def retry_after() -> RetryAfter | None:  # shared with the workers' sender, per workspace
            team = self._bot_team()
            return RetryAfter(client, self.keys, team) if team else None

        courtesy = CourtesyBudget(retry_after)
        return _ProcessState(client, service, make_client(self.settings), replication, courtesy)

    def redis(self) -> redis.Redis:
        return self._current().redis

    def service(self) -> RunService:
        return self._current().service

    def client(self) -> WebClient:
        return self._current().client

    def courtesy(self) -> CourtesyBudget:
        """This process's budget for the calls that are only a courtesy (``bot.slack.handlers.courtesy``)."""
        return self._current().courtesy

    def replication(self) -> Replication:
        """``confirm()`` before Slack is told something is stored (a no-op without sentinels)."""
        return self._current().replication

    def _identity_client(self) -> WebClient:
        return make_client(self.settings, timeout=5, retries=False)

    def _lookup_client(self) -> WebClient:
        """For ``users.info`` / ``usergroups.users.list`` while a person waits: no retries, a
        short timeout (a click must be decided within Slack's 3 s; a failure denies)."""
        return make_client(self.settings, timeout=LOOKUP_TIMEOUT, retries=False)

    def _break_glass_until(self, user: str) -> float | None:
        service = self.service()
        return BreakGlassLog(service.redis, self.keys, service.audit).active_until(user)

    def _bot_team(self) -> str | None:
        """The bot's workspace (``auth.test``'s ``team_id``), which deciders must belong to."""
        identity = self.identity.lookup()
        return identity.team_id if identity is not None else None

    def channel_allowed(self, channel: str) -> bool:
        allowed = self.settings.chatops_channels
        return not allowed or channel in allowed

    def healthy(self) -> bool:
        """Redis answers PING (the web process can store what Slack sends)."""
        try:
            return bool(self.redis().ping())
        except redis.RedisError:
            return False
