"""The policy's ``Identity`` from Slack: ``users.info`` and ``usergroups.users.list``.

Who may decide is ``bot.policy.deciders`` (one function for every caller); this is how it learns
who a Slack user is, and nothing more:

* **A full member of the bot's own workspace** is an account ``users.info`` says is not deleted,
  not a bot or an app user, not a guest (``is_restricted`` / ``is_ultra_restricted``, both
  stated), and of the team the bot's ``auth.test`` names (never Slack Connect). Anything else is
  its ``AccountKind``; an ID that is not a user ID (``B…``, Slackbot) is not a person at all.
* **Fail closed**: an answer that cannot be read (any error, a timeout) is ``None`` and the policy
  denies; a bot team that is not known yet is ``NO_WORKSPACE``. Only answers Slack gave are
  cached, for ``ttl`` seconds in this process, never a failure; a group whose members cannot be
  read now is ``None``, never the stale list (a member who just left could pass).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import redis
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.keys import Keys
from bot.policy.deciders import Deciders
from bot.policy.file import USER, load_policy
from bot.policy.proposals import RunPolicy
from bot.policy.rules import AccountKind
from bot.runs.approval_seal import ApprovalSeal, require_seal_key
from bot.runs.approvals import Approval
from bot.settings import Settings
from bot.slack.delivery.client import make_client
from bot.slack.identity import IdentityCache

log = logging.getLogger(__name__)

LOOKUP_TIMEOUT = 2  # seconds per users.info / usergroups.users.list from a worker (a failure refuses)
# Seconds an answer of users.info or a user group's members is trusted in one process. A constant
# since 0.2.0 (it was CHATOPS_APPROVER_CACHE_SECONDS): a minute spares Slack's rate tier a lookup per
# click in a busy incident, and is as long as a person removed from the approvers (or deactivated)
# may still decide in a process that asked just before; a failed lookup is never cached (it denies).
CACHE_SECONDS = 60.0
CACHE_MAX_ENTRIES = 10_000
SLACKBOT = "USLACKBOT"
T = TypeVar("T")


class TtlCache(Generic[T]):
    """Answers Slack gave, trusted for ``ttl`` seconds in this process (never a failure)."""

    def __init__(self, ttl: float, clock: Callable[[], float]) -> None:
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, T]] = {}

    def get(self, key: str) -> T | None:
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and self._clock() - entry[0] < self._ttl:
            return entry[1]
        return None

    def put(self, key: str, value: T) -> None:
        now = self._clock()
        with self._lock:
            if len(self._entries) >= CACHE_MAX_ENTRIES:  # forged clicks with made-up IDs: stay bounded
                self._entries = {k: e for k, e in self._entries.items() if now - e[0] < self._ttl}
                if len(self._entries) >= CACHE_MAX_ENTRIES:
                    self._entries.clear()
            self._entries[key] = (now, value)


@dataclass(frozen=True)
class Account:
    """What ``users.info`` said about one ID (``known=False``: ``user_not_found``)."""

    known: bool
    team_id: str | None = None
    deleted: bool = True
    automated: bool = True  # a bot or an app user
    guest: bool | None = None  # None: the answer did not say
    stranger: bool = False

    @classmethod
    def from_user(cls, user: dict[str, Any]) -> Account:
        restricted, ultra = user.get("is_restricted"), user.get("is_ultra_restricted")
        said = isinstance(restricted, bool) and isinstance(ultra, bool)
        team = user.get("team_id")
        return cls(
            known=True,
            team_id=team if isinstance(team, str) and team else None,
            deleted=user.get("deleted") is not False,
            automated=user.get("is_bot") is not False or bool(user.get("is_app_user")),
            guest=bool(restricted or ultra) if said else None,
            stranger=bool(user.get("is_stranger")),
        )

    def kind(self, bot_team: str) -> AccountKind:
        if not self.known:
            return AccountKind.UNKNOWN
        if self.deleted:
            return AccountKind.DEACTIVATED
        if self.automated:
            return AccountKind.BOT
        if self.guest is None:
            return AccountKind.UNDECLARED
        if self.guest:
            return AccountKind.GUEST
        if self.stranger or self.team_id != bot_team:
            return AccountKind.EXTERNAL
        return AccountKind.MEMBER


class SlackIdentity:
    """Who a user is (member, guest, bot, external, ...) and a group's members, as Slack says."""

    def __init__(
        self,
        client_factory: Callable[[], WebClient],
        *,
        bot_team: Callable[[], str | None],
        ttl: float = CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client_factory = client_factory
        self._bot_team = bot_team
        self._accounts: TtlCache[Account] = TtlCache(ttl, clock)
        self._members: TtlCache[frozenset[str]] = TtlCache(ttl, clock)

    def kind(self, user: str) -> AccountKind | None:
        if not USER.fullmatch(user) or user == SLACKBOT:  # a bot ID (``B…``), Slackbot: never people
            return AccountKind.NOT_A_PERSON
        bot_team = self._bot_team()  # asked first: without it nobody is looked up
        if not bot_team:
            return AccountKind.NO_WORKSPACE
        account = self.account(user)
        return account.kind(bot_team) if account is not None else None

    def account(self, user: str) -> Account | None:
        """``users.info`` for ``user``, cached; ``None`` when Slack gave no usable answer."""
        cached = self._accounts.get(user)
        if cached is not None:
            return cached
        try:
            response = self._client_factory().users_info(user=user)
            found = response.get("user")
            if not isinstance(found, dict) or found.get("id") != user:
                log.warning("users.info for %s answered another shape; denying", user)
                return None
            account = Account.from_user(found)
        except SlackApiError as error:
            if error.response.get("error") != "user_not_found":
                log.warning("users.info for %s failed: %s", user, error.response.get("error"))
                return None
            account = Account(known=False)
        except Exception as error:  # a timeout, a reset connection, a garbled body: fail closed
            log.warning("users.info for %s failed: %r", user, error)
            return None
        self._accounts.put(user, account)
        return account

    def members(self, group: str) -> frozenset[str] | None:
        """The group's members (cached ``ttl``); ``None`` when they cannot be read now, never stale."""
        cached = self._members.get(group)
        if cached is not None:
            return cached
        try:
            response = self._client_factory().usergroups_users_list(usergroup=group)
            users = response.get("users")
            if not isinstance(users, list):
                return None
            members = frozenset(str(u) for u in users)
        except Exception as error:  # any failure: membership is unknown, so nobody is a member
            log.warning("could not read user group %s: %r", group, error)
            return None
        self._members.put(group, members)
        return members


def deciders_for(
    settings: Settings, identity: SlackIdentity, glass: Callable[[str], float | None] | None = None
) -> Deciders[Approval]:
    """Who may decide in this deployment: ``CHATOPS_APPROVERS``, the policy file, and the records'
    facts trusted under the worker's seal (``CHATOPS_RUNNER_SECRET``)."""
    require_seal_key(settings.chatops_policy_file, settings.chatops_runner_secret)
    seal = ApprovalSeal.from_secret(settings.chatops_runner_secret)
    return Deciders(
        identity,
        tuple(settings.chatops_approvers),
        settings.chatops_policy_file,
        vouch=seal.problem if seal is not None else None,
        glass=glass,
    )


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

    cache = IdentityCache(lambda: client, keys, lookup_client)

    def bot_team() -> str | None:
        found = cache.lookup()
        return found.team_id if found is not None else None

    identity = SlackIdentity(lookup_client, bot_team=bot_team, ttl=cache_seconds)
    return RunPolicy(policy, identity)
