"""Cards of runs Redis lost, found in Slack: redrawn without their buttons, the thread told once.

A card is the bot's own message (Slack says who posted it) with a button row the bot draws: the
run card's ``run_controls`` with a Stop button (a run card of a finished run offers Transcript
instead and is never touched), or an approval card's ``approval_controls``. Its buttons' values
are the ids (run, approval) Redis is asked about; a card is *lost* when Redis knows none of them.

Nothing here trusts a click: ``clicked`` reads the message the click names back from Slack
(``conversations.replies``) and redraws only if Slack shows it as the bot's card with a button
of that very value and Redis does not know the id. A forged payload can therefore redraw at
most a card that really is lost, which is what the sweep would do anyway.

Scopes: ``channels:history`` / ``groups:history`` (read threads, already needed for the replies
the bot listens to), and ``channels:read`` / ``groups:read`` for ``users.conversations`` when
``CHATOPS_CHANNELS`` does not name the channels to scan (docs/SLACK.md).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.runs.lost_runs import LOST_NOTICE, Scan, claim_notice
from bot.runs.service import RunService
from bot.settings import Settings
from bot.slack.delivery.client import make_client
from bot.slack.identity import BotIdentity, IdentityCache
from bot.slack.memberships import PAGE, conversations, pages
from bot.slack.rendering.blockkit import (
    ACTION_APPROVE,
    ACTION_DECLINE,
    ACTION_STOP,
    APPROVAL_CONTROLS,
    RUN_CONTROLS,
    Block,
    context,
)

log = logging.getLogger(__name__)

LOST_TEXT = "State lost: nothing will run for this card"  # the notification fallback of a redrawn card
_BUTTONS = {
    RUN_CONTROLS: frozenset({ACTION_STOP}),
    APPROVAL_CONTROLS: frozenset({ACTION_APPROVE, ACTION_DECLINE}),
}
_ID = re.compile(r"[0-9a-f]{32}")  # run and approval ids are uuid4 hex; anything else is not ours
_STATUS = re.compile(r"^:[a-z0-9_+-]+: \*[^*\n]+\*")  # a card's first line: ``:icon: *Label*``


@dataclass(frozen=True)
class LiveCard:
    """One of the bot's cards that still shows buttons, as Slack returned it."""

    ts: str
    thread_ts: str
    kind: str  # RUN_CONTROLS or APPROVAL_CONTROLS
    ids: tuple[str, ...]
    blocks: list[Block]


def live_card(message: dict[str, Any], bot: BotIdentity) -> LiveCard | None:
    """``message`` as a card with buttons, if Slack shows it as the bot's own; else ``None``."""
    if message.get("user") != bot.user_id or message.get("subtype") not in (None, "thread_broadcast"):
        return None
    if bot.bot_id and message.get("bot_id") not in (None, bot.bot_id):
        return None
    blocks = message.get("blocks")
    if not isinstance(blocks, list):
        return None
    for block in blocks:
        if not isinstance(block, dict) or block.get("type") != "actions":
            continue
        actions = _BUTTONS.get(str(block.get("block_id")))
        elements = block.get("elements")
        if actions is None or not isinstance(elements, list):
            continue
        ids = tuple(
            dict.fromkeys(
                str(element.get("value"))
                for element in elements
                if isinstance(element, dict) and element.get("action_id") in actions
            )
        )
        if ids:
            ts = str(message.get("ts") or "")
            thread = str(message.get("thread_ts") or ts)
            return LiveCard(ts, thread, str(block.get("block_id")), ids, blocks)
    return None


def lost_blocks(card: LiveCard) -> list[Block]:
    """The card as it was, its status line saying the state is lost, without buttons, with the note."""
    kept: list[Block] = []
    for index, block in enumerate(card.blocks):
        if block.get("type") == "actions":
            continue
        text = block.get("text")
        if index == 0 and isinstance(text, dict) and isinstance(text.get("text"), str):
            block = {
                **block,
                "text": {**text, "text": _STATUS.sub(":warning: *State lost*", text["text"], 1)},
            }
        kept.append(block)
    return [*kept, context(LOST_NOTICE)]


