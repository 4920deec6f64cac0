"""``chatops doctor``'s check of who may approve: an empty ``CHATOPS_APPROVERS`` is not a mistake in a
team of three, but in a larger workspace it lets any full member approve a restart (a typo in the name
used to do the same, silently: ``bot.settings_names``). The warning says who can approve, counted with
the rule the clicks use (``bot.slack.policy_identity.Account.kind``: no guests, bots, deactivated
accounts or other workspaces' people) over ``users.list``.
"""

from __future__ import annotations

from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.ops.doctor_check import TIMEOUT, Check, Outcome
from bot.policy.rules import AccountKind
from bot.settings import Settings
from bot.slack.delivery.client import api_base_url
from bot.slack.policy_identity import Account

HANDFUL = 5  # more full members than this, and "anyone may approve" is a warning
SLACKBOT = "USLACKBOT"  # Slack's own account: not a bot by users.list, never a person
FIX = "set CHATOPS_APPROVERS to the on-call people's IDs (U...) or a user group (S...): docs/SLACK.md"


def check_approvers(settings: Settings) -> Check:
    if settings.chatops_approvers:
        count = len(settings.chatops_approvers)
        return Check("approve", Outcome.PASS, f"CHATOPS_APPROVERS lists {count} people or group(s)")
    if settings.chatops_policy_file:
        return Check(
            "approve",
            Outcome.PASS,
            "CHATOPS_APPROVERS is empty: the policy file's rules say who may approve (chatops policy explain)",
        )
    anyone = "CHATOPS_APPROVERS is empty: any full member of the workspace may approve mutating calls"
    if not settings.slack_bot_token:
        return Check("approve", Outcome.WARN, f"{anyone} (not counted: SLACK_BOT_TOKEN is empty)", FIX)
    try:
        members = _full_members(settings)
    except (SlackApiError, OSError) as error:
        reason = error.response.get("error") if isinstance(error, SlackApiError) else str(error)
        return Check("approve", Outcome.WARN, f"{anyone} (not counted: users.list failed: {reason})", FIX)
    who = f"CHATOPS_APPROVERS is empty: any of the workspace's {members} full members may approve"
    if members > HANDFUL:
        return Check("approve", Outcome.WARN, f"{who} mutating calls (guests and bots may not)", FIX)
    return Check("approve", Outcome.PASS, f"{who} (a handful: fine for a small team)")


def _full_members(settings: Settings) -> int:
    client = WebClient(
        token=settings.slack_bot_token,
        base_url=api_base_url(settings.slack_api_url),
        timeout=int(TIMEOUT),
        retry_handlers=[],
    )
    team = str(client.auth_test().get("team_id") or "")
    count, cursor = 0, ""
    while True:
        page = client.users_list(limit=200, cursor=cursor or None)
        members: list[dict[str, Any]] = page.get("members") or []
        count += sum(1 for user in members if _counts(user, team))
        cursor = str((page.get("response_metadata") or {}).get("next_cursor") or "")
        if not cursor:
            return count


def _counts(user: dict[str, Any], team: str) -> bool:
    return user.get("id") != SLACKBOT and Account.from_user(user).kind(team) is AccountKind.MEMBER
