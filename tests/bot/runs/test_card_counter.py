"""The run card's iteration counter never goes backwards, across a suspension and its resume."""

from __future__ import annotations

from bot.runs.presenter import CardView, InMemoryPresenter
from tests.support.harness import Harness


def test_the_counter_counts_on_after_a_resume(harness: Harness) -> None:
    run_id = harness.submit("plan: check_health, restart_service")
    harness.work()
    presenter = harness.presenter
    assert isinstance(presenter, InMemoryPresenter)
    (approval,) = presenter.of("ask_approval", run_id)
    before: list[CardView] = presenter.of("update_run_card", run_id)
    assert before[-1].iterations >= 1
    assert harness.service.lifecycle.decide(approval.id, user="U_APPROVER", approve=True).won
    harness.work()
    cards: list[CardView] = presenter.of("update_run_card", run_id)
    counts = [card.iterations for card in cards]
    assert counts == sorted(counts), counts  # was 2 -> 0 -> 3: the resumed job started from 0
    resumed = cards[len(before)]  # the approved call's first update, before the next iteration
    assert resumed.iterations == before[-1].iterations
