"""The policy's ``Identity`` from Slack: ``users.info`` and ``usergroups.users.list``.

The lookups and their short cache are ``bot.slack.approvers.ApproverPolicy``'s (only answers Slack
gave are cached; a failure is ``None`` and the policy denies); this maps them onto
``bot.policy.rules.AccountKind``.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis
from slack_sdk import WebClient

from bot.keys import Keys
from bot.policy.file import load_policy
from bot.policy.proposals import RunPolicy
from bot.policy.rules import AccountKind
from bot.runs.approval_seal import require_seal_key
from bot.settings import Settings
from bot.slack.approvers import CACHE_SECONDS, SLACKBOT, USER_ID, ApproverPolicy
from bot.slack.delivery.client import make_client
from bot.slack.identity import IdentityCache

LOOKUP_TIMEOUT = 2  # seconds per users.info / usergroups.users.list from a worker (a failure refuses)


@dataclass(frozen=True)
class SlackIdentity:
    """Who a user is (member, guest, bot, external, ...) and a group's members, as Slack says."""

    lookups: ApproverPolicy

    def kind(self, user: str) -> AccountKind | None:
        if not USER_ID.fullmatch(user) or user == SLACKBOT:
            return AccountKind.BOT
        bot_team = self.lookups.bot_team()
        if not bot_team:
            return None
        account = self.lookups.account(user)
        if account is None:
            return None
        if not account.known:
            return AccountKind.UNKNOWN
        if account.deleted:
            return AccountKind.DEACTIVATED
        if account.automated:
            return AccountKind.BOT
        if account.stranger or account.team_id != bot_team:
            return AccountKind.EXTERNAL
        if account.guest is not False:  # guest, or Slack did not say: never a full member
            return AccountKind.GUEST
        return AccountKind.MEMBER

    def members(self, group: str) -> frozenset[str] | None:
        return self.lookups.group_members(group)


def worker_policy(
    settings: Settings, client: redis.Redis, keys: Keys, *, cache_seconds: float = CACHE_SECONDS
) -> RunPolicy | None:
    """The policy a worker enforces at proposal time (``CHATOPS_POLICY_FILE``; ``None`` without
    one), with Slack lookups of its own: short timeouts, no retries, fail-closed; their answers
    trusted ``cache_seconds`` (a test passes 0)."""
    if settings.chatops_policy_file is None:
        return None
    require_seal_key(settings.chatops_policy_file, settings.chatops_runner_secret)
    policy = load_policy(settings.chatops_policy_file, tuple(settings.chatops_approvers))

    def lookup_client() -> WebClient:
        return make_client(settings, timeout=LOOKUP_TIMEOUT, retries=False)

    identity = IdentityCache(lambda: client, keys, lookup_client)

    def bot_team() -> str | None:
        found = identity.lookup()
        return found.team_id if found is not None else None

    lookups = ApproverPolicy(
        settings.chatops_approvers,
        lookup_client,
        bot_team=bot_team,
        ttl=cache_seconds,
    )
    return RunPolicy(policy, SlackIdentity(lookups))
