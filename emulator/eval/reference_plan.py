"""What a scenario's agent does on its expected path, read from its script without a run.

A reference agent is scripted (``emulator.models.scenario``): when every call succeeds and every
card is approved, it answers with its ``turns`` in order (its ``rules`` handle a decline or a
reply). So its calls, the evidence id each result gets (``E1``, ``E2``, ... in call order, the
runtime's rule, ``agent.evidence``) and its last findings are known ahead:

* ``planned_calls``: every call of the turns, with its evidence id (an approved change that
  declares a check, ``CHECKED``, takes two: its own, then its check's, as ``agent.tool_step``
  numbers them);
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

from agent.checks import CheckOutcome, with_check
from agent.evidence import FINDINGS_TOOL, EvidenceIndex, evidence_ref
from agent.findings_tool import parse_claim, verified_findings
from agent.types import Message, ToolCall
from agent.verification import PlannedCall as Planned
from emulator.models.scenario import Scenario

CHECKED: Mapping[str, str] = {"service_restart": "service_status"}
"""The changes a scenario may ask for that declare a check, and the check's tool: the systemd
backend's restart, checked with ``service_status`` (``tools.builtin.services``). On the expected
path every card is approved, so the check runs and its result takes the next evidence id."""


@dataclass(frozen=True)
class PlannedCall:
    ref: str  # the evidence id its result gets
    turn: int
    tool: str
    arguments: Mapping[str, Any]
    check_ref: str | None = None  # the evidence id of its check's result, for a change that declares one

    @property
    def target(self) -> str | None:
        target = self.arguments.get("target")
        return target if isinstance(target, str) else None


def planned_calls(agent: Scenario, approved: bool = True) -> list[PlannedCall]:
    """``approved``: whether the scenario's approver approves the cards (``approver: approve``); a
    declined change runs nothing, so no check of it takes an evidence id."""
    calls: list[PlannedCall] = []
    seq = 0
    for turn, reply in enumerate(agent.turns):
        for call in reply.get("tool_calls") or []:
            arguments = dict(call.get("arguments") or {})
            name = str(call["name"])
            ref = evidence_ref(seq := seq + 1)
            check_ref = evidence_ref(seq := seq + 1) if approved and name in CHECKED else None
            calls.append(PlannedCall(ref, turn, name, arguments, check_ref))
    return calls


def check_call(call: PlannedCall) -> PlannedCall | None:
    """The check of ``call`` as a call of its own (its tool, the action's target and unit), under
    the check's evidence id; ``None`` for a call that declares none."""
    if call.check_ref is None:
        return None
    return PlannedCall(call.check_ref, call.turn, CHECKED[call.tool], call.arguments)


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
            message = Message.tool(f"call-{call.ref}", text, tool=call.tool, evidence=call.ref)
            check = check_call(call)
            if check is not None:
                shown = outputs.get(check.ref) or f"(the output of {check.tool})"
                planned = Planned(check.tool, json.dumps(dict(check.arguments)))
                outcome = CheckOutcome(planned, False, False, shown, 1, 0.0, 1.0)
                message = with_check(message, outcome, check.ref, shown)
            messages.append(message)
    return messages


def _call_key(call: PlannedCall) -> str:
    return json.dumps([call.tool, call.arguments], sort_keys=True)


def known_outputs(reference: Scenario, agent: Scenario, approved: bool = True) -> dict[str, str]:
    """Evidence id of each of ``agent``'s calls -> what it is known to print: the quotes the
    reference cites (in any of its findings) from its own call of the same tool with the same
    arguments, one a line. A call the reference does not make prints nothing known."""
    calls = planned_calls(reference, approved)
    printed: dict[str, list[str]] = {}
    by_ref = {call.ref: _call_key(call) for call in calls}
    by_ref |= {check.ref: _call_key(check) for call in calls if (check := check_call(call)) is not None}
    for update in (call for call in calls if call.tool == FINDINGS_TOOL):
        for ref, quotes in cited_quotes(update.arguments).items():
            if ref in by_ref:
                printed.setdefault(by_ref[ref], []).extend(quotes)
    mine = [*planned_calls(agent, approved)]
    mine += [check for call in mine if (check := check_call(call)) is not None]
    return {
        call.ref: "\n".join(dict.fromkeys(printed[_call_key(call)]))
        for call in mine
        if _call_key(call) in printed
    }


def expected_findings(
    agent: Scenario, outputs: Mapping[str, str] | None = None, approved: bool = True
) -> dict[str, object] | None:
    """The agent's last findings as shown (``None``: it records none), its calls' results printing
    ``outputs`` (evidence id -> text; default: exactly the quotes its last findings cite, as a
    reference's do)."""
    calls = planned_calls(agent, approved)
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
