"""The bot in an Enterprise Grid workspace: ``E…`` enterprise ids on every envelope and click,
``W…`` user ids. A mention starts a run and the answer arrives, as anywhere else."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent.types import RunStatus
from emulator.slack import SlackEmulator
from tests.support.slack_bot import SlackBot
from tests.support.slack_workspace import suite_workspace


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:  # this module's workspace is a Grid org's
    config = suite_workspace(
        enterprise_id="E_GRID",
        users={"W_ALICE": "alice", "W_BOB": "bob"},
    )
    with SlackEmulator(config) as slack:
        yield slack


def test_a_mention_in_a_grid_workspace_runs_and_answers(bot: SlackBot) -> None:
    ts = bot.mention("plan: check_health", user="W_ALICE")
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    assert any(m["text"] == "done: check_health ok" for m in bot.bot_replies(ts))
    assert all(d["status"] == 200 for d in bot.control.deliveries())
