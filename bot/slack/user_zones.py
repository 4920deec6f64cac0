"""A person's time zone as Slack says (``users.info``: ``tz``, ``tz_offset``), cached in this process.

The postmortem draft shows its timeline in UTC and in the zone of the person who asked for it
(``bot.postmortem.zone``). One ``users.info`` per person an hour at most (``ZONE_CACHE_SECONDS``);
an answer without a usable zone is cached as UTC, a failed call is not cached and means UTC only
this time (a draft is never held up or refused for want of a zone).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.policy.file import USER
from bot.postmortem.zone import Zone
from bot.slack.policy_identity import TtlCache

log = logging.getLogger(__name__)
ZONE_CACHE_SECONDS = 3600.0  # people rarely move; an offset's daylight-saving change is the name's
_UTC = Zone("", 0)


class UserZones:
    def __init__(
        self,
        client_factory: Callable[[], WebClient],
        *,
        ttl: float = ZONE_CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client_factory = client_factory
        self._cache: TtlCache[Zone] = TtlCache(ttl, clock)

    def zone(self, user: str) -> Zone | None:
        """``user``'s zone, or ``None`` when Slack does not say (UTC only)."""
        if not USER.fullmatch(user):
            return None
        found = self._cache.get(user)
        if found is None:
            found = self._ask(user)
            if found is None:
                return None
            self._cache.put(user, found)
        return None if found.utc else found

    def _ask(self, user: str) -> Zone | None:
        try:
            answer = self._client_factory().users_info(user=user).get("user")
        except SlackApiError as error:
            log.info("users.info for %s's time zone failed: %s", user, error.response.get("error"))
            return None
        except Exception as error:  # a timeout, a reset connection: UTC only this time
            log.info("users.info for %s's time zone failed: %r", user, error)
            return None
        if not isinstance(answer, dict) or answer.get("id") != user:
            return None
        return Zone.of(answer.get("tz"), answer.get("tz_offset")) or _UTC
