"""Which channels the bot and a person are in, as Slack says (``users.conversations``).

The Home tab shows things from many channels to one person. A private channel's approvals are
only for its members there: its card is only theirs to see, and even the tool, target and
requester of a call tell outsiders what is going on in it. Slack lists another person's private
channels to a bot only where the bot is a member too (docs.slack.dev, ``users.conversations``),
which is every channel with a run of ours. A channel the bot does not see (it left, or was never
in it) counts as one the person may not see: fail closed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from slack_sdk import WebClient

PAGE = 200  # Slack recommends at most 200 items a page


def pages(fetch: Callable[[str | None], Any], field: str) -> Iterator[dict[str, Any]]:
    """Every item of a cursor-paginated Web API answer (``response_metadata.next_cursor``)."""
    cursor: str | None = None
    while True:
        response = fetch(cursor)
        yield from (item for item in response.get(field) or [] if isinstance(item, dict))
        cursor = str((response.get("response_metadata") or {}).get("next_cursor") or "") or None
        if cursor is None:
            return


def conversations(client: WebClient, types: str, user: str | None = None) -> dict[str, bool]:
    """The channels of ``types`` that ``user`` (default: the bot) is in, each with ``is_private``."""
    who = {"user": user} if user else {}

    def page(cursor: str | None) -> Any:
        return client.users_conversations(
            types=types, exclude_archived=True, limit=PAGE, cursor=cursor, **who
        )

    return {str(c["id"]): bool(c.get("is_private")) for c in pages(page, "channels") if c.get("id")}


@dataclass(frozen=True)
class Visibility:
    """What one person may be shown of the bot's channels."""

    bots: dict[str, bool]  # the bot's channels: is it private?
    private_of_user: frozenset[str]  # the private ones the person is in

    def may_see(self, channel: str) -> bool:
        private = self.bots.get(channel)
        if private is None:
            return False  # not a channel the bot is in: nothing to say about it
        return not private or channel in self.private_of_user


def visibility(client: WebClient, user: str) -> Visibility:
    """The bot's channels and ``user``'s private ones among them (raises ``SlackApiError``)."""
    bots = conversations(client, "public_channel,private_channel")
    if not any(bots.values()):
        return Visibility(bots, frozenset())  # no private channel: one call is enough
    return Visibility(bots, frozenset(conversations(client, "private_channel", user)))
