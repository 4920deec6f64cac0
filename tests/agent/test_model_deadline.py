"""A model server that keeps every read alive but never finishes cannot outlive the run's deadline.

The server sends a byte every 0.2 s (the whole answer would take minutes); each read returns
well inside the client's read timeout, so only a bound on the whole request ends it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent.config import RunConfig
from agent.memory import InMemoryMemory
from agent.models.openai_client import LLMClient
from agent.run import run
from agent.types import Limits, Message, RunStatus
from emulator.models.openai_server import OpenAIServer, Reply

MODEL = "gpt-test"
LONG = " ".join(f"word{i}" for i in range(400))


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(model=MODEL) as running:
        yield running


@pytest.mark.parametrize(
    ("stream", "reply"),
    [
        (False, Reply(text=LONG, byte_delay=0.2)),
        (True, Reply(text=LONG, text_chunk_size=1, chunk_delay=0.2)),
    ],
    ids=["json", "sse"],
)
def test_a_trickling_answer_ends_the_run_at_its_deadline(
    server: OpenAIServer, stream: bool, reply: Reply
) -> None:
    server.enqueue(reply)
    client = LLMClient(server.url, "sk-test", MODEL, read_timeout=30.0, max_attempts=1)
    memory = InMemoryMemory([Message.user("how is web-03?")])
    config = RunConfig(models=[client], memory=memory, limits=Limits(deadline_seconds=2.0), stream=stream)
    result = run(config)
    assert result.status is RunStatus.DEADLINE
    assert result.error is not None and "still arriving" in result.error
    assert len(server.requests) == 1  # not retried past the deadline
