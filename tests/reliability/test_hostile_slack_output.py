"""A hostile model and a hostile log line try to ping people and disguise links in Slack.

Through the real web app, the Slack emulator and a worker with the production presenter: the
model answers with user, group and channel mentions, a broadcast, a bare ``@here``, a Markdown
link whose label is another URL and a Slack link with a false label; a tool returns a log line
with the same, the model passes them as tool arguments (run card, approval card) and fails with
them in its error (stop notice); the transcript holds them all. Every message the bot sent, in
every version (each ``chat.postMessage``, ``chat.update`` and ``chat.postEphemeral``), is read
the way Slack renders it (``emulator.slack.live``): nothing is live but the people the bot
names itself, and each attack is shown as text on each surface it was aimed at.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent.errors import ProviderError
from agent.scripted import ScriptItem, tool_call
from agent.tooling import ToolCategory
from agent.types import Request, RunStatus
from bot.slack.rendering import render
from bot.slack.rendering.blockkit import APPROVAL_CONTROLS, RUN_CONTROLS
from emulator.slack.live import Live, live_in_message
from tests.reliability.test_hostile_model import SecureBot, emulator, restart_tool, secure_bot
from tests.support.tools import RecordingTool
from tests.support.waiting import wait_for

__all__ = ["emulator", "secure_bot"]  # the hostile suite's fixtures (Mallory in the channel)

pytestmark = pytest.mark.reliability

ATTACKS = {  # what the model and the log line write -> how to find it shown (as text) in Slack
    "user mention": ("<@U_BOB>", r"U_BOB"),
    "user-group mention": ("<!subteam^S_ONCALL>", r"subteam\^S_ONCALL"),
    "channel link": ("<#C_RANDOM>", r"C_RANDOM"),
    "broadcast": ("<!channel>", r"!channel"),
    "bare broadcast": ("@here", "@\u2060?here"),
    "Markdown link under another URL": (
        "[https://grafana.corp/d/1](https://evil.example/1)",
        r"evil\.example/1",
    ),
    "Slack link under another URL": ("<https://evil.example/2|https://grafana.corp/d/2>", r"evil\.example/2"),
}
EVERYTHING = " ".join(text for text, _ in ATTACKS.values())
SURFACES = ("run card", "approval card", "answer", "stop notice", "transcript")
PEOPLE = frozenset({"U_ALICE"})  # the requester, who also approves and asks for the transcript


def hostile_model(request: Request) -> ScriptItem:
    """Run "answer": log reads, a restart with hostile arguments, a hostile answer. Run "fail": a
    log read, then a model error carrying the attacks."""
    first = next((m.content or "" for m in request.messages if m.role == "user"), "")
    turns = sum(1 for m in request.messages if m.role == "assistant")
    reads = [
        tool_call("tail_log", f"c{i}", line=i, filter=text) for i, (text, _) in enumerate(ATTACKS.values())
    ]
    if "fail" in first:
        return reads[:1] if turns == 0 else ProviderError(f"upstream said: {EVERYTHING}", model="m")
    if turns == 0:
        return reads
    if turns == 1:
        return tool_call("restart_service", "r1", service="api", note=EVERYTHING)
    return f"## Findings\n{EVERYTHING}\n\n- see `{EVERYTHING}`\n```\n{EVERYTHING}\n```"


def log_line(arguments: dict[str, Any]) -> str:
    text = list(ATTACKS.values())[int(arguments.get("line", 0)) % len(ATTACKS)][0]
    return f"2026-01-01T00:00:00Z ERROR auth: {text} (paged by the log)"


def sent(bot: SecureBot) -> list[dict[str, Any]]:
    """Every message version the bot sent: text and blocks of each post, update and ephemeral."""
    found = []
    for method in ("chat.postMessage", "chat.update", "chat.postEphemeral"):
        for call in bot.calls(method):
            params = call["params"]
            blocks = params.get("blocks")
            blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
            found.append({"method": method, "text": params.get("text") or "", "blocks": blocks or []})
    return found


def surface(message: dict[str, Any]) -> str:
    shown = json.dumps(message)
    if message["text"].startswith(":scroll: *Transcript"):
        return "transcript"
    if APPROVAL_CONTROLS in shown or message["text"].startswith("Approval"):
        return "approval card"
    if RUN_CONTROLS in shown:
        return "run card"
    if "Why:" in message["text"]:
        return "stop notice"
    return "answer" if message["method"] == "chat.postMessage" else "other"


def offences(message: dict[str, Any]) -> list[Live]:
    return [
        part
        for part in live_in_message(message)
        if part.kind in ("channel", "usergroup", "broadcast", "unknown")
        or (part.kind == "user" and part.target not in PEOPLE)
        or part.disguised
    ]


def test_no_text_from_the_model_or_a_tool_pings_anyone_or_disguises_a_link(
    secure_bot: Callable[..., SecureBot], tmp_path: Path
) -> None:
    tail = RecordingTool("tail_log", ToolCategory.READ_ONLY, respond=log_line)
    bot = secure_bot(hostile_model, [tail, restart_tool(tmp_path)])
    ts = bot.mention("answer: what is in the logs?")
    run_id = bot.run_id(ts)
    bot.work()
    card = wait_for(lambda: next((m for m in bot.bot_replies(ts) if "Approval" in m["text"]), None))
    bot.control.click(card["ts"], "U_ALICE", action_id=render.ACTION_APPROVE)
    wait_for(lambda: bot.service.queue.count, what="the resume job")
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    run_card = bot.bot_replies(ts)[0]
    wait_for(lambda: "Done" in json.dumps(bot.message(ts, run_card["ts"])["blocks"]), what="the final card")
    bot.control.click(run_card["ts"], "U_ALICE", action_id=render.ACTION_TRANSCRIPT)
    wait_for(lambda: [m for m in sent(bot) if surface(m) == "transcript"], what="the transcript")
    failing = bot.mention("fail: and now?")
    failed_run = bot.run_id(failing)
    bot.work()
    assert bot.status(failed_run) is RunStatus.FAILED
    wait_for(lambda: [m for m in sent(bot) if surface(m) == "stop notice"], what="the stop notice")

    messages = sent(bot)
    tried = held = 0
    for name, (_, shown) in ATTACKS.items():
        for where in SURFACES:
            aimed = [
                m
                for m in messages
                if surface(m) == where
                and re.search(shown, json.dumps(m["blocks"], ensure_ascii=False) + m["text"])
            ]
            assert aimed, f"the {name} never reached the {where}: the test would prove nothing"
            tried += 1
            held += not any(offences(m) for m in aimed)
    everywhere = [(m["method"], part) for m in messages for part in offences(m)]
    assert everywhere == [], everywhere
    # What a person sees now: the thread's messages as the emulator shows them (with ephemerals).
    for thread in (ts, failing):
        for message in bot.control.thread("C_INCIDENT", thread, viewer="U_ALICE")[1:]:
            wrong = [
                p
                for p in message["live"]
                if p["disguised"]
                or p["kind"] not in ("user", "link", "date")
                or (p["kind"] == "user" and p["target"] not in PEOPLE)
            ]
            assert wrong == [], wrong
    assert (tried, held) == (len(ATTACKS) * len(SURFACES), len(ATTACKS) * len(SURFACES))
    print(f"hostile Slack output: {tried} attacks tried, {held} held")
