"""The loop overhead benchmark's peers: the same scripted ReAct loop (K-1 calls to a trivial
``echo`` tool, then a final text) in pydantic-ai, openai-agents, LangGraph and a hand-written loop
(the floor). Each returns a ``Runner``: K -> seconds for one whole run. A peer's framework is
imported only when its runner is made, so one that is not installed is reported as such."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

Runner = Callable[[int], float]  # K -> seconds for one whole run


def pydantic_ai() -> Runner:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import UsageLimits

    def run(k: int) -> float:
        count = 0

        def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            nonlocal count
            count += 1
            if count < k:
                return ModelResponse(parts=[ToolCallPart("echo", {"i": count}, f"call_{count}")])
            return ModelResponse(parts=[TextPart("done")])

        agent = Agent(FunctionModel(answer))

        @agent.tool_plain
        def echo(i: int) -> str:
            """Echo the number."""
            return "ok"

        started = time.perf_counter()
        result = agent.run_sync("check web-03", usage_limits=UsageLimits(request_limit=None))
        elapsed = time.perf_counter() - started
        assert result.output == "done" and count == k
        return elapsed

    return run


def openai_agents() -> Runner:
    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage as AgentsUsage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    set_tracing_disabled(True)

    class Scripted(Model):  # type: ignore[misc]
        def __init__(self, k: int) -> None:
            self.k = k
            self.count = 0

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            self.count += 1
            output: list[Any]
            if self.count < self.k:
                output = [
                    ResponseFunctionToolCall(
                        type="function_call",
                        id=f"fc_{self.count}",
                        call_id=f"call_{self.count}",
                        name="echo",
                        arguments=json.dumps({"i": self.count}),
                        status="completed",
                    )
                ]
            else:
                text = ResponseOutputText(type="output_text", text="done", annotations=[])
                output = [
                    ResponseOutputMessage(
                        id="msg", type="message", role="assistant", status="completed", content=[text]
                    )
                ]
            return ModelResponse(output=output, usage=AgentsUsage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    def echo(i: int) -> str:
        """Echo the number."""
        return "ok"

    def run(k: int) -> float:
        model = Scripted(k)
        agent = Agent(name="ops", model=model, tools=[echo])
        started = time.perf_counter()
        result = Runner.run_sync(agent, "check web-03", max_turns=k + 1)
        elapsed = time.perf_counter() - started
        assert result.final_output == "done" and model.count == k
        return elapsed

    return run


def langgraph(checkpointer: bool) -> Runner:
    from langchain.agents import create_agent
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    class Scripted(BaseChatModel):  # type: ignore[misc]
        k: int
        count: int = 0

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Scripted:
            return self

        def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:  # fmt: skip
            self.count += 1
            if self.count < self.k:
                call = {
                    "name": "echo",
                    "args": {"i": self.count},
                    "id": f"call_{self.count}",
                    "type": "tool_call",
                }
                message = AIMessage(content="", tool_calls=[call])
            else:
                message = AIMessage(content="done")
            return ChatResult(generations=[ChatGeneration(message=message)])

    @tool
    def echo(i: int) -> str:
        """Echo the number."""
        return "ok"

    def run(k: int) -> float:
        model = Scripted(k=k)
        agent = create_agent(model, [echo], checkpointer=InMemorySaver() if checkpointer else None)
        config: dict[str, Any] = {"recursion_limit": 2 * k + 10}
        if checkpointer:
            config["configurable"] = {"thread_id": uuid.uuid4().hex}
        started = time.perf_counter()
        state = agent.invoke({"messages": [{"role": "user", "content": "check web-03"}]}, config)
        elapsed = time.perf_counter() - started
        assert state["messages"][-1].content == "done" and model.count == k
        return elapsed

    return run


TOOLS: dict[str, Callable[..., str]] = {"echo": lambda i: "ok"}  # the floors' tool table


def dict_model(k: int) -> tuple[Callable[[list[dict[str, Any]]], dict[str, Any]], list[int]]:
    """The floors' model: a call to ``echo`` for requests 1..K-1, the answer on request K; and the
    count of requests so far (a one-item list the model updates)."""
    asked = [0]

    def model(messages: list[dict[str, Any]]) -> dict[str, Any]:
        asked[0] += 1
        if asked[0] < k:
            call = {"id": f"call_{asked[0]}", "name": "echo", "arguments": json.dumps({"i": asked[0]})}
            return {"role": "assistant", "tool_calls": [call]}
        return {"role": "assistant", "content": "done"}

    return model, asked


def hand_written_durable(client: Any, prefix: str) -> Runner:
    """The durable floor: the hand-written loop that also persists each iteration, its two new
    messages and the loop's state, in one pipelined Redis round trip (RPUSH + HSET), as a loop
    must to be resumed by another worker. What persistence costs at the least, in the same run."""

    def run(k: int) -> float:
        key = f"{prefix}floor:{uuid.uuid4().hex}"
        model, asked = dict_model(k)
        started = time.perf_counter()
        messages: list[dict[str, Any]] = [{"role": "user", "content": "check web-03"}]
        client.rpush(f"{key}:messages", json.dumps(messages[0]))
        while True:
            reply = model(messages)
            new = [reply]
            if reply.get("tool_calls"):
                for call in reply["tool_calls"]:
                    output = TOOLS[call["name"]](**json.loads(call["arguments"]))
                    new.append({"role": "tool", "tool_call_id": call["id"], "content": output})
            messages.extend(new)
            pipe = client.pipeline(transaction=False)
            pipe.rpush(f"{key}:messages", *[json.dumps(m) for m in new])
            pipe.hset(key, mapping={"iteration": asked[0], "status": "running" if len(new) > 1 else "done"})
            pipe.execute()
            if len(new) == 1:
                break
        elapsed = time.perf_counter() - started
        assert messages[-1]["content"] == "done" and asked[0] == k
        assert client.llen(f"{key}:messages") == 2 * k
        client.delete(key, f"{key}:messages")
        return elapsed

    return run


def hand_written() -> Runner:
    """The floor: a 20-line loop with dicts, a function model and a tool table."""

    def run(k: int) -> float:
        model, asked = dict_model(k)
        started = time.perf_counter()
        messages: list[dict[str, Any]] = [{"role": "user", "content": "check web-03"}]
        while True:
            reply = model(messages)
            messages.append(reply)
            if not reply.get("tool_calls"):
                break
            for call in reply["tool_calls"]:
                output = TOOLS[call["name"]](**json.loads(call["arguments"]))
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
        elapsed = time.perf_counter() - started
        assert messages[-1]["content"] == "done" and asked[0] == k
        return elapsed

    return run
