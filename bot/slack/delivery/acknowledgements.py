""":eyes: on a person's message, exactly once: the sign that the bot has read it.

The web process reacts as soon as it has stored a mention or a thread reply (before any worker
runs); a worker that injects the reply into the run would react again only if the web process's
reaction was lost. One Redis flag per message (``SET NX``, owned here) decides who reacts: the first
to take it calls ``reactions.add``, and gives the flag back when Slack refused, so the other
one (or a retry) can try again. Nobody reacts twice, so Slack never answers ``already_reacted``.
"""

from __future__ import annotations

import redis
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.claims import claim_once
from bot.keys import Keys

EYES = "eyes"
FLAG_SECONDS = 7 * 24 * 3600  # longer than any run's thread stays active
_IGNORED_REACTION_ERRORS = frozenset({"already_reacted"})


def add_reaction(client: WebClient, channel: str, ts: str, name: str) -> None:
    """``reactions.add``, treating "already reacted" as success (someone reacted by hand, say)."""
    try:
        client.reactions_add(channel=channel, timestamp=ts, name=name)
    except SlackApiError as error:
        if error.response is None or error.response.get("error") not in _IGNORED_REACTION_ERRORS:
            raise


class Acknowledgements:
    """Who reacts with :eyes: on a message: the first process to claim it."""

    def __init__(self, redis_client: redis.Redis, keys: Keys) -> None:
        self._redis = redis_client
        self._keys = keys

    def _flag(self, channel: str, ts: str) -> str:
        return self._keys.slack("eyes", channel, ts)

    def claim(self, channel: str, ts: str) -> bool:
        """Whether this caller is the one to react (nobody reacted, nobody is reacting)."""
        return claim_once(self._redis, self._flag(channel, ts), FLAG_SECONDS)

    def release(self, channel: str, ts: str) -> None:
        self._redis.delete(self._flag(channel, ts))

    def react(self, client: WebClient, channel: str, ts: str) -> bool:
        """:eyes: on the message unless someone already did; whether this call reacted.

        A failed ``reactions.add`` releases the claim and raises (the caller retries or logs)."""
        if not self.claim(channel, ts):
            return False
        try:
            add_reaction(client, channel, ts, EYES)
        except BaseException:
            self.release(channel, ts)
            raise
        return True
