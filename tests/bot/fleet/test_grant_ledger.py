"""``GrantLedger``: the host's record of spent grants, with real processes racing for one grant."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from bot.errors import BotConfigurationError
from bot.fleet.grant_ledger import GrantLedger

NOW = 1_000_000.0


def _spend(
    directory: str, start: multiprocessing.synchronize.Event, won: multiprocessing.Queue[bool]
) -> None:
    ledger = GrantLedger(Path(directory))  # each its own instance, as two runner processes would
    start.wait(30)
    won.put(ledger.spend("run1:call1", NOW + 300, NOW))


def test_of_processes_racing_for_one_grant_on_a_host_exactly_one_spends_it(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    start, won = context.Event(), context.Queue()
    racers = [context.Process(target=_spend, args=(str(tmp_path), start, won)) for _ in range(6)]
    for racer in racers:
        racer.start()
    start.set()
    results = sorted(won.get(timeout=30) for _ in racers)
    for racer in racers:
        racer.join(timeout=30)
    assert results == [False] * 5 + [True]


def test_a_spent_grant_stays_spent_for_a_new_ledger_until_it_expired(tmp_path: Path) -> None:
    assert GrantLedger(tmp_path).spend("run1:call1", NOW + 300, NOW)
    again = GrantLedger(tmp_path)  # the runner restarted
    assert not again.spend("run1:call1", NOW + 300, NOW + 299)
    assert again.prune(NOW + 300 + 59) == 0  # kept a minute past the grant's expiry
    assert again.prune(NOW + 300 + 61) == 1 and not again.spent("run1:call1")


def test_prune_keeps_a_record_it_cannot_read_and_removes_only_expired_ones(tmp_path: Path) -> None:
    ledger = GrantLedger(tmp_path)
    ledger.spend("old", NOW - 3600, NOW - 3600)
    ledger.spend("fresh", NOW + 300, NOW - 3590)  # no prune within a minute of the last
    (tmp_path / "cut-short").write_text("")  # a crash between its creation and its write
    assert ledger.prune(NOW) == 1
    assert ledger.spent("fresh") and not ledger.spent("old") and (tmp_path / "cut-short").exists()
    (record,) = [json.loads(p.read_text()) for p in tmp_path.iterdir() if p.name != "cut-short"]
    assert record == {"execution": "fresh", "expires_at": NOW + 300}


def test_a_runner_whose_state_directory_cannot_be_made_does_not_start(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    with pytest.raises(BotConfigurationError, match="CHATOPS_RUNNER_STATE_DIR: cannot create"):
        GrantLedger(tmp_path / "a-file" / "grants" / "web-03")
