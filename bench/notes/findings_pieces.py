"""The findings row's pieces, timed one by one for the tree in argv[1] (bench/notes/loop_overhead.md,
"Findings' margin"): ``python bench/notes/findings_pieces.py TREE``, alternating two trees.

The history is a K=200 in-memory run with ``update_findings`` every 5th turn; each figure is the
minimum of 25 passes, in microseconds. Private attributes are reached on purpose: each piece is
timed as the loop runs it, with what a real update would find already remembered cleared.
"""

from __future__ import annotations

import sys
import timeit
from collections.abc import Callable
from typing import Any

TREE = sys.argv[1] if len(sys.argv) > 1 else "."
sys.path.insert(0, TREE)

import agent.redis_memory as rm  # noqa: E402  (the tree named on the command line first)
from agent.events import IterationStarted, ToolEnd, ToolStart  # noqa: E402
from agent.evidence import EvidenceIndex  # noqa: E402
from agent.findings_tool import parse_claim, verified_findings  # noqa: E402
from agent.memory import InMemoryMemory  # noqa: E402
from agent.redis_memory import RedisMemory  # noqa: E402
from agent.run import Run  # noqa: E402
from agent.types import Message, ToolCall  # noqa: E402
from bench.loop_findings import findings_call  # noqa: E402
from bench.loop_overhead import _chatops_config  # noqa: E402
from bot.slack.rendering.findings import findings_blocks  # noqa: E402

memory = InMemoryMemory([Message.user("check web-03")])
Run(_chatops_config(200, memory, cite_every=5)).execute()
messages = memory.load_messages()
state = memory.load_state()
assert state is not None
call = ToolCall(id="call_1", name="echo", arguments="{}")
claim = parse_claim(findings_call(messages, "call_x").arguments)
index = EvidenceIndex().sync(messages)


def events() -> None:
    IterationStarted(3, state.usage, "scripted")
    ToolStart(call, None)
    ToolEnd(call, None, "ok", False, 0.1, True, None, None, "E1", None)


def indexing() -> None:
    fresh = EvidenceIndex().sync(messages)
    fresh.problem_with("E150", "ok")
    fresh.problem_with("E149", "ok")


def verify() -> Any:
    index._verdicts.clear()
    index._problems.clear()
    if hasattr(index, "_entries"):  # the lazy index: its Sources built again, as at a first citation
        index._sources.clear()
    return verified_findings(claim, index, 3)


findings = verify()
redis_memory: Any = RedisMemory.__new__(RedisMemory)
redis_memory._dumps, redis_memory._encoded = {}, {}
encodes_text = rm._encode.__code__.co_argcount > 4


def state_write() -> None:
    redis_memory._dumps.clear()
    state.findings = findings
    dumped = redis_memory._dumped(state)
    stored = {name: value for name, value in dumped.items() if name != "findings"}
    rm._encode("running", dumped, 1.0, stored, *([redis_memory._encoded] if encodes_text else []))


def append() -> None:
    kept = InMemoryMemory()
    state.findings = findings
    for _ in range(20):
        kept.append([], state)


def render() -> None:
    findings_blocks(findings, "bench", "https://example.slack.com/archives/C_BENCH/p1")


PIECES: list[tuple[str, Callable[[], Any], int]] = [
    ("events of one listened-to iteration", events, 1),
    ("indexing, per iteration (2 citations)", indexing, 200),
    ("verifying an update", verify, 1),
    ("the state's dump and encoding at an update (Redis)", state_write, 1),
    ("an in-memory append with findings", append, 20),
    ("the Findings message of an update", render, 1),
]
for name, piece, per in PIECES:
    best = min(timeit.repeat(piece, number=200, repeat=25)) / 200 / per * 1e6
    print(f"{name}: {best:.2f} us")
