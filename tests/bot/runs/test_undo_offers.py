"""Undo offers (issue 34, part 4): the undo call as derived when the change ran, sealed, claimed
once within its window, only from its own message; a Redis writer who changes it claims nothing."""

from __future__ import annotations

import json
import threading

import redis

from agent.verification import PlannedCall, filled_undo
from bot.keys import Keys
from bot.runs.undo_offers import ClaimOutcome, UndoFacts, UndoOffers, UndoSeal

SEAL = UndoSeal.from_secret("s" * 32)
FACTS = UndoFacts(
    run_id="r1",
    action_call_id="c1",
    approval_id="a1",
    channel="C1",
    thread_ts="100.1",
    action_tool="pool_scale",
    tool="pool_scale",
    args_json='{"pool":"web","replicas":3,"target":"web-03"}',
    target="web-03",
)


def offered(client: redis.Redis, keys: Keys, window: float = 3600.0) -> tuple[UndoOffers, str]:
    offers = UndoOffers(client, keys, SEAL)
    offer = offers.offer(FACTS, window)
    offers.set_message(offer.id, "C1", "200.2")
    return offers, offer.id


def test_the_undo_takes_the_state_read_before_the_change_with_its_type() -> None:
    undo = PlannedCall(
        "pool_scale",
        '{"note":"back to {before.replicas} from {args}","pool":"web","replicas":"{before.replicas}"}',
    )
    filled = filled_undo(undo, {"replicas": 3, "state": "running"})
    assert isinstance(filled, PlannedCall)
    assert json.loads(filled.arguments) == {"note": "back to 3 from {args}", "pool": "web", "replicas": 3}
    assert filled_undo(undo, {"state": "running"}) == "the state read before the change has no replicas"
    assert filled_undo(undo, None) == "the state before the change could not be read"
    plain = PlannedCall("kube_scale", '{"replicas":2}')
    assert filled_undo(plain, None) == plain  # nothing to fill: no before-read needed


def test_an_offer_is_claimed_once_by_the_first_click(redis_client: redis.Redis, keys: Keys) -> None:
    offers, offer_id = offered(redis_client, keys)
    results: list[ClaimOutcome] = []
    lock = threading.Lock()

    def click(user: str) -> None:
        outcome = offers.claim(offer_id, channel="C1", ts="200.2", by=user).outcome
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=click, args=(f"U{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results).count(ClaimOutcome.CLAIMED) == 1 and results.count(ClaimOutcome.TAKEN) == 7
    again = offers.claim(offer_id, channel="C1", ts="200.2", by="U9")
    assert (
        again.outcome is ClaimOutcome.TAKEN and again.offer is not None and again.by == again.offer.claimed_by
    )
    assert again.offer.tool == "pool_scale" and json.loads(again.offer.args_json)["replicas"] == 3


def test_a_click_after_the_window_claims_nothing(redis_client: redis.Redis, keys: Keys) -> None:
    offers, offer_id = offered(redis_client, keys, window=0.0)  # its window ended as it was made
    claim = offers.claim(offer_id, channel="C1", ts="200.2", by="U1")
    assert claim.outcome is ClaimOutcome.EXPIRED and claim.offer is not None and claim.offer.claimed_by == ""


def test_a_forged_click_naming_another_message_or_channel_claims_nothing(
    redis_client: redis.Redis, keys: Keys
) -> None:
    offers, offer_id = offered(redis_client, keys)
    assert offers.claim(offer_id, channel="C1", ts="999.9", by="U1").outcome is ClaimOutcome.MISMATCH
    assert offers.claim(offer_id, channel="C2", ts="200.2", by="U1").outcome is ClaimOutcome.MISMATCH
    assert offers.claim("f" * 32, channel="C1", ts="200.2", by="U1").outcome is ClaimOutcome.MISSING
    unposted = offers.offer(FACTS, 3600.0)  # its button was never posted: no click names it
    assert offers.claim(unposted.id, channel="C1", ts="", by="U1").outcome is ClaimOutcome.MISMATCH
    assert offers.claim(offer_id, channel="C1", ts="200.2", by="U1").won


def test_an_undo_changed_in_redis_breaks_its_seal(redis_client: redis.Redis, keys: Keys) -> None:
    offers, offer_id = offered(redis_client, keys)
    key = keys.undo_offer(offer_id)
    for field, value in (
        ("args_json", '{"pool":"web","replicas":50,"target":"web-03"}'),
        ("tool", "pool_delete"),
        ("target", "db-01"),
        ("expires_at", "99999999999"),
    ):
        original = redis_client.hget(key, field)
        redis_client.hset(key, field, value)
        claim = offers.claim(offer_id, channel="C1", ts="200.2", by="U1")
        assert claim.outcome is ClaimOutcome.TAMPERED, field
        redis_client.hset(key, field, original or b"")
    other = offers.offer(FACTS, 3600.0)  # another genuine offer copied over this one
    for field, value in redis_client.hgetall(keys.undo_offer(other.id)).items():
        redis_client.hset(key, field, value)
    assert offers.claim(offer_id, channel="C1", ts="200.2", by="U1").outcome is ClaimOutcome.TAMPERED
    assert redis_client.hget(key, "claimed_by") in (b"", None)


def test_judging_claims_nothing_and_only_the_claimer_gives_a_claim_back(
    redis_client: redis.Redis, keys: Keys
) -> None:
    offers, offer_id = offered(redis_client, keys)
    assert offers.judge(offer_id, channel="C1", ts="200.2").outcome is ClaimOutcome.CLAIMED
    assert offers.judge(offer_id, channel="C1", ts="999.9").outcome is ClaimOutcome.MISMATCH
    assert offers.judge(offer_id, channel="C2", ts="200.2").outcome is ClaimOutcome.MISMATCH
    assert offers.judge("nope", channel="C1", ts="200.2").outcome is ClaimOutcome.MISSING
    assert offers.claim(offer_id, channel="C1", ts="200.2", by="U1").won
    judged = offers.judge(offer_id, channel="C1", ts="200.2")
    assert judged.outcome is ClaimOutcome.TAKEN and judged.by == "U1"
    assert not offers.release(offer_id, "U2")  # not theirs
    assert offers.release(offer_id, "U1")  # its run could not start
    assert offers.claim(offer_id, channel="C1", ts="200.2", by="U2").won
    redis_client.hset(keys.undo_offer(offer_id), "tool", "pool_delete")
    assert offers.judge(offer_id, channel="C1", ts="200.2").outcome is ClaimOutcome.TAMPERED
    late, late_id = offered(redis_client, keys, window=0.0)
    assert late.judge(late_id, channel="C1", ts="200.2").outcome is ClaimOutcome.EXPIRED
