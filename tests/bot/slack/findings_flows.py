"""What the findings tests share: tools with the test's output, the scripted model's findings,
and reading the Findings message and the answer back from the emulator.

The model is the scripted OpenAI-compatible server over HTTP; the tools' outputs are the test's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from agent.models.openai_client import LLMClient
from agent.tooling import ToolCategory, ToolResult
from agent.types import ToolDef
from emulator.models.openai_server import OpenAIServer, Reply, ScriptedToolCall
from tests.support.slack_bot import SlackBot
from tests.support.waiting import wait_for

MODEL = "gpt-test"
DISK = "/var/log 97% used\napi.log.4    1.2G\napi.log.5  900M"
LOAD = "load average: 0.12 0.10 0.09"


@dataclass
class OutputTool:
    """A read-only tool whose output is the test's."""

    name: str
    output: str
    category: ToolCategory = ToolCategory.READ_ONLY
    parallel: bool = False
    timeout: float = 30.0

    @property
    def definition(self) -> ToolDef:
        return ToolDef(name=self.name, description=f"The {self.name} test tool.")

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        return ToolResult(self.output)

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        return None


def tools(disk: str = DISK, load: str = LOAD) -> list[OutputTool]:
    return [OutputTool("check_disk", disk), OutputTool("check_load", load)]


def client(server: OpenAIServer) -> LLMClient:
    return LLMClient(server.url, "sk-test", MODEL, backoff_base=0.05, read_timeout=10.0, max_attempts=2)


def call(name: str, arguments: dict[str, Any] | None = None) -> Reply:
    return Reply(tool_calls=[ScriptedToolCall(name, arguments or {})])


def hypothesis(hid: str, statement: str, status: str, *evidence: tuple[str, str]) -> dict[str, Any]:
    return {
        "id": hid,
        "statement": statement,
        "status": status,
        "evidence": [{"ref": ref, "quote": quote} for ref, quote in evidence],
    }


def findings(conclusion: str, confidence: str, *hypotheses: dict[str, Any]) -> Reply:
    return call(
        "update_findings",
        {"hypotheses": list(hypotheses), "conclusion": conclusion, "confidence": confidence},
    )


# -- reading back ------------------------------------------------------------------------------


def is_findings(message: dict[str, Any]) -> bool:
    return "Findings" in str(message.get("text") or "").split("\n")[0]


def findings_message(bot: SlackBot, ts: str) -> dict[str, Any]:
    """The thread's one Findings message (there must be exactly one)."""

    def probe() -> dict[str, Any] | None:
        found = [m for m in bot.bot_replies(ts) if is_findings(m)]
        assert len(found) <= 1, found
        return found[0] if found else None

    return wait_for(probe, what="the Findings message")


def sections(message: dict[str, Any]) -> list[str]:
    """The mrkdwn of every section and context of a message, in order."""
    found = []
    for block in message.get("blocks") or []:
        if block.get("type") == "section":
            found.append(str(block["text"]["text"]))
        elif block.get("type") == "context":
            found.extend(str(e.get("text")) for e in block.get("elements") or [])
    return found


def hypothesis_text(message: dict[str, Any], hid: str) -> str:
    block = next(b for b in message.get("blocks") or [] if b.get("block_id") == f"findings_{hid}")
    return str(block["text"]["text"])


def labelled_links(message: dict[str, Any]) -> list[dict[str, Any]]:
    """Links a person reads under another label than their URL: only the bot's own step links."""
    return [item for item in message.get("live") or [] if item["kind"] == "link" and item["disguised"]]


def live_kinds(messages: Sequence[dict[str, Any]]) -> list[str]:
    return [item["kind"] for message in messages for item in message.get("live") or []]


def answer_text(bot: SlackBot, ts: str, marker: str) -> str:
    """The posted answer (the bot's message holding ``marker``)."""

    def probe() -> str | None:
        return next((str(m["text"]) for m in bot.bot_replies(ts) if marker in str(m.get("text"))), None)

    return wait_for(probe, what=f"the answer with {marker!r}")


def user_messages(request: Any) -> list[str]:
    """The user messages of one recorded model request."""
    return [str(m.get("content") or "") for m in request.body["messages"] if m.get("role") == "user"]


def findings_posts(bot: SlackBot) -> list[dict[str, Any]]:
    return [c for c in bot.calls("chat.postMessage") if "Findings" in str(c["params"].get("text"))]


def updates_of(bot: SlackBot, ts: str) -> list[dict[str, Any]]:
    return [c for c in bot.calls("chat.update") if c["params"].get("ts") == ts]


def blocks_of(call_record: dict[str, Any]) -> list[dict[str, Any]]:
    raw = call_record["params"].get("blocks")
    parsed: list[dict[str, Any]] = json.loads(raw) if isinstance(raw, str) else list(raw or [])
    return parsed


def texts_of(blocks: list[dict[str, Any]]) -> Iterator[str]:
    for block in blocks:
        if isinstance(block.get("text"), dict):
            yield str(block["text"]["text"])
        for element in block.get("elements") or []:
            if isinstance(element, dict) and "text" in element:
                yield str(element["text"])
