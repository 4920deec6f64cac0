"""The App Home tab: the person's active runs and the approvals waiting for them (``views.publish``).

Slack sends ``app_home_opened`` (signed, like every event) when someone opens the bot's Home tab;
the web process acknowledges it at once and publishes the view afterwards, on its follow-up
pool. The view is built for the user Slack names in the event and published to that user
only (``views.publish``'s ``user_id`` is the same ID): a request naming someone else is either
unsigned (refused before it gets here) or Slack's own, for the person who is looking.

What it shows, and to whom:

* *Your active runs*: runs whose requester is this person (status, channel, the request's first
  line, shown inert).
* *Waiting for your approval*: pending approvals of active runs that this person may approve
  (the approver policy, as a click would be judged: a destructive call is never listed for its
  requester). Only the tool, the target, the channel, who asked and the expiry are shown, not the
  arguments: the card in the thread (visible to the channel's members) has those. An approval of
  a private channel is listed only to its members (``bot.slack.memberships``); when Slack cannot
  say who is in which channel, no approval is listed, and the tab says why.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackApiError

from bot.policy.deciders import Action
from bot.runs.approvals import Approval, ApprovalStatus
from bot.runs.record import RunRecord
from bot.slack.delivery.blocks import redacted_blocks
from bot.slack.handlers.help import EXAMPLE
from bot.slack.handlers.runtime import WebRuntime
from bot.slack.memberships import visibility
from bot.slack.rendering.blockkit import Block, context, section, slack_date
from bot.slack.rendering.mrkdwn import escape, inert, inline_code, mention, one_line

log = logging.getLogger(__name__)

HOME_TAB = "home"
MAX_ROWS = 20  # per list; the view's 100 blocks are never reached
UNCHECKED = (
    "Slack could not say which channels you are in just now, so no approval is listed here. "
    "Open the Home tab again in a moment, or the cards in their threads."
)
_STATUS = {
    "queued": ":hourglass_flowing_sand: queued",
    "running": ":gear: working",
    "awaiting_approval": ":raised_hand: waiting for approval",
    "budget": ":money_with_wings: waiting for a budget extension",
}


@dataclass(frozen=True)
class HomeContent:
    runs: list[RunRecord]
    approvals: list[tuple[Approval, RunRecord]]
    unchecked: bool = False  # channel memberships could not be read: no approval is listed


def home_content(runtime: WebRuntime, user: str) -> HomeContent:
    """``user``'s active runs and the pending approvals ``user`` may approve."""
    service = runtime.service()
    active = service.records.get_many(service.records.active_ids())
    mine = [r for r in active if r.requester == user and not r.status.terminal]
    waiting: list[tuple[Approval, RunRecord]] = []
    for record in active:
        if record.status.terminal:
            continue
        for approval in service.approvals.for_run(record.run_id):
            if approval.status is not ApprovalStatus.PENDING:
                continue
            if runtime.deciders.decide(user, Action.APPROVE, approval).allowed:
                waiting.append((approval, record))
    mine.sort(key=lambda r: r.created_at, reverse=True)
    waiting.sort(key=lambda pair: pair[0].expires_at)
    if not waiting:
        return HomeContent(mine[:MAX_ROWS], [])
    try:
        seen = visibility(runtime.client(), user)
    except SlackApiError as error:
        log.warning("Home tab of %s: channel memberships unreadable (%s); no approval listed", user, error)
        return HomeContent(mine[:MAX_ROWS], [], unchecked=True)
    shown = [(approval, record) for approval, record in waiting if seen.may_see(record.channel)]
    return HomeContent(mine[:MAX_ROWS], shown[:MAX_ROWS])


def _run_line(record: RunRecord) -> str:
    status = _STATUS.get(record.status.value, record.status.value)
    request = inert(one_line(record.text, 120)) or "_(no text)_"
    return f"{status} · <#{escape(record.channel)}> · {request} · run `{escape(record.run_id[:12])}`"


def _approval_line(approval: Approval, record: RunRecord) -> str:
    target = f" on `{escape(approval.target)}`" if approval.target else ""
    prod = " :red_circle: *PRODUCTION*" if approval.production else ""
    return (
        f"{inline_code(approval.tool)}{target}{prod} ({approval.category.value}) · <#{escape(record.channel)}>"
        f" · asked by {mention(approval.requester)} · expires {slack_date(approval.expires_at)}"
    )


def home_view(content: HomeContent, bot_user: str | None = None) -> dict[str, Any]:
    """The Home tab's view (``type: home``)."""
    me = mention(bot_user) if bot_user else "@ops"
    blocks: list[Block] = [
        {"type": "header", "text": {"type": "plain_text", "text": "chatops: on-call assistant"}},
        section(f"Mention {me} in an incident channel with what is wrong, for example: {me} {EXAMPLE}"),
        {"type": "divider"},
        section("*Waiting for your approval*"),
    ]
    if content.approvals:
        blocks += [section(_approval_line(a, r)) for a, r in content.approvals]
        blocks.append(context("Open the card in its thread to read the command and approve or decline."))
    elif content.unchecked:
        blocks.append(context(UNCHECKED))
    else:
        blocks.append(context("Nothing is waiting for you."))
    blocks += [{"type": "divider"}, section("*Your active runs*")]
    if content.runs:
        blocks += [section(_run_line(r)) for r in content.runs]
    else:
        blocks.append(context("You have no active runs."))
    return {"type": "home", "callback_id": "chatops_home", "blocks": blocks}


def publish_home(runtime: WebRuntime, user: str, bot_user: str | None) -> None:
    """Build ``user``'s Home tab and publish it to ``user`` (and nobody else)."""
    view = home_view(home_content(runtime, user), bot_user)
    view["blocks"] = redacted_blocks(view["blocks"], runtime.redact)  # a request may quote a secret
    runtime.client().views_publish(user_id=user, view=view)


def home_opened_user(body: dict[str, Any]) -> str | None:
    """The person who opened the Home tab, or ``None`` (another tab, a malformed event)."""
    event = body.get("event")
    if not isinstance(event, dict) or event.get("type") != "app_home_opened":
        return None
    if event.get("tab") != HOME_TAB:
        return None
    user = event.get("user")
    if (
        isinstance(user, str)
        and user[:1] in ("U", "W")
        and user.replace("_", "").isalnum()
        and len(user) < 32
    ):
        return user
    return None
