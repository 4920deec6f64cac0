"""Where the "is working…" status (``assistant.threads.setStatus``) is refused, and for how long.

A refusal is remembered for what it is about, not for the whole workspace for a day:

* the app cannot use the method at all (a missing scope, a revoked or wrong token, the feature
  off): the workspace, for ``WORKSPACE_SECONDS``; a scope granted meanwhile works within the hour;
* the thread is wrong (``invalid_thread_ts``...): that thread only, in this process;
* anything else (``channel_not_found``, ``not_in_channel``, a channel type the method does not
  support, an error code Slack adds later): that channel, for ``CHANNEL_SECONDS``.

Refusals live in Redis (``slack:no_status:{team}`` and ``slack:no_status:{team}:{channel}``, owned
here), so every worker of the workspace skips them; each process reads them at most once a
``RECHECK_SECONDS`` per channel. Transient failures (429, 5xx) are never remembered: the caller
raises them for the background sender to retry.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

import redis

from bot.keys import Keys

log = logging.getLogger(__name__)

WORKSPACE_SECONDS = 3600
CHANNEL_SECONDS = 3600
RECHECK_SECONDS = 60.0
MAX_REMEMBERED_THREADS = 1000
# Slack's answers that mean the token may not call the method anywhere (docs.slack.dev, the
# method's "Errors" and the Web API's common errors).
WORKSPACE_ERRORS = frozenset(
    {
        "missing_scope",
        "not_allowed_token_type",
        "not_authed",
        "invalid_auth",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "no_permission",
        "access_denied",
        "feature_not_enabled",
        "method_deprecated",
        "unknown_method",
        "team_access_not_granted",
        "ekm_access_denied",
    }
)
THREAD_ERRORS = frozenset({"invalid_thread_ts", "thread_not_found", "message_not_found"})


class StatusRefusals:
    """Remembers refusals of the thread status per workspace, channel or thread. Thread-safe."""

    def __init__(
        self,
        redis_client: redis.Redis,
        keys: Keys,
        team_id: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._redis = redis_client
        self._workspace_key = keys.slack("no_status", team_id)
        self._keys, self._team = keys, team_id
        self._clock = clock
        self._lock = threading.Lock()
        self._checked: dict[str, tuple[float, bool]] = {}  # channel -> (read until, refused)
        self._threads: OrderedDict[tuple[str, str], None] = OrderedDict()

    def _channel_key(self, channel: str) -> str:
        return self._keys.slack("no_status", self._team, channel)

    def refused(self, channel: str, thread_ts: str) -> bool:
        """Whether a status in this thread is known to be refused (then it is not asked for)."""
        now = self._clock()
        with self._lock:
            if (channel, thread_ts) in self._threads:
                return True
            until, refused = self._checked.get(channel, (0.0, False))
        if now < until:
            return refused
        try:
            found = self._redis.mget([self._workspace_key, self._channel_key(channel)])
        except redis.RedisError:
            return True  # a status is a nicety: skipped rather than guessed while Redis is away
        refused = any(value is not None for value in found)
        with self._lock:
            self._checked[channel] = (now + RECHECK_SECONDS, refused)
        return refused

    def remember(self, channel: str, thread_ts: str, code: str | None) -> None:
        """Record Slack's refusal (``code``) for the workspace, the channel or the thread."""
        code = code or "unknown_error"
        if code in THREAD_ERRORS:
            log.info("thread status refused in %s/%s (%s); not asked again there", channel, thread_ts, code)
            with self._lock:
                self._threads[(channel, thread_ts)] = None
                while len(self._threads) > MAX_REMEMBERED_THREADS:
                    self._threads.popitem(last=False)
            return
        workspace = code in WORKSPACE_ERRORS
        key, ttl = (
            (self._workspace_key, WORKSPACE_SECONDS)
            if workspace
            else (self._channel_key(channel), CHANNEL_SECONDS)
        )
        log.info(
            "thread status unavailable %s (%s); not trying again for %d s",
            "in this workspace" if workspace else f"in {channel}",
            code,
            ttl,
        )
        with self._lock:
            if workspace:
                self._checked.clear()  # every channel reads the workspace's refusal back
            self._checked[channel] = (self._clock() + RECHECK_SECONDS, True)
        try:
            self._redis.set(key, code, ex=ttl)
        except redis.RedisError:
            log.debug("could not remember the status refusal", exc_info=True)
