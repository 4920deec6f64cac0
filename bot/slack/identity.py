"""Who the bot is in Slack (its user and bot IDs), found without blocking startup or acks.

Bolt's single-workspace mode calls ``auth.test`` when the ``App`` is built, so a process that
starts while Slack is unreachable dies. chatops builds the ``App`` with an ``authorize``
function instead, which never calls Slack (an ack must not wait for it). It answers from this
process's memory, then Redis (shared by every web and worker process), then the event's own
``authorizations`` block (Slack names the bot user there). ``auth.test`` runs in the background
at startup (``IdentityCache.lookup``) and fills the cache; a failed lookup is not cached and the
app works without the bot's IDs meanwhile (the handlers ignore every bot message anyway).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import redis
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.authorization.authorize import Authorize
from slack_bolt.context import BoltContext
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.keys import Keys

log = logging.getLogger(__name__)

CACHE_SECONDS = 24 * 3600
CONTEXT_HINT = "chatops_bot_user_id"  # set from the request body by ``remember_authorizations``


@dataclass(frozen=True)
class BotIdentity:
    user_id: str
    bot_id: str | None = None
    team_id: str | None = None


class IdentityCache:
    """The bot's identity: memory, then Redis, then ``auth.test`` (see the module docstring)."""

    def __init__(
        self,
        redis_client: Callable[[], redis.Redis],
        keys: Keys,
        client_factory: Callable[[], WebClient],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._redis = redis_client
        self._key = keys.slack("identity")
        self._client_factory = client_factory
        self._clock = clock
        self._lock = threading.Lock()
        self._identity: BotIdentity | None = None

    def cached(self) -> BotIdentity | None:
        """The identity from memory or Redis; never calls Slack."""
        if self._identity is not None:
            return self._identity
        try:
            raw = self._redis().get(self._key)
        except redis.RedisError:
            return None
        if raw:
            self._identity = BotIdentity(**json.loads(raw))
        return self._identity

    def lookup(self) -> BotIdentity | None:
        """The cached identity, or ``auth.test`` now (``None`` when Slack does not answer)."""
        found = self.cached()
        if found is not None:
            return found
        with self._lock:
            try:
                response = self._client_factory().auth_test()
            except (SlackApiError, OSError) as error:
                log.warning("auth.test failed, the bot's identity stays unknown for now: %s", error)
                return None
            identity = BotIdentity(
                user_id=str(response.get("user_id") or ""),
                bot_id=response.get("bot_id"),
                team_id=response.get("team_id"),
            )
            if identity.user_id:
                self.remember(identity)
            return identity if identity.user_id else None

    def remember(self, identity: BotIdentity) -> None:
        self._identity = identity
        try:
            self._redis().set(self._key, json.dumps(asdict(identity)), ex=CACHE_SECONDS)
        except redis.RedisError:
            log.debug("could not cache the bot identity in Redis")


def bot_user_from_body(body: dict[str, Any]) -> str | None:
    """The bot user Slack names in an event's ``authorizations`` (absent on interactivity)."""
    for entry in body.get("authorizations") or ():
        if isinstance(entry, dict) and entry.get("is_bot") and entry.get("user_id"):
            return str(entry["user_id"])
    return None


def remember_authorizations(body: dict[str, Any], context: BoltContext, next: Callable[[], Any]) -> Any:
    """Bolt ``before_authorize`` middleware: hand the body's bot user to ``authorize``."""
    user = bot_user_from_body(body)
    if user:
        context[CONTEXT_HINT] = user
    return next()


class Authorizer(Authorize):
    """Bolt's ``authorize`` for a single workspace with a static bot token (a Bolt ``Authorize``)."""

    def __init__(self, token: str, identity: IdentityCache) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._token = token
        self._identity = identity

    def __call__(
        self,
        *,
        context: BoltContext,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None,
        actor_enterprise_id: str | None = None,
        actor_team_id: str | None = None,
        actor_user_id: str | None = None,
    ) -> AuthorizeResult:
        # Never a network call here: Slack is waiting for the ack. ``chatops web`` warms the
        # cache with ``lookup`` in the background at startup.
        identity = self._identity.cached()
        hinted = context.get(CONTEXT_HINT)
        return AuthorizeResult(
            enterprise_id=enterprise_id,
            team_id=team_id,
            bot_token=self._token,
            bot_user_id=identity.user_id if identity else hinted,
            bot_id=identity.bot_id if identity else None,
        )
