"""The loop's unvalidated copies (``agent.types.revised``) are the objects validation would build.

The loop copies its own, already validated objects without validating them again (a stored call's
ids, the answer's text, a request, a tool result, a usage sum). These tests hold each copy equal to
what ``model_copy`` or the validating constructor gives, field by field and as stored JSON, so a
pydantic upgrade that changes a model's layout fails here, not in a run.
"""

from __future__ import annotations

import pickle

from pydantic import BaseModel

from agent.types import Message, Request, ToolCall, ToolDef, Usage, revised


def same(copy: BaseModel, reference: BaseModel) -> None:
    assert type(copy) is type(reference)
    assert copy == reference
    assert copy.model_dump_json() == reference.model_dump_json()
    assert copy.__pydantic_extra__ is None and copy.__pydantic_private__ is None
    assert pickle.loads(pickle.dumps(copy)) == reference  # a job's result travels pickled (RQ)


def test_a_revised_call_is_its_model_copy_and_leaves_the_original_alone() -> None:
    call = ToolCall(
        id="call_1", name="echo", arguments='{"i": 1}', provider_fields={"extra_content": {"x": 1}}
    )
    changes = {"id": "x00000001", "provider_id": "call_1", "refused": "no"}
    copy = revised(call, changes)
    same(copy, call.model_copy(update=changes))
    assert copy.model_fields_set == call.model_copy(update=changes).model_fields_set
    assert call.id == "call_1" and call.refused == ""  # the original is unchanged


def test_a_revised_message_is_its_model_copy() -> None:
    message = Message(role="assistant", content="text", tool_calls=[ToolCall(id="a", name="echo")])
    changes = {"content": "redacted", "meta": {"model": "m"}, "tool_calls": []}
    same(revised(message, changes), message.model_copy(update=changes))


def test_a_run_request_is_the_validated_request() -> None:
    messages = [Message.system("s"), Message.user("u", slack_user="U1")]
    tools = [ToolDef(name="echo", description="d")]
    request = Request.of_run("gpt", messages, tools, 12.5)
    same(request, Request(model="gpt", messages=messages, tools=tools, time_left=12.5))
    assert request.messages is messages  # the caller's copy of the history, not another one


def test_a_tool_result_is_the_validated_tool_message_with_lists_of_its_own() -> None:
    first = Message.tool_result("x1", "ok", {"tool": "echo", "duration": 0.5, "category": "read_only"})
    same(first, Message.tool("x1", "ok", tool="echo", duration=0.5, category="read_only"))
    second = Message.tool_result("x2", "ok", {"tool": "echo"})
    first.tool_calls.append(ToolCall(id="z", name="echo"))
    first.provider_fields["k"] = "v"
    assert second.tool_calls == [] and second.provider_fields == {}  # nothing shared between results


def test_a_usage_sum_is_the_validated_sum() -> None:
    one = Usage(prompt_tokens=10, completion_tokens=5, cache_read_tokens=2, cache_write_tokens=1)
    two = Usage(prompt_tokens=7, completion_tokens=3)
    same(one + two, Usage(prompt_tokens=17, completion_tokens=8, cache_read_tokens=2, cache_write_tokens=1))
    assert one.prompt_tokens == 10  # the operands are unchanged
