"""Replies handled before their thread's mention created the run: parked, then adopted by the run."""

from __future__ import annotations

from bot.runs.early_replies import EARLY_MAX_ITEMS
from bot.runs.inbox import DeliveryStatus
from tests.support.harness import Harness


def test_a_parked_reply_enters_the_new_runs_inbox_first_and_once(harness: Harness) -> None:
    """A reply stored before its thread's mention created the run (``bot.runs.early_replies``)."""
    service = harness.service
    early = service.deliver("C1", "100.1", user="U_BOB", text="early", ts="100.2", park=True)
    assert early.status is DeliveryStatus.PARKED and early.stored
    again = service.deliver("C1", "100.1", user="U_BOB", text="early", ts="100.2", park=True)
    assert again.status is DeliveryStatus.DUPLICATE  # Slack's retry of it
    run_id = harness.submit("plan: check_health")  # thread 100.1
    later = service.deliver("C1", "100.1", user="U_BOB", text="later", ts="100.3", park=True)
    assert later.status is DeliveryStatus.STORED and later.run_id == run_id
    retried = service.deliver("C1", "100.1", user="U_BOB", text="early", ts="100.2", park=True)
    assert retried.status is DeliveryStatus.DUPLICATE  # claimed when parked: not stored twice
    assert [i.text for i in service.inbox.peek(run_id)] == ["early", "later"]
    assert not harness.redis.exists(harness.keys.early_replies("C1", "100.1"))
    other = service.deliver("C1", "200.1", user="U_BOB", text="chat", ts="200.2")  # park not asked
    assert other.status is DeliveryStatus.NO_ACTIVE_RUN and not other.stored


def test_parking_is_capped_per_thread(harness: Harness) -> None:
    service = harness.service
    for n in range(EARLY_MAX_ITEMS):
        parked = service.deliver("C1", "300.1", user="U_X", text=f"spam {n}", ts=f"300.{n + 2}", park=True)
        assert parked.status is DeliveryStatus.PARKED
    full = service.deliver("C1", "300.1", user="U_X", text="one more", ts="301.1", park=True)
    assert full.status is DeliveryStatus.FULL and not full.stored  # never acknowledged as stored
    assert harness.redis.llen(harness.keys.early_replies("C1", "300.1")) == EARLY_MAX_ITEMS
