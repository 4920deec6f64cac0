"""A Redis writer cannot lower what an approval needs: the web process decides each click from the
policy file as it is now, on the call's facts as the worker sealed them (issue 26).

Attacks, each against the real web process, the Slack emulator and a worker (docs/POLICY.md's
example policy): the approval record's requirement lowered from two approvals to one; the facts it
is judged on (category, target, labels, requester) changed; and, not an attack, the policy file
tightened after the card was posted, which the click then follows.
"""

from __future__ import annotations

import json
from pathlib import Path

from agent.redis_util import as_text
from bot.fleet.grants import Grant
from bot.policy.rules import Requirement
from bot.runs.approvals import ApprovalStatus
from tests.bot.runtimes import executions
from tests.bot.slack.test_clicks import approval_id_of, notes_to, status
from tests.bot.slack.test_policy_e2e import approve, bot, card_of, emulator, model, start
from tests.support.slack_bot import SlackBot
from tests.support.waiting import wait_for

__all__ = ["bot", "emulator", "model"]  # the example policy's bot, its workspace and plan model
LOWERED = Requirement("prod", (), ("S_SRE_LEADS",), False, 1).to_json()


def shown_on_card(bot: SlackBot, ts: str, card_ts: str, text: str) -> None:
    wait_for(
        lambda: text in json.dumps(bot.message(ts, card_ts)["blocks"]), what=f"the card showing {text!r}"
    )


def test_a_count_lowered_in_redis_still_needs_two_approvers(bot: SlackBot) -> None:
    ts, _ = start(bot, "U_ALICE", "delete_files@web-03")  # prod-destructive: two SRE leads
    card = card_of(bot, ts)
    approval_id = approval_id_of(card)
    bot.redis.hset(bot.keys.approval(approval_id), "policy", LOWERED)  # a Redis writer: 2 -> 1

    approve(bot, card, "U_CAROL")
    [note] = notes_to(bot, "U_CAROL", 1)
    assert "counted (1 of 2)" in note and "1 more from another eligible person is needed" in note, note
    shown_on_card(bot, ts, card["ts"], "So far: <@U_CAROL> (1 of 2)")
    shown_on_card(bot, ts, card["ts"], "2 distinct approvals from <!subteam^S_SRE_LEADS>")
    assert status(bot, approval_id) is ApprovalStatus.PENDING
    bot.work()
    assert executions(bot.directory / "delete_files.log") == []

    approve(bot, card, "U_DAVE")
    wait_for(lambda: status(bot, approval_id) is ApprovalStatus.APPROVED, what="the second approval")
    approval = bot.service.approvals.get(approval_id)
    assert approval is not None
    grant = Grant.decode(approval.grant)  # what a runner or the worker verifies: the file's count
    assert grant is not None and grant.approvals_needed == 2 and grant.approvers == {"U_CAROL", "U_DAVE"}
    assert grant.policy_rule == "prod-destructive"
    bot.work()
    [run] = executions(bot.directory / "delete_files.log")
    assert run["arguments"]["confirmed_by"] == "U_DAVE"


def test_the_facts_the_policy_is_judged_on_cannot_be_changed_in_redis(bot: SlackBot) -> None:
    ts, _ = start(bot, "U_ALICE", "delete_files@web-03")
    card = card_of(bot, ts)
    approval_id = approval_id_of(card)
    key = bot.keys.approval(approval_id)
    original = {as_text(k): as_text(v) for k, v in bot.redis.hgetall(key).items()}
    tampering = {
        "category": "mutating",  # the 'prod' rule would need one approval
        "target_labels": "env=staging",  # 'staging-on-call': on-call people, the requester too
        "target": "stg-01",
        "requester": "U_EVE",  # 'not the requester' would no longer be alice
        "channel": "C_RANDOM",
        # the check the card showed (none here) swapped for another (issue 34)
        "verify": '{"check":{"arguments":"{\\"target\\":\\"web-03\\"}","tool":"check_health"}}',
    }
    for number, (field, value) in enumerate(tampering.items(), 1):
        bot.redis.hset(key, mapping={field: value, "policy": LOWERED})
        approve(bot, card, "U_CAROL")
        note = notes_to(bot, "U_CAROL", number)[-1]
        assert "changed in Redis after the call was proposed" in note and "Nothing changed" in note, (
            field,
            note,
        )
        assert status(bot, approval_id) is ApprovalStatus.PENDING, field
        bot.redis.hset(key, field, original[field] or "")
    bot.work()
    assert executions(bot.directory / "delete_files.log") == []

    approve(bot, card, "U_CAROL")  # the record as proposed: one of the two approvals it needs
    assert "counted (1 of 2)" in notes_to(bot, "U_CAROL", len(tampering) + 1)[-1]
    assert status(bot, approval_id) is ApprovalStatus.PENDING


def test_the_policy_file_as_it_is_at_the_click_decides(bot: SlackBot) -> None:
    ts, _ = start(bot, "U_ALICE", "service_restart@web-03")  # prod: one SRE lead, when posted
    card = card_of(bot, ts)
    approval_id = approval_id_of(card)
    policy = Path(str(bot.settings.chatops_policy_file))
    tightened = policy.read_text().replace(
        "requester_may_approve: false}", "requester_may_approve: false, approvals: 2}", 1
    )
    assert tightened != policy.read_text()
    policy.write_text(tightened)  # the operators now want two leads for any prod call

    approve(bot, card, "U_CAROL")
    assert "counted (1 of 2)" in notes_to(bot, "U_CAROL", 1)[0]
    shown_on_card(bot, ts, card["ts"], "2 distinct approvals from <!subteam^S_SRE_LEADS>; not the requester")
    assert status(bot, approval_id) is ApprovalStatus.PENDING
    approve(bot, card, "U_DAVE")
    wait_for(lambda: status(bot, approval_id) is ApprovalStatus.APPROVED, what="the second approval")
    bot.work()
    [run] = executions(bot.directory / "service_restart.log")
    assert run["arguments"]["confirmed_by"] == "U_DAVE"


def test_votes_written_into_redis_count_for_nobody(bot: SlackBot) -> None:
    ts, _ = start(bot, "U_ALICE", "delete_files@web-03")  # two SRE leads
    card = card_of(bot, ts)
    approval_id = approval_id_of(card)
    # A Redis writer votes for dave, who never clicked, plainly and with a made-up tag.
    bot.redis.sadd(bot.keys.approval_votes(approval_id), "U_DAVE", "U_DAVE|" + "0" * 32)

    approve(bot, card, "U_CAROL")
    assert "counted (1 of 2)" in notes_to(bot, "U_CAROL", 1)[0]
    shown_on_card(bot, ts, card["ts"], "So far: <@U_CAROL> (1 of 2)")
    assert status(bot, approval_id) is ApprovalStatus.PENDING
    bot.work()
    assert executions(bot.directory / "delete_files.log") == []

    approve(bot, card, "U_DAVE")  # now dave clicks himself
    wait_for(lambda: status(bot, approval_id) is ApprovalStatus.APPROVED, what="the second approval")
    approval = bot.service.approvals.get(approval_id)
    assert approval is not None and approval.reason == "approved by U_CAROL, U_DAVE"
    grant = Grant.decode(approval.grant)
    assert grant is not None and grant.approvers == {"U_CAROL", "U_DAVE"}
