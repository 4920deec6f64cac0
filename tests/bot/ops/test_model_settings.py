"""The model chain from the settings: providers, fallbacks on other endpoints, headers, keys kept
secret, and ``chatops doctor`` probing each model with a request every family accepts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from agent.models.anthropic_client import AnthropicClient
from agent.models.openai_client import LLMClient
from agent.types import Message, Request
from bot.models import build_models, model_keys
from bot.ops.doctor import Outcome, check_llm
from bot.settings import Settings
from emulator.models.anthropic_server import AnthropicReply, AnthropicServer
from emulator.models.openai_server import OpenAIServer, Reply
from tests.agent import provider_fakes
from tests.support.fake_provider import FakeProvider


def settings(**values: object) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[arg-type]


@pytest.fixture
def claude() -> Iterator[AnthropicServer]:
    with AnthropicServer(
        api_key="sk-ant-fallback", fallback=lambda body: AnthropicReply(text="OK")
    ) as server:
        yield server


def test_fallback_key_variables_are_redacted_and_hidden_like_llm_api_key() -> None:
    loaded = settings(llm_fallbacks="gpt-4o, anthropic:claude-sonnet-4-5")
    assert "ANTHROPIC_API_KEY" in loaded.chatops_redact_env and "LLM_API_KEY" in loaded.chatops_redact_env
    loaded = settings(
        llm_fallbacks='[{"provider": "openai", "model": "m", "base_url": "https://x.example/v1", "api_key_env": "GATEWAY_KEY"}]'
    )
    assert "GATEWAY_KEY" in loaded.chatops_redact_env


def test_a_broken_fallbacks_setting_stops_the_process_at_start() -> None:
    with pytest.raises(ValidationError, match="api_key_env"):
        settings(llm_fallbacks='[{"provider": "anthropic", "model": "c", "api_key": "sk-ant-x"}]')


def test_an_anthropic_primary_and_extra_headers(
    claude: AnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLM_EXTRA_HEADERS", json.dumps({"anthropic-workspace-id": "wrk_7"}))  # as .env has it
    loaded = settings(
        llm_provider="anthropic",
        llm_base_url=claude.url,
        llm_api_key="sk-ant-fallback",
        llm_model="claude-test",
    )
    [model] = build_models(loaded, keys=model_keys(loaded))
    assert isinstance(model, AnthropicClient)
    model.complete(Request(model="claude-test", messages=[Message.user("hi")]))
    assert claude.requests[0].headers["anthropic-workspace-id"] == "wrk_7"


def test_the_anthropic_default_url_is_anthropics() -> None:
    [model] = build_models(settings(llm_provider="anthropic", llm_model="claude-sonnet-4-5"), keys={})
    assert (
        isinstance(model, AnthropicClient)
        and model.source == "anthropic:https://api.anthropic.com/v1/messages"
    )


def test_fallback_keys_are_read_from_the_dotenv_file_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, claude: AnthropicServer
) -> None:
    (tmp_path / ".env").write_text("CLAUDE_KEY=sk-ant-fallback\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CLAUDE_KEY", raising=False)
    fallback = [
        {"provider": "anthropic", "model": "claude-test", "base_url": claude.url, "api_key_env": "CLAUDE_KEY"}
    ]
    loaded = settings(llm_base_url="http://127.0.0.1:9/v1", llm_fallbacks=json.dumps(fallback))
    primary, backup = build_models(loaded)
    assert isinstance(primary, LLMClient) and isinstance(backup, AnthropicClient)
    backup.complete(Request(model="claude-test", messages=[Message.user("hi")]))
    assert claude.requests[0].headers["x-api-key"] == "sk-ant-fallback"


def test_doctor_probes_every_model_at_its_own_endpoint_with_a_request_every_family_accepts(
    claude: AnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCTOR_CLAUDE_KEY", "sk-ant-fallback")
    with FakeProvider(provider_fakes.reasoning_model_probe) as openai_like:
        fallback = [
            {
                "provider": "anthropic",
                "model": "claude-test",
                "base_url": claude.url,
                "api_key_env": "DOCTOR_CLAUDE_KEY",
            }
        ]
        loaded = settings(
            llm_base_url=openai_like.url + "/v1", llm_model="o4-mini", llm_fallbacks=json.dumps(fallback)
        )
        check = check_llm(loaded)
        [probe] = openai_like.requests
    assert check.outcome is Outcome.PASS, check.summary
    assert "max_tokens" not in probe.body and "temperature" not in probe.body
    lines = check.summary.splitlines()
    assert lines[0].startswith(f"model o4-mini answered at {openai_like.url}/v1")
    assert lines[1].startswith(f"model claude-test answered at {claude.url}")
    assert claude.requests[0].body["max_tokens"] >= 1  # the Anthropic API requires one


def test_doctor_names_the_key_variable_a_fallback_was_refused_with(claude: AnthropicServer) -> None:
    with OpenAIServer(model="gpt-doctor") as primary:
        primary.enqueue(Reply(text="OK"))
        fallback = [
            {
                "provider": "anthropic",
                "model": "claude-test",
                "base_url": claude.url,
                "api_key_env": "DOCTOR_UNSET_KEY",
            }
        ]
        check = check_llm(
            settings(llm_base_url=primary.url, llm_model="gpt-doctor", llm_fallbacks=json.dumps(fallback))
        )
    assert check.outcome is Outcome.FAIL
    assert "DOCTOR_UNSET_KEY" in check.summary and "401" in check.summary


def test_doctor_reports_a_bad_fallbacks_setting() -> None:
    loaded = settings()
    loaded.llm_fallbacks = "[broken"
    check = check_llm(loaded)
    assert check.outcome is Outcome.FAIL and "LLM_FALLBACKS" in check.summary
