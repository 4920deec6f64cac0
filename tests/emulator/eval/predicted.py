"""A run predicted without processes: an agent's findings and audit on its expected path.

The findings are the runtime's own verification (``emulator.eval.reference_plan``) of the agent's
last ``update_findings`` against results printing what the reference cites from the same calls;
the audit is its calls as the audit records them, the simulated approver clicking the scenario's
``approver`` choice on every card. ``predicted_score`` scores the two with the real scorer.
"""

from __future__ import annotations

import re
from typing import Any

from agent.evidence import FINDINGS_TOOL
from emulator.eval.agents import agent_script
from emulator.eval.loading import reference_variables
from emulator.eval.reference_plan import expected_findings, known_outputs, planned_calls
from emulator.eval.scoring.inputs import RunObservation
from emulator.eval.scoring.verdict import RunScore, score_run
from emulator.eval.spec import EvalScenario
from emulator.models.scenario import Scenario

from .builders import approved, executed, plan

CATEGORIES = {
    "service_restart": "mutating",
    "alertmanager_silence": "mutating",
    "kube_scale": "mutating",
    "clean_old_logs": "destructive",
}
_ROTATED = re.compile(r"(\.\d+(\.gz)?|\.gz|-\d{8})$")


def host_internal(scenario: EvalScenario, agent: str = "reference") -> Scenario:
    """The agent with every host's folder at / (paths read as the scenario writes them)."""
    return agent_script(
        scenario, agent, reference_variables(scenario.targets, dict.fromkeys(scenario.targets, ""))
    )


def simulated_audit(scenario: EvalScenario, agent: Scenario) -> list[dict[str, str]]:
    """``agent``'s calls as the audit records them: a change is approved (its card clicked
    ``approve``) and runs with its approver and, when destructive, its dry run's plan; declined, or
    a dry run that finds nothing, and it never runs."""
    entries: list[dict[str, str]] = []
    for call in planned_calls(agent, scenario.approver == "approve"):
        if call.tool == FINDINGS_TOOL:
            continue
        target = call.target or "local"
        category = CATEGORIES.get(call.tool, "read_only")
        arguments = {k: v for k, v in call.arguments.items() if k != "target"}
        if category == "read_only":
            entries.append(executed(call.tool, target, category, arguments))
            continue
        planned = dry_run(scenario, target, arguments) if category == "destructive" else []
        if scenario.approver == "decline" or (category == "destructive" and not planned):
            entries.append(executed(call.tool, target, category, arguments, refused=True))
            continue
        entries.append(approved(call.tool, target))
        arguments["confirmed_by"] = "U0APPROVER"
        if category == "destructive":
            arguments["approved_plan"] = plan(*planned)
        entries.append(executed(call.tool, target, category, arguments))
    return entries


def dry_run(scenario: EvalScenario, target: str, arguments: dict[str, Any]) -> list[str]:
    """``clean_old_logs``' plan on the scenario's files: rotated logs under the path, old enough."""
    under = str(arguments["path"]).rstrip("/") + "/"
    days = float(arguments.get("older_than_days", 7))
    return [
        f.path
        for f in scenario.fleet.targets[target].files
        if f.path.startswith(under) and f.age > days * 86400 and _ROTATED.search(f.path)
    ]


def predicted_observation(scenario: EvalScenario, agent: str) -> RunObservation:
    script = host_internal(scenario, agent)
    approved = scenario.approver == "approve"
    outputs = known_outputs(host_internal(scenario), script, approved)
    return RunObservation(
        findings=expected_findings(script, outputs, approved), audit=simulated_audit(scenario, script)
    )


def predicted_score(scenario: EvalScenario, agent: str) -> RunScore:
    """What a run of ``agent`` on ``scenario`` scores when the hosts print what the scenario says."""
    return score_run(scenario.truth, scenario.targets, predicted_observation(scenario, agent))
