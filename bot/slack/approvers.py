"""Who may decide: approve, decline, supersede a card by replying, stop a run, read its transcript.

This module is the one place these rules live (docs/SLACK.md, "Who may decide"):

1. **Only a full member of the bot's own workspace decides.** ``users.info`` must answer for the
   clicker, in this process within ``ttl`` seconds, that the account is not deleted, not a bot or
   an app user, not a guest (``is_restricted`` / ``is_ultra_restricted``), and of the team the
   bot's ``auth.test`` names (never Slack Connect). An ID Slack does not know (``user_not_found``),
   an answer that cannot be read (any error, a timeout) or a bot team that is not known yet all
   deny: the policy fails closed, and only answers Slack gave are cached, never a failure.
2. **``CHATOPS_APPROVERS``**, when set, narrows who may approve: listed user IDs (``U…``/``W…``)
   and members of listed user groups (``S…``). A group's members come from
   ``usergroups.users.list``, cached ``ttl`` seconds; when the list cannot be read the stale
   cache is *not* used (a member who just left the group could approve): membership counts as
   unknown and the click is denied with that reason. Empty: every full member may approve.
3. **A destructive call needs an approver who did not ask for it**: neither the requester nor
   anyone in ``approval.involved`` (whose thread messages the run had read when it proposed the
   call). A mutating call may be approved by its requester.
4. **Declining, superseding and stopping** are for full members who are the requester or may
   approve (saying no is safe, so the requester may, even when not on the list). A thread reply
   from anyone else still reaches the run; it just leaves the pending approval pending.
5. **The transcript** (every tool output) is sent only to someone who may approve.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from agent.tooling import ToolCategory
from bot.policy.rules import ALLOWED, TRY_AGAIN, Verdict  # one verdict for clicks and policy

log = logging.getLogger(__name__)

# Seconds an answer of users.info or a user group's members is trusted in one process. A constant
# since 0.2.0 (it was CHATOPS_APPROVER_CACHE_SECONDS): a minute spares Slack's rate tier a lookup per
# click in a busy incident, and is as long as a person removed from the approvers (or deactivated)
# may still decide in a process that asked just before; a failed lookup is never cached (it denies).
CACHE_SECONDS = 60.0
CACHE_MAX_ENTRIES = 10_000
# Slack's user IDs (``W…`` on Enterprise Grid). Bot IDs (``B…``) and Slackbot are never people.
USER_ID = re.compile(r"[UW][A-Z0-9_]{1,40}")
SLACKBOT = "USLACKBOT"
NOT_LISTED = Verdict(False, "You are not on this bot's approvers list (CHATOPS_APPROVERS).")
T = TypeVar("T")


class Decided(Protocol):
    """What a decision reads of an approval record (``bot.runs.approvals.Approval``)."""

    @property
    def category(self) -> ToolCategory: ...
    @property
    def requester(self) -> str: ...
    @property
    def involved(self) -> list[str]: ...


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
    guest: bool | None = None  # None: the answer did not say (counts as a guest)
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


def full_member(account: Account, bot_team: str) -> Verdict:
    """Rule 1 for one ``users.info`` answer."""
    if not account.known:
        return Verdict(False, "Slack does not know this account in the bot's workspace.")
    if account.deleted:
        return Verdict(False, "This account is deactivated.")
    if account.automated:
        return Verdict(False, "Bots and apps may not decide; a person must.")
    if account.guest is None:
        return Verdict(False, "Slack did not say whether this account is a guest, so it may not decide.")
    if account.guest:
        return Verdict(False, "Guest accounts may not decide; only full members of the workspace may.")
    if account.stranger or account.team_id != bot_team:
        return Verdict(
            False, "Only members of the bot's own workspace may decide (not Slack Connect guests)."
        )
    return ALLOWED


class ApproverPolicy:
    """Answers "may this person decide?" from ``users.info``, the approver list and its groups."""

    def __init__(
        self,
        approvers: Sequence[str],
        client_factory: Callable[[], WebClient],
        *,
        bot_team: Callable[[], str | None],
        ttl: float = CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._users = frozenset(a for a in approvers if not a.startswith("S"))
        self._groups = tuple(a for a in approvers if a.startswith("S"))
        self._client_factory = client_factory
        self._bot_team = bot_team
        self._accounts: TtlCache[Account] = TtlCache(ttl, clock)
        self._members: TtlCache[frozenset[str]] = TtlCache(ttl, clock)

    def bot_team(self) -> str | None:
        """The bot's own workspace (``auth.test``), which deciders must belong to; ``None``: unknown yet."""
        return self._bot_team()

    @property
    def open(self) -> bool:
        """True when no list is configured (every full member may approve)."""
        return not self._users and not self._groups

    # -- the decisions --------------------------------------------------------------------------

    def may_approve(self, user: str, approval: Decided) -> Verdict:
        if approval.category is ToolCategory.DESTRUCTIVE and user in {approval.requester, *approval.involved}:
            return Verdict(
                False,
                "A destructive call needs an approver other than the person who asked for it "
                "(or anyone whose thread message led to it).",
            )
        return self.may_decide(user)

    def may_decline(self, user: str, approval: Decided) -> Verdict:
        return self._requester_or_approver(
            user, approval.requester, "Only an approver or the person who asked may decline this call."
        )

    def may_supersede(self, user: str, requester: str) -> Verdict:
        """Whether ``user``'s thread reply cancels the run's pending approvals (as a decline would)."""
        return self._requester_or_approver(
            user, requester, "Only an approver or the person who asked may cancel a pending approval."
        )

    def may_stop(self, user: str, requester: str) -> Verdict:
        return self._requester_or_approver(
            user, requester, "Only the person who asked or an approver may stop this run."
        )

    def may_read_transcript(self, user: str) -> Verdict:
        return self.may_decide(user)

    def may_decide(self, user: str) -> Verdict:
        """A full member of the workspace and, when a list is configured, on it."""
        member = self.membership(user)
        return member if not member.allowed else self.approver(user)

    def _requester_or_approver(self, user: str, requester: str, refusal: str) -> Verdict:
        member = self.membership(user)
        if not member.allowed or (user and user == requester):
            return member
        verdict = self.approver(user)
        return Verdict(False, refusal) if verdict == NOT_LISTED else verdict

    # -- rule 1: a full member of this workspace --------------------------------------------------

    def membership(self, user: str) -> Verdict:
        if not USER_ID.fullmatch(user) or user == SLACKBOT:
            return Verdict(False, "Only a person's Slack account may decide.")
        bot_team = self._bot_team()
        if not bot_team:
            return Verdict(False, f"The bot does not know its own workspace yet (auth.test). {TRY_AGAIN}")
        account = self.account(user)
        if account is None:
            return Verdict(False, f"Could not check your Slack account just now. {TRY_AGAIN}")
        return full_member(account, bot_team)

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

    # -- rule 2: the approver list ----------------------------------------------------------------

    def approver(self, user: str) -> Verdict:
        if self.open or user in self._users:
            return ALLOWED
        unreadable = []
        for group in self._groups:
            members = self.group_members(group)
            if members is None:
                unreadable.append(group)
            elif user in members:
                return ALLOWED
        if unreadable:
            groups = ", ".join(f"<!subteam^{g}>" for g in unreadable)
            return Verdict(False, f"Could not read the approver group {groups} just now. {TRY_AGAIN}")
        return NOT_LISTED

    def group_members(self, group: str) -> frozenset[str] | None:
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
