"""``Deciders`` with Slack's identity (``SlackIdentity``) against the Slack emulator: what it
caches, and that every failure denies.

The end-to-end cases (clicks through the web app) are in ``test_who_may_decide``; these pin down
the deciders' own behaviour with a clock the test moves.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from slack_sdk import WebClient

from agent.scripted import tool_call
from agent.tooling import ToolCategory
from bot.policy.deciders import Action, Deciders, Ruling
from bot.runs.approvals import Approval
from bot.slack.policy_identity import SlackIdentity
from emulator.slack import SlackEmulator, SlackEmulatorClient, UserSpec, WorkspaceConfig
from tests.support.slack_workspace import SECRET, TOKEN

TEAM = "T_EMULATOR"


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:
    users: dict[str, str | UserSpec] = {
        "U_ALICE": "alice",
        "U_BOB": "bob",
        "U_GUEST": UserSpec("gail", guest="multi_channel"),
    }
    with SlackEmulator(WorkspaceConfig(bot_token=TOKEN, signing_secret=SECRET, users=users)) as slack:
        yield slack


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Rules:
    """The questions this file asks, each through the one function (``Deciders.decide``)."""

    def __init__(self, deciders: Deciders[Approval]) -> None:
        self.deciders = deciders

    def may_decide(self, user: str) -> Ruling:  # a full member and, with a list, on it
        return self.deciders.decide(user, Action.TRANSCRIPT)

    def may_approve(self, user: str, approval: Approval) -> Ruling:
        return self.deciders.decide(user, Action.APPROVE, approval)

    def may_decline(self, user: str, approval: Approval) -> Ruling:
        return self.deciders.decide(user, Action.DECLINE, approval)

    def may_supersede(self, user: str, requester: str) -> Ruling:
        return self.deciders.decide(user, Action.SUPERSEDE, requester=requester)


def policy(
    emulator: SlackEmulator, clock: Clock, approvers: tuple[str, ...] = (), team: str | None = TEAM
) -> Rules:
    def client() -> WebClient:
        return WebClient(token=TOKEN, base_url=emulator.api_url, timeout=2)

    return Rules(Deciders(SlackIdentity(client, bot_team=lambda: team, ttl=60, clock=clock), approvers))


def approval(category: ToolCategory, requester: str = "U_ALICE", involved: tuple[str, ...] = ()) -> Approval:
    call = tool_call("delete_files", "c1", path="/var/log/old")
    return Approval(
        id="a1",
        run_id="r1",
        call_id=call.id,
        tool=call.name,
        args_json=call.arguments,
        args_sha256=call.arguments_sha256(),
        category=category,
        requester=requester,
        created_at=0.0,
        expires_at=60.0,
        involved=[requester, *involved],
    )


def lookups(control: SlackEmulatorClient, method: str = "users.info") -> int:
    return len(control.calls(method))


def test_a_users_info_answer_is_trusted_for_the_ttl_and_a_failure_never(
    emulator: SlackEmulator, control: SlackEmulatorClient
) -> None:
    clock = Clock()
    rules = policy(emulator, clock)
    control.inject_fault("users.info", kind="error", error="fatal_error", count=1)
    refused = rules.may_decide("U_ALICE")
    assert not refused.allowed and "Could not check your Slack account" in refused.reason
    assert rules.may_decide("U_ALICE").allowed  # the failure was not cached: asked again
    assert rules.may_decide("U_ALICE").allowed and lookups(control) == 2  # the answer was
    clock.now += 61
    assert rules.may_decide("U_ALICE").allowed and lookups(control) == 3
    assert not rules.may_decide("U_GUEST").allowed and not rules.may_decide("U_GUEST").allowed
    assert lookups(control) == 4  # a definite "guest" is an answer too


def test_a_lookup_that_times_out_denies() -> None:
    silent = socket.create_server(("127.0.0.1", 0))  # accepts connections, never answers
    try:
        port = silent.getsockname()[1]
        rules = Rules(
            Deciders(
                SlackIdentity(
                    lambda: WebClient(token=TOKEN, base_url=f"http://127.0.0.1:{port}/api/", timeout=1),
                    bot_team=lambda: TEAM,
                )
            )
        )
        verdict = rules.may_decide("U_ALICE")
        assert not verdict.allowed and "Could not check your Slack account" in verdict.reason
    finally:
        silent.close()


def test_an_unknown_bot_team_denies_everyone(emulator: SlackEmulator, control: SlackEmulatorClient) -> None:
    verdict = policy(emulator, Clock(), team=None).may_decide("U_ALICE")
    assert not verdict.allowed and "does not know its own workspace" in verdict.reason
    assert not policy(emulator, Clock(), team="T_OTHER").may_decide("U_ALICE").allowed


def test_a_stale_group_list_is_never_used_to_allow(
    emulator: SlackEmulator, control: SlackEmulatorClient
) -> None:
    clock = Clock()
    rules = policy(emulator, clock, approvers=("S_ONCALL",))
    assert rules.may_decide("U_ALICE").allowed  # the on-call group: alice
    control.set_usergroup_members("S_ONCALL", ["U_BOB"])
    assert rules.may_decide("U_ALICE").allowed  # within the trust period the cached list holds
    clock.now += 61
    control.inject_fault("usergroups.users.list", kind="http_error", status=503, count=1)
    verdict = rules.may_decide("U_ALICE")
    assert not verdict.allowed and "Could not read the approver group <!subteam^S_ONCALL>" in verdict.reason
    verdict = rules.may_decide("U_ALICE")
    assert not verdict.allowed and "not on this bot's approvers list" in verdict.reason
    assert rules.may_decide("U_BOB").allowed and lookups(control, "usergroups.users.list") == 3


def test_declining_is_for_the_requester_or_an_approver_and_destructive_approval_for_neither_party(
    emulator: SlackEmulator, control: SlackEmulatorClient
) -> None:
    rules = policy(emulator, Clock(), approvers=("U_BOB",))
    mutating = approval(ToolCategory.MUTATING, requester="U_ALICE")
    assert rules.may_decline("U_ALICE", mutating).allowed  # the requester, not on the list
    assert rules.may_supersede("U_ALICE", "U_ALICE").allowed
    assert not rules.may_approve("U_ALICE", mutating).allowed
    guest = rules.may_decline("U_GUEST", approval(ToolCategory.MUTATING, requester="U_GUEST"))
    assert not guest.allowed and "Guest accounts" in guest.reason  # a guest requester may not either
    destructive = approval(ToolCategory.DESTRUCTIVE, requester="U_ALICE", involved=("U_BOB",))
    refused = rules.may_approve("U_BOB", destructive)
    assert not refused.allowed and "other than the person who asked" in refused.reason
    assert rules.may_decline("U_BOB", destructive).allowed  # saying no stays open to him
    calls = lookups(control)
    assert not rules.may_approve("U_ALICE", destructive).allowed and lookups(control) == calls  # no lookup
    open_rules = policy(emulator, Clock())
    assert open_rules.may_approve("U_ALICE", mutating).allowed  # no list: the requester's own call
    assert not open_rules.may_approve("U_ALICE", approval(ToolCategory.DESTRUCTIVE)).allowed
