"""What a scenario's reference agent does on its expected path, read from its script without a run.

A reference agent is scripted (``emulator.models.scenario``): when every call succeeds and every
card is approved, it answers with its ``turns`` in order (its ``rules`` handle a decline or a
reply). So its calls, the evidence id each result gets (``E1``, ``E2``, ... in call order, the
runtime's rule, ``agent.evidence``) and its last findings are known ahead:

* ``planned_calls``: every call of the turns, with its evidence id;
* ``expected_findings``: its last ``update_findings`` as a run would show it, the runtime's own
  verification (``agent.findings_tool``) applied to results that hold exactly the quotes cited
  from them. What a run shows when the simulated hosts print what the scenario says they do, so
  the scorer can be run on the truth's own solution before any process starts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.evidence import FINDINGS_TOOL, EvidenceIndex, evidence_ref
from agent.findings_tool import parse_claim, verified_findings
from agent.types import Message, ToolCall
from emulator.models.scenario import Scenario


@dataclass(frozen=True)
class PlannedCall:
    ref: str  # the evidence id its result gets
    turn: int
    tool: str
    arguments: Mapping[str, Any]

    @property
    def target(self) -> str | None:
        target = self.arguments.get("target")
        return target if isinstance(target, str) else None


def planned_calls(agent: Scenario) -> list[PlannedCall]:
    calls: list[PlannedCall] = []
    for turn, reply in enumerate(agent.turns):
        for call in reply.get("tool_calls") or []:
            arguments = dict(call.get("arguments") or {})
            calls.append(PlannedCall(evidence_ref(len(calls) + 1), turn, str(call["name"]), arguments))
    return calls


def claimed_findings(calls: Sequence[PlannedCall]) -> PlannedCall | None:
    """The reference's last ``update_findings`` call."""
    return next((call for call in reversed(calls) if call.tool == FINDINGS_TOOL), None)


def cited_quotes(claim: Mapping[str, Any]) -> dict[str, list[str]]:
    """Evidence id -> the quotes ``claim`` cites from it."""
    quotes: dict[str, list[str]] = {}
    for hypothesis in claim.get("hypotheses") or []:
        for evidence in hypothesis.get("evidence") or []:
            quotes.setdefault(str(evidence.get("ref")), []).append(str(evidence.get("quote")))
    return quotes


def _history(calls: Sequence[PlannedCall], quotes: Mapping[str, list[str]]) -> list[Message]:
    messages = [Message.user("(the scenario's start)")]
    for turn in sorted({call.turn for call in calls}):
        in_turn = [call for call in calls if call.turn == turn]
        tool_calls = [
            ToolCall(id=f"call-{call.ref}", name=call.tool, arguments=json.dumps(call.arguments))
            for call in in_turn
        ]
        messages.append(Message.assistant(None, tool_calls))
        for call in in_turn:
            text = "\n".join(quotes.get(call.ref, [])) or f"(the output of {call.tool})"
            messages.append(Message.tool(f"call-{call.ref}", text, tool=call.tool, evidence=call.ref))
    return messages


def expected_findings(agent: Scenario) -> dict[str, object] | None:
    """The reference's last findings as shown when every quote occurs in the output it cites
    (``None``: it records none)."""
    calls = planned_calls(agent)
    last = claimed_findings(calls)
    if last is None:
        return None
    before = [call for call in calls if int(call.ref[1:]) < int(last.ref[1:])]
    index = EvidenceIndex().sync(_history(before, cited_quotes(last.arguments)))
    version = sum(1 for call in calls if call.tool == FINDINGS_TOOL)
    claim = parse_claim(json.dumps(last.arguments))
    return verified_findings(claim, index, version).as_json()