class LostCards:
    """Finds the bot's cards of lost runs in a thread or a channel and redraws them."""

    def __init__(
        self, client: WebClient, service: RunService, identity: Callable[[], BotIdentity | None]
    ) -> None:
        self._client = client
        self._service = service
        self._identity = identity

    def clicked(self, channel: str, thread_ts: str | None, message_ts: str, value: str) -> bool:
        """A click named ``value`` on ``message_ts``: True if Slack shows that message as the bot's
        card with a button of that value whose id Redis does not know (its thread is then told)."""
        bot = self._identity()
        if bot is None:
            return False
        messages = self.thread(channel, thread_ts or message_ts)
        target = next((m for m in messages if m.get("ts") == message_ts), None)
        card = live_card(target, bot) if target is not None else None
        if card is None or value not in card.ids or not self._lost(card):
            return False
        if card.thread_ts != (thread_ts or message_ts):
            messages = self.thread(channel, card.thread_ts)
        self.announce(channel, card.thread_ts, messages)
        return True

    def announce(self, channel: str, thread_ts: str, messages: list[dict[str, Any]] | None = None) -> int:
        """Redraw every lost card of the thread; tell the thread once. Returns the cards redrawn."""
        bot = self._identity()
        if bot is None:
            raise RuntimeError(
                "the bot's identity is unknown (auth.test failed): its cards cannot be told apart"
            )
        found = messages if messages is not None else self.thread(channel, thread_ts)
        lost = [card for m in found if (card := live_card(m, bot)) is not None and self._lost(card)]
        for card in lost:
            self._redraw(channel, card)
        if lost and claim_notice(self._service.redis, self._service.keys, channel, thread_ts):
            self._client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=LOST_NOTICE)
        return len(lost)

    def scan(self, channels: list[str], oldest: float) -> int:
        """Every thread started in ``channels`` since ``oldest`` (epoch seconds): cards redrawn."""
        redrawn = 0
        for channel in channels:
            for message in self._history(channel, oldest):
                if int(message.get("reply_count") or 0) > 0:
                    redrawn += self.announce(channel, str(message["ts"]))
        return redrawn

    def thread(self, channel: str, thread_ts: str) -> list[dict[str, Any]]:
        """The thread's messages (parent first), every page."""

        def page(cursor: str | None) -> Any:
            return self._client.conversations_replies(
                channel=channel, ts=thread_ts, limit=PAGE, cursor=cursor
            )

        return list(pages(page, "messages"))

    # -- helpers --------------------------------------------------------------------------------

    def _lost(self, card: LiveCard) -> bool:
        if not all(_ID.fullmatch(ident) for ident in card.ids):
            return False  # not ids this bot writes: leave the card alone
        if card.kind == RUN_CONTROLS:
            return all(self._service.get(ident) is None for ident in card.ids)
        return all(self._service.approvals.get(ident) is None for ident in card.ids)

    def _redraw(self, channel: str, card: LiveCard) -> None:
        try:
            self._client.chat_update(channel=channel, ts=card.ts, text=LOST_TEXT, blocks=lost_blocks(card))
        except SlackApiError as error:
            if error.response is None or error.response.get("error") not in (
                "invalid_blocks",
                "invalid_blocks_format",
            ):
                raise
            # Slack's copy of the card did not go back in: the note alone, still without buttons.
            self._client.chat_update(
                channel=channel, ts=card.ts, text=LOST_TEXT, blocks=[context(LOST_NOTICE)]
            )

    def _history(self, channel: str, oldest: float) -> Iterator[dict[str, Any]]:
        def page(cursor: str | None) -> Any:
            return self._client.conversations_history(
                channel=channel, oldest=f"{oldest:.6f}", limit=PAGE, cursor=cursor
            )

        return pages(page, "messages")


def bot_channels(client: WebClient, settings: Settings) -> list[str]:
    """``CHATOPS_CHANNELS``, else every channel the bot is in (``users.conversations``)."""
    if settings.chatops_channels:
        return list(settings.chatops_channels)
    return list(conversations(client, "public_channel,private_channel"))


def slack_scan(settings: Settings, service: RunService) -> Scan:
    """The worker's scan for ``bot.runs.lost_runs.LossDetector``: its own client and identity lookup."""
    client = make_client(settings)
    identity = IdentityCache(
        lambda: service.redis, service.keys, lambda: make_client(settings, timeout=5, retries=False)
    )
    cards = LostCards(client, service, identity.lookup)

    def scan(oldest: float) -> int:
        return cards.scan(bot_channels(client, settings), oldest)

    return scan


def clicked_lost_card(
    client: WebClient,
    service: RunService,
    identity: Callable[[], BotIdentity | None],
    click: tuple[str, str | None, str, str],
) -> bool:
    """The web process's check of a click naming an id Redis does not know: (channel, thread_ts,
    message_ts, value). Slack or Redis failing is logged and counts as not lost."""
    channel, thread_ts, message_ts, value = click
    try:
        return LostCards(client, service, identity).clicked(channel, thread_ts, message_ts, value)
    except Exception:
        log.exception("could not check whether message %s in %s is a lost run's card", message_ts, channel)
        return False
