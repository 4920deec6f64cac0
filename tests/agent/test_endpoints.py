"""Every model of the chain has its own endpoint; a key never travels to a host it was not meant for."""

from __future__ import annotations

import pytest

from agent.errors import ConfigurationError
from agent.models.anthropic_client import AnthropicClient
from agent.models.endpoints import ClientOptions, ModelEndpoint, build_model, parse_fallbacks, secret_values
from agent.models.openai_client import LLMClient
from agent.models.openai_dialect import MISTRAL
from agent.types import Message, Request
from emulator.models.anthropic_server import AnthropicReply, AnthropicServer
from emulator.models.openai_server import OpenAIServer, Reply

PRIMARY = ModelEndpoint(
    provider="openai",
    model="gpt-4o",
    base_url="https://gw.example/v1",
    api_key_env="LLM_API_KEY",
    headers={"X-Gw": "t0ken"},
)


def test_a_bare_model_name_shares_the_primarys_endpoint_key_and_headers() -> None:
    [fallback] = parse_fallbacks("gpt-4o-mini", PRIMARY)
    assert (fallback.provider, fallback.base_url, fallback.api_key_env) == (
        "openai",
        "https://gw.example/v1",
        "LLM_API_KEY",
    )
    assert fallback.headers == {"X-Gw": "t0ken"}


def test_another_provider_gets_its_own_url_and_key_variable() -> None:
    [claude, mistral] = parse_fallbacks(
        "anthropic:claude-sonnet-4-5, openai:mistral-large-latest@https://api.mistral.ai/v1", PRIMARY
    )
    assert (claude.provider, claude.url(), claude.api_key_env) == (
        "anthropic",
        "https://api.anthropic.com",
        "ANTHROPIC_API_KEY",
    )
    assert claude.headers == {}  # the gateway's header stays with the gateway
    assert (mistral.url(), mistral.api_key_env) == ("https://api.mistral.ai/v1", "OPENAI_API_KEY")


def test_model_names_with_colons_and_at_signs_survive_the_compact_form() -> None:
    [ollama, vertex] = parse_fallbacks("llama3.1:8b claude-3-5-sonnet@20240620", PRIMARY)
    assert ollama.model == "llama3.1:8b" and ollama.provider == "openai"
    assert vertex.model == "claude-3-5-sonnet@20240620"


def test_json_fallbacks_say_everything_explicitly() -> None:
    text = """[{"provider": "azure", "model": "gpt-4o", "base_url": "https://r.openai.azure.com/openai/deployments/gpt4o",
               "api_key_env": "AZURE_KEY", "api_version": "2024-06-01"},
              {"provider": "anthropic", "model": "claude-haiku-4-5", "headers": {"anthropic-workspace-id": "wrk_1"}, "max_tokens": 2048},
              "gpt-4.1"]"""
    azure, claude, same = parse_fallbacks(text, PRIMARY)
    assert (azure.api_key_env, azure.api_version) == ("AZURE_KEY", "2024-06-01")
    assert claude.headers == {"anthropic-workspace-id": "wrk_1"} and claude.max_tokens == 2048
    assert same.base_url == PRIMARY.base_url


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ('[{"provider": "anthropic", "model": "c", "api_key": "sk-ant-inline"}]', "api_key_env"),
        ('[{"provider": "bedrock", "model": "c"}]', "provider"),
        ('[{"model": "c", "base_url": "x", "surprise": 1}]', "surprise"),
        ("[not json", "not valid JSON"),
        ('{"model": "c"}', "list"),
    ],
)
def test_bad_fallbacks_are_refused_with_a_reason(text: str, complaint: str) -> None:
    with pytest.raises(ConfigurationError, match=complaint):
        parse_fallbacks(text, PRIMARY)


def test_an_inline_key_is_never_echoed_in_the_error() -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_fallbacks('[{"provider": "anthropic", "model": "c", "api_key": "sk-ant-SECRET"}]', PRIMARY)
    assert "sk-ant-SECRET" not in str(caught.value)


def test_the_primarys_key_goes_to_the_primarys_url_only() -> None:
    with OpenAIServer(model="m", api_key="primary-key") as primary, OpenAIServer(model="m") as other:
        primary.enqueue(Reply(text="a"))
        other.enqueue(Reply(text="b"))
        endpoint = ModelEndpoint(model="m", base_url=primary.url, api_key_env="LLM_API_KEY")
        [same, elsewhere] = parse_fallbacks(f"m-2, m@{other.url}", endpoint)
        keys = {"LLM_API_KEY": "primary-key"}
        build_model(same, keys, ClientOptions()).complete(Request(model="m", messages=[Message.user("hi")]))
        build_model(elsewhere, keys, ClientOptions()).complete(
            Request(model="m", messages=[Message.user("hi")])
        )
        assert primary.requests[0].headers["authorization"] == "Bearer primary-key"
        assert "authorization" not in other.requests[0].headers  # OPENAI_API_KEY is not set


def test_an_anthropic_endpoint_builds_the_native_client_with_its_headers() -> None:
    with AnthropicServer(api_key="sk-ant") as server:
        server.enqueue(AnthropicReply(text="hi"))
        [endpoint] = parse_fallbacks(
            f'[{{"provider": "anthropic", "model": "claude-test", "base_url": "{server.url}", "headers": {{"anthropic-workspace-id": "wrk_9"}}}}]',
            PRIMARY,
        )
        model = build_model(
            endpoint, {"ANTHROPIC_API_KEY": "sk-ant"}, ClientOptions(extra_headers={"X-Team": "sre"})
        )
        assert isinstance(model, AnthropicClient)
        model.complete(Request(model="claude-test", messages=[Message.user("hi")]))
        sent = server.requests[0].headers
    assert (
        sent["anthropic-workspace-id"] == "wrk_9"
        and sent["x-team"] == "sre"
        and sent["x-api-key"] == "sk-ant"
    )


def test_a_dialect_can_be_named_and_an_unknown_one_is_refused() -> None:
    model = build_model(
        ModelEndpoint(model="my-finetune", base_url="https://x.example/v1", dialect="mistral"),
        {},
        ClientOptions(),
    )
    assert isinstance(model, LLMClient) and model.dialect is MISTRAL
    with pytest.raises(ConfigurationError, match="dialect"):
        build_model(ModelEndpoint(model="m", dialect="klingon"), {}, ClientOptions())


def test_an_azure_endpoint_needs_its_deployment_url() -> None:
    with pytest.raises(ConfigurationError, match="deployment URL"):
        build_model(ModelEndpoint(provider="azure", model="gpt-4o"), {}, ClientOptions())


def test_secret_values_cover_keys_and_headers() -> None:
    endpoints = [PRIMARY, *parse_fallbacks("anthropic:claude", PRIMARY)]
    assert sorted(secret_values(endpoints, {"LLM_API_KEY": "k1", "ANTHROPIC_API_KEY": "k2"})) == [
        "k1",
        "k2",
        "t0ken",
    ]
