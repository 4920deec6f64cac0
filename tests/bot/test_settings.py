"""The settings model and .env.example stay mirrored line by line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def example_keys() -> list[str]:
    lines = (ROOT / ".env.example").read_text().splitlines()
    return [m.group(1) for line in lines if (m := re.match(r"^([A-Z][A-Z0-9_]*)=", line))]


def test_env_example_lists_every_setting_in_order() -> None:
    assert example_keys() == [name.upper() for name in Settings.model_fields]


def test_every_setting_in_env_example_is_documented_by_a_comment_or_section() -> None:
    lines = (ROOT / ".env.example").read_text().splitlines()
    for index, line in enumerate(lines):
        if re.match(r"^[A-Z][A-Z0-9_]*=", line):
            above = lines[index - 1]
            assert above.startswith("#") or re.match(r"^[A-Z][A-Z0-9_]*=", above), f"{line} has no comment"


def test_env_example_loads_as_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".env").write_text((ROOT / ".env.example").read_text())
    monkeypatch.chdir(tmp_path)
    settings = Settings()
    assert settings.chatops_token_budget is None and settings.chatops_approvers == []


def test_lists_accept_commas_and_spaces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATOPS_APPROVERS", "U_ALICE, S_ONCALL U_BOB")
    assert Settings(_env_file=None).chatops_approvers == ["U_ALICE", "S_ONCALL", "U_BOB"]  # type: ignore[call-arg]


def test_llm_prices_are_checked_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_PRICES", '{"gpt-4o": {"input": 2.5, "output": 10}}')
    assert Settings(_env_file=None).llm_prices == {"gpt-4o": {"input": 2.5, "output": 10}}  # type: ignore[call-arg]
    for value, said in (
        ('{"gpt-4o": {"input": 2.5, "output": 10, "cached": 1}}', "unknown key(s) cached"),
        ('{"gpt-4o": {"input": -1, "output": 10}}', "negative price for input"),
        ('{"gpt-4o": {"input": 1}}', "missing output"),
    ):
        monkeypatch.setenv("LLM_PRICES", value)
        with pytest.raises(ValueError, match=re.escape(said)):
            Settings(_env_file=None)  # type: ignore[call-arg]
