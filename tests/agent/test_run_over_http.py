"""The loop against the real HTTP client and a real OpenAI-compatible server."""

from __future__ import annotations

import json

import pytest

from agent.config import RunConfig
from agent.memory import InMemoryMemory
from agent.models.openai_client import LLMClient
from agent.run import Run
from agent.types import Message, RunStatus
from emulator.models.openai_server import OpenAIServer, Reply, ScriptedToolCall, ScriptedUsage
from tests.support.tools import RecordingTool


def cacheable_prefix(raw: bytes) -> tuple[bytes, bytes]:
    """The raw bytes of the system message and of the tool list, as sent."""
    system_end = raw.index(b"},", raw.index(b'"role":"system"')) + 1
    system = raw[raw.index(b'"messages":[') : system_end]
    tools_start = raw.index(b'"tools":')
    tools_end = raw.index(b"]", raw.rindex(b'"parameters"')) + 1
    return system, raw[tools_start:tools_end]


@pytest.mark.parametrize("stream", [False, True])
def test_prefix_bytes_are_identical_across_a_runs_requests(stream: bool) -> None:
    usage = ScriptedUsage(prompt_tokens=500, completion_tokens=20, cached_tokens=400)
    with OpenAIServer(model="gpt-test") as server:
        server.enqueue(
            Reply(
                tool_calls=[ScriptedToolCall("disk_usage", {"path": "/"})], usage=usage, argument_chunk_size=3
            ),
            Reply(tool_calls=[ScriptedToolCall("top_processes", {"by": "cpu"})], usage=usage),
            Reply(text="web-03: / is 97% full; nginx logs are the culprit.", usage=usage),
        )
        tools = [RecordingTool("top_processes", respond=lambda a: "nginx 80%"), RecordingTool("disk_usage")]
        with LLMClient(server.url, "sk-test", "gpt-test", sleep=lambda s: None) as client:
            memory = InMemoryMemory([Message.user("web-03 is out of disk")])
            result = Run(RunConfig(models=[client], memory=memory, tools=tools, stream=stream)).execute()
        bodies = [r.raw_body for r in server.requests]
    assert result.status is RunStatus.COMPLETED and result.model == "gpt-test"
    assert result.usage.cache_read_tokens == 1200 and result.usage.paid_tokens == 3 * 120
    assert len(bodies) == 3
    assert len({cacheable_prefix(body) for body in bodies}) == 1
    assert json.loads(bodies[0])["tools"][0]["function"]["name"] == "disk_usage"
    assert tools[1].calls == [{"path": "/"}]  # arguments split over SSE chunks arrive whole
