"""``chatops doctor``'s one line about the change journal: none without CHATOPS_RUNNER_SECRET."""

from __future__ import annotations

from bot.ops.doctor_changes import check_changes
from bot.settings import Settings


def _settings(**values: object) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def test_without_the_secret_doctor_says_there_is_no_journal_in_one_line() -> None:
    lines = check_changes(_settings()).lines()
    assert len(lines) == 1
    assert "no change journal: CHATOPS_RUNNER_SECRET is not set" in lines[0]


def test_with_the_secret_it_says_how_long_changes_are_kept() -> None:
    (line,) = check_changes(_settings(chatops_runner_secret="s" * 32, chatops_changes_days=7)).lines()
    assert line.startswith("PASS  changes") and "kept 7 days" in line
