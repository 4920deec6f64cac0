"""A run whose OpenAI-compatible primary fails mid-run carries on with an Anthropic fallback (or a
Mistral one), history intact: each provider gets the whole conversation in the form it accepts."""

from __future__ import annotations

import pytest

from agent.config import RunConfig
from agent.memory import InMemoryMemory
from agent.models.anthropic_client import AnthropicClient
from agent.models.openai_client import LLMClient
from agent.run import Run
from agent.types import Message, RunStatus
from emulator.models.anthropic_server import AnthropicReply, AnthropicServer
from emulator.models.openai_server import OpenAIServer, Reply, ScriptedToolCall, ScriptedUsage
from tests.agent import provider_fakes
from tests.support.anthropic_types import check_request
from tests.support.fake_provider import FakeProvider
from tests.support.tools import RecordingTool


def no_sleep(_: float) -> None:
    return None


@pytest.mark.parametrize("stream", [False, True])
def test_openai_primary_then_anthropic_fallback_mid_run(stream: bool) -> None:
    disk = RecordingTool("disk_usage", respond=lambda _: "/ 97% used by /var/log/nginx")
    usage = ScriptedUsage(prompt_tokens=400, completion_tokens=20, cached_tokens=0)
    with OpenAIServer(model="gpt-test") as openai, AnthropicServer(api_key="sk-ant") as claude:
        openai.enqueue(
            Reply(tool_calls=[ScriptedToolCall("disk_usage", {"path": "/"}, id="call_Zx9.q")], usage=usage),
            *(Reply.server_error(503) for _ in range(3)),
        )
        claude.enqueue(AnthropicReply(text="web-03: / is 97% full, nginx logs. Nothing changed."))
        primary = LLMClient(openai.url, "sk-openai", "gpt-test", sleep=no_sleep, max_attempts=3)
        fallback = AnthropicClient(claude.url, "sk-ant", "claude-test", sleep=no_sleep)
        memory = InMemoryMemory([Message.user("web-03 is out of disk", slack_user="U1")])
        config = RunConfig(
            models=[primary, fallback],
            memory=memory,
            tools=[disk],
            system_prompt="You are ops.",
            stream=stream,
        )
        result = Run(config).execute()
        [to_claude] = [record.body for record in claude.requests]
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.output == "web-03: / is 97% full, nginx logs. Nothing changed."
    assert disk.calls == [{"path": "/"}]  # run once, by the primary's turn; not again after the switch

    check_request(to_claude)
    assert to_claude["system"][0]["text"] == "You are ops."
    user, assistant, results = to_claude["messages"]
    assert user["content"][0]["text"] == "web-03 is out of disk"
    [use] = assistant["content"]
    assert (use["type"], use["name"], use["input"]) == ("tool_use", "disk_usage", {"path": "/"})
    assert results["content"][0]["tool_use_id"] == use["id"]
    assert results["content"][0]["content"] == "/ 97% used by /var/log/nginx"

    history = memory.load_messages()
    assert [m.role for m in history] == ["system", "user", "assistant", "tool", "assistant"]
    assert history[2].provider_source is not None and history[2].provider_source.startswith("openai:")
    assert history[4].provider_source is not None and history[4].provider_source.startswith("anthropic:")
    assert history[4].meta["model"] == "claude-test" and result.model == "claude-test"


def test_openai_primary_then_mistral_fallback_gets_ids_it_accepts() -> None:
    disk = RecordingTool("disk_usage", respond=lambda _: "/ 97% used")
    with OpenAIServer(model="gpt-test") as openai, FakeProvider(provider_fakes.mistral) as mistral:
        openai.enqueue(
            Reply(tool_calls=[ScriptedToolCall("disk_usage", {"path": "/"})]),
            *(Reply.server_error(502) for _ in range(2)),
        )
        models = [
            LLMClient(openai.url, "sk", "gpt-test", sleep=no_sleep, max_attempts=2),
            LLMClient(mistral.url + "/v1", "sk-mistral", "mistral-large-latest", sleep=no_sleep),
        ]
        memory = InMemoryMemory([Message.user("web-03 is out of disk")])
        result = Run(RunConfig(models=models, memory=memory, tools=[disk])).execute()
        sent = mistral.requests[0].body["messages"]
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.output == "/ is 97% full."
    assert sent[2]["tool_calls"][0]["id"] == sent[3]["tool_call_id"]


def test_the_same_model_name_on_two_endpoints_is_two_models_of_the_chain() -> None:
    with OpenAIServer(model="gpt-4o") as openai, OpenAIServer(model="gpt-4o") as azure_like:
        openai.enqueue(*(Reply.server_error(503) for _ in range(2)))
        azure_like.enqueue(Reply(text="answered by the second endpoint"))
        models = [
            LLMClient(openai.url, "sk", "gpt-4o", sleep=no_sleep, max_attempts=2),
            LLMClient(azure_like.url, "sk", "gpt-4o", sleep=no_sleep, max_attempts=2),
        ]
        result = Run(RunConfig(models=models, memory=InMemoryMemory([Message.user("hi")]))).execute()
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.output == "answered by the second endpoint"
