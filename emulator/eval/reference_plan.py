"""What a scenario's agent does on its expected path, read from its script without a run.

A reference agent is scripted (``emulator.models.scenario``): when every call succeeds and every
card is approved, it answers with its ``turns`` in order (its ``rules`` handle a decline or a
reply). So its calls, the evidence id each result gets (``E1``, ``E2``, ... in call order, the
runtime's rule, ``agent.evidence``) and its last findings are known ahead:

* ``planned_calls``: every call of the turns, with its evidence id;
* ``expected_findings``: its last ``update_findings`` as a run would show it, the runtime's own
  verification (``agent.findings_tool``) applied to results that hold exactly the quotes cited
  from them. What a run shows when the simulated hosts print what the scenario says they do, so
  the scorer can be run on the truth's own solution before any process starts;
* ``known_outputs``: for another agent of the scenario (``emulator.eval.agents``), what each of its
  calls is known to print: the quotes the reference cites from the same call (tool and
  arguments). ``expected_findings(agent, known_outputs(reference, agent))`` is then that agent's
  findings as a run shows them: a quote it cites verifies only where the reference's does.
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
    """The last ``update_findings`` call."""
    return next((call for call in reversed(calls) if call.tool == FINDINGS_TOOL), None)


def cited_quotes(claim: Mapping[str, Any]) -> dict[str, list[str]]:
    """Evidence id -> the quotes ``claim`` cites from it."""
    quotes: dict[str, list[str]] = {}
    for hypothesis in claim.get("hypotheses") or []:
        for evidence in hypothesis.get("evidence") or []:
            quotes.setdefault(str(evidence.get("ref")), []).append(str(evidence.get("quote")))
    return quotes


def _history(calls: Sequence[PlannedCall], outputs: Mapping[str, str]) -> list[Message]:
    messages = [Message.user("(the scenario's start)")]
    for turn in sorted({call.turn for call in calls}):
        in_turn = [call for call in calls if call.turn == turn]
        tool_calls = [
            ToolCall(id=f"call-{call.ref}", name=call.tool, arguments=json.dumps(call.arguments))
            for call in in_turn
        ]
        messages.append(Message.assistant(None, tool_calls))
        for call in in_turn:
            text = outputs.get(call.ref) or f"(the output of {call.tool})"
            messages.append(Message.tool(f"call-{call.ref}", text, tool=call.tool, evidence=call.ref))
    return messages


def _call_key(call: PlannedCall) -> str:
    return json.dumps([call.tool, call.arguments], sort_keys=True)


def known_outputs(reference: Scenario, agent: Scenario) -> dict[str, str]:
    """Evidence id of each of ``agent``'s calls -> what it is known to print: the quotes the
    reference cites (in any of its findings) from its own call of the same tool with the same
    arguments, one a line. A call the reference does not make prints nothing known."""
    calls = planned_calls(reference)
    printed: dict[str, list[str]] = {}
    by_ref = {call.ref: _call_key(call) for call in calls}
    for update in (call for call in calls if call.tool == FINDINGS_TOOL):
        for ref, quotes in cited_quotes(update.arguments).items():
            if ref in by_ref:
                printed.setdefault(by_ref[ref], []).extend(quotes)
    return {
        call.ref: "\n".join(dict.fromkeys(printed[_call_key(call)]))
        for call in planned_calls(agent)
        if _call_key(call) in printed
    }


def expected_findings(agent: Scenario, outputs: Mapping[str, str] | None = None) -> dict[str, object] | None:
    """The agent's last findings as shown (``None``: it records none), its calls' results printing
    ``outputs`` (evidence id -> text; default: exactly the quotes its last findings cite, as a
    reference's do)."""
    calls = planned_calls(agent)
    last = claimed_findings(calls)
    if last is None:
        return None
    if outputs is None:
        outputs = {ref: "\n".join(quotes) for ref, quotes in cited_quotes(last.arguments).items()}
    before = [call for call in calls if int(call.ref[1:]) < int(last.ref[1:])]
    index = EvidenceIndex().sync(_history(before, outputs))
    version = sum(1 for call in calls if call.tool == FINDINGS_TOOL)
    claim = parse_claim(json.dumps(last.arguments))
    return verified_findings(claim, index, version).as_json()
