"""Who may approve, decline and stop: ``CHATOPS_APPROVERS`` with user groups resolved.

``CHATOPS_APPROVERS`` lists Slack user IDs (``U…``/``W…``) and user-group IDs (``S…``). Group
members come from ``usergroups.users.list`` and are cached in this process for ``ttl`` seconds,
so a burst of clicks costs one call and a change in the group is seen within a minute. An
empty list means anyone who can see the card in the channel (Slack only sends a click from a
person who can see the message).

On top of the list, a destructive call needs an approver other than the person whose request
led to it: nobody approves their own ``rm -rf``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from agent.tooling import ToolCategory

log = logging.getLogger(__name__)

GROUP_CACHE_SECONDS = 60.0


@dataclass(frozen=True)
class Verdict:
    """``allowed``, or the sentence the clicker reads (ephemerally) about why not."""

    allowed: bool
    reason: str = ""


ALLOWED = Verdict(True)


class ApproverPolicy:
    """Answers "may this person decide this call?" from the configured list and its groups."""

    def __init__(
        self,
        approvers: Sequence[str],
        client_factory: Callable[[], WebClient],
        *,
        ttl: float = GROUP_CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._users = frozenset(a for a in approvers if not a.startswith("S"))
        self._groups = tuple(a for a in approvers if a.startswith("S"))
        self._client_factory = client_factory
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}

    @property
    def open(self) -> bool:
        """True when no list is configured (anyone who sees the card may decide)."""
        return not self._users and not self._groups

    def is_approver(self, user: str) -> bool:
        if self.open or user in self._users:
            return True
        return any(user in self.group_members(group) for group in self._groups)

    def may_approve(self, user: str, requester: str, category: ToolCategory) -> Verdict:
        if category is ToolCategory.DESTRUCTIVE and user == requester:
            return Verdict(
                False, "A destructive call needs an approver other than the person who asked for it."
            )
        if not self.is_approver(user):
            return Verdict(False, "You are not on this bot's approvers list (CHATOPS_APPROVERS).")
        return ALLOWED

    def may_decline(self, user: str, requester: str) -> Verdict:
        """Approvers may decline, and so may the requester (saying no to one's own call is safe)."""
        if user == requester or self.is_approver(user):
            return ALLOWED
        return Verdict(False, "Only an approver or the person who asked may decline this call.")

    def may_stop(self, user: str, requester: str) -> Verdict:
        if user == requester or self.is_approver(user):
            return ALLOWED
        return Verdict(False, "Only the person who asked or an approver may stop this run.")

    def group_members(self, group: str) -> frozenset[str]:
        """The group's members, cached; an unreadable group counts as empty (deny, never allow)."""
        now = self._clock()
        with self._lock:
            cached = self._cache.get(group)
            if cached is not None and now - cached[0] < self._ttl:
                return cached[1]
        try:
            response = self._client_factory().usergroups_users_list(usergroup=group)
            members = frozenset(str(u) for u in response.get("users") or ())
        except (SlackApiError, OSError) as error:
            log.warning("could not read user group %s: %s", group, error)
            return cached[1] if cached is not None else frozenset()
        with self._lock:
            self._cache[group] = (now, members)
        return members
