"""One decision path: a click, a thread reply and the run engine's lifecycle judge a person alike.

Each of the three asks ``Deciders.decide`` (``bot.policy.deciders``), so for the same person and
an equivalent pending card (same requester, tool and list) they cannot disagree: who is refused is
refused by all three with the same reason, who may decide decides through each. The hostile
case: a guest and a Slack Connect user whom ``CHATOPS_APPROVERS`` lists are still no full members,
and are refused everywhere, with or without a policy file (under a file whose rules leave the call
to ``CHATOPS_APPROVERS``, the list once counted as "a rule naming their ID" at the click).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.types import RunStatus
from bot.errors import NotAnApproverError
from bot.policy.deciders import MAY_SUPERSEDE, Action
from bot.runs.approvals import Approval, ApprovalStatus
from bot.slack.rendering import render
from emulator.slack import SlackEmulator, UserSpec
from tests.bot.slack.test_clicks import approval_id_of, notes_to, pending_card, status
from tests.bot.slack.test_who_may_decide import acknowledged
from tests.support.slack_bot import SlackBot
from tests.support.slack_workspace import CHANNEL, suite_workspace
from tests.support.waiting import wait_for

PEOPLE: dict[str, str | UserSpec] = {
    "U_ALICE": "alice",  # asks for the restarts
    "U_BOB": "bob",  # on the list, a full member
    "U_CAROL": "carol",  # a full member, not on the list
    "U_GUEST": UserSpec("gail", guest="multi_channel", channels=(CHANNEL,)),  # on the list
    "U_EXT": UserSpec("erin", team_id="T_PARTNER", channels=(CHANNEL,)),  # on the list, Slack Connect
}
APPROVERS = "U_BOB,U_GUEST,U_EXT"
GUEST = "Guest accounts may not decide"
NOT_OURS = "Only members of the bot's own workspace may decide"
# Why each is refused: to approve a card, and to cancel it by replying (another question, and
# for someone off the list another sentence).
REFUSED = {
    "U_GUEST": (GUEST, GUEST),
    "U_EXT": (NOT_OURS, NOT_OURS),
    "U_CAROL": ("not on this bot's approvers list", MAY_SUPERSEDE),
}
# A rule for other calls only: restarts without a target fall to CHATOPS_APPROVERS.
POLICY = (
    "policy:\n  rules:\n    - name: no-database-hosts\n      match: {targets: ['db-*']}\n      deny: true\n"
)


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:
    with SlackEmulator(suite_workspace(users=PEOPLE)) as slack:
        yield slack


@pytest.fixture(params=["approvers only", "policy file"])
def bot(request: pytest.FixtureRequest, make_bot: Callable[..., SlackBot], tmp_path: Path) -> SlackBot:
    if request.param == "approvers only":
        return make_bot(chatops_approvers=APPROVERS)
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    return make_bot(
        chatops_approvers=APPROVERS,
        chatops_policy_file=str(policy),
        chatops_runner_secret="one-path-secret-0123456789",
    )


def record(bot: SlackBot, card: dict[str, Any]) -> Approval:
    found = bot.service.approvals.get(approval_id_of(card))
    assert found is not None
    return found


def test_a_click_a_reply_and_the_lifecycle_give_the_same_verdict(bot: SlackBot) -> None:
    web = bot.runtime
    assert web is not None
    lifecycle = web.service().lifecycle  # the web process's, with its deciders: no switch-off
    cards = {
        path: pending_card(bot, "U_ALICE", "restart_service") for path in ("click", "reply", "lifecycle")
    }
    (click_ts, _, click_card), (reply_ts, reply_run, reply_card), (_, _, engine_card) = cards.values()

    for number, (user, (reason, cancel)) in enumerate(REFUSED.items(), 1):
        rulings = [web.deciders.decide(user, Action.APPROVE, record(bot, c)) for _, _, c in cards.values()]
        assert {(r.allowed, r.reason) for r in rulings} == {(False, rulings[0].reason)}, rulings
        assert reason in rulings[0].reason

        bot.control.click(click_card["ts"], user, action_id=render.ACTION_APPROVE)  # the click
        [note] = notes_to(bot, user, 1)
        assert rulings[0].reason in note and "Nothing changed" in note

        acknowledged(bot, bot.say(f"cancel that ({number})", user=user, thread_ts=reply_ts))  # the reply
        superseding = web.deciders.decide(
            user, Action.SUPERSEDE, requester="U_ALICE", pending=[record(bot, reply_card)]
        )
        assert not superseding.allowed and cancel in superseding.reason

        with pytest.raises(NotAnApproverError) as refused:  # the run engine, asked directly
            lifecycle.decide(
                approval_id_of(engine_card), user=user, approve=True, card=(CHANNEL, engine_card["ts"])
            )
        assert refused.value.reason == rulings[0].reason

        assert [status(bot, approval_id_of(c)) for _, _, c in cards.values()] == [ApprovalStatus.PENDING] * 3
    assert [i.user for i in bot.service.inbox.peek(reply_run)] == list(REFUSED)  # the replies reached the run

    # Someone who may decide does, through each path.
    assert all(
        web.deciders.decide("U_BOB", Action.APPROVE, record(bot, c)).allowed for _, _, c in cards.values()
    )
    bot.control.click(click_card["ts"], "U_BOB", action_id=render.ACTION_APPROVE)
    wait_for(lambda: status(bot, approval_id_of(click_card)) is ApprovalStatus.APPROVED, what="bob's click")
    acknowledged(bot, bot.say("wait, check the logs first", user="U_BOB", thread_ts=reply_ts))
    assert status(bot, approval_id_of(reply_card)) is ApprovalStatus.SUPERSEDED
    assert lifecycle.decide(
        approval_id_of(engine_card), user="U_BOB", approve=True, card=(CHANNEL, engine_card["ts"])
    ).won
    bot.work()
    runs = bot.executions("restart_service")
    assert [run["arguments"]["confirmed_by"] for run in runs] == ["U_BOB", "U_BOB"]  # the reply ran nothing
    assert bot.status(bot.run_id(click_ts)) is RunStatus.COMPLETED
