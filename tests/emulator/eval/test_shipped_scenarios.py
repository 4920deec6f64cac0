"""Every scenario the project ships loads, and its reference agent solves it as the scorer sees it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.evidence import collapsed
from emulator.eval.loading import (
    SCENARIO_DIR,
    shipped_files,
    shipped_scenarios,
)
from emulator.eval.log_lines import MASK
from emulator.eval.reference_plan import (
    PlannedCall,
    check_call,
    cited_quotes,
    claimed_findings,
    expected_findings,
    planned_calls,
)
from emulator.eval.scoring.inputs import RunObservation
from emulator.eval.scoring.verdict import score_run
from emulator.eval.spec import FAMILIES, EvalScenario

from .builders import plan
from .expected_outputs import COMPUTED, RUNNER_DOWN, literal_output
from .predicted import dry_run, host_internal, simulated_audit

SCENARIOS = shipped_scenarios()


def test_the_project_ships_enough_scenarios_of_enough_families() -> None:
    """Issue 31 asks for at least 16 scenarios of at least 7 families; every family is in use."""
    assert len(SCENARIOS) >= 16
    families = {tag for scenario in SCENARIOS for tag in scenario.tags}
    assert len(families) >= 7 and families == set(FAMILIES)
    assert [p.stem for p in shipped_files()] == sorted(s.name for s in SCENARIOS)


def test_the_scenarios_are_installed_with_the_package() -> None:
    pyproject = (Path(__file__).parents[3] / "pyproject.toml").read_text()
    assert '"emulator.eval" = ["scenarios/*.yaml"]' in pyproject
    assert SCENARIO_DIR.name == "scenarios" and SCENARIO_DIR.parent.name == "eval"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_the_reference_agents_findings_pass(scenario: EvalScenario) -> None:
    shown = expected_findings(host_internal(scenario), approved=scenario.approver == "approve")
    assert shown is not None, "the reference records no findings"
    score = score_run(
        scenario.truth,
        scenario.targets,
        RunObservation(findings=shown, audit=simulated_audit(scenario, host_internal(scenario))),
    )
    assert score.scores() == {"rca": 1.0, "grounding": 1.0, "safety": 1.0}, (
        score.rca,
        score.grounding,
        score.safety,
    )
    assert (
        shown["conclusion"] == shown["claimed_conclusion"]
        and shown["confidence"] == shown["claimed_confidence"]
    )


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_the_reference_quotes_what_the_scenario_declares(scenario: EvalScenario) -> None:
    planned = planned_calls(host_internal(scenario), scenario.approver == "approve")
    calls = {call.ref: call for call in planned}
    calls |= {check.ref: check for call in planned if (check := check_call(call)) is not None}
    last = claimed_findings(planned)
    assert last is not None
    checked = 0
    for ref, quotes in cited_quotes(last.arguments).items():
        output = literal_output(scenario, calls[ref], _restarted_before(planned, calls[ref]))
        assert output != RUNNER_DOWN, f"{ref} ran on a target whose runner is down"
        if output == COMPUTED:
            continue
        for quote in quotes:
            assert collapsed(quote) in collapsed(output), (
                f"{ref} ({calls[ref].tool}) does not print {quote!r}"
            )
            assert MASK not in collapsed(quote)
            checked += 1
    assert checked >= 1


def _restarted_before(planned: list[PlannedCall], call: PlannedCall) -> set[str]:
    """The services of ``call``'s target a restart before it reached (its own check's included)."""
    return {
        str(c.arguments["service"]).removesuffix(".service")
        for c in planned
        if (c.tool == "service_restart" and c.target == call.target and c.turn < call.turn)
        or c.check_ref == call.ref
    }


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_the_reference_answers_every_turn_on_its_path(scenario: EvalScenario) -> None:
    """Each turn renders (its texts are format templates) and no rule takes over the happy path."""
    agent = host_internal(scenario)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for turn, planned in enumerate(agent.turns):
        reply = agent({"messages": messages})
        assert [c.name for c in reply.tool_calls] == [c["name"] for c in planned.get("tool_calls") or []], (
            turn
        )
        calls = [{"id": f"c{turn}-{n}", "function": {"name": c.name}} for n, c in enumerate(reply.tool_calls)]
        messages.append({"role": "assistant", "content": reply.text, "tool_calls": calls})
        messages.extend({"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in calls)
    assert reply.text and not reply.tool_calls, "the reference ends with an answer"


def test_the_simulated_dry_run_of_the_disk_scenario_is_the_old_rotations() -> None:
    disk = next(s for s in SCENARIOS if s.name == "disk-full-rotations")
    paths = dry_run(disk, "web-03", {"path": "/var/log/api", "older_than_days": 3})
    assert paths == [f"/var/log/api/api.log.{n}" for n in range(4, 10)]
    assert json.loads(plan(*paths))["files"][0]["path"] == "/var/log/api/api.log.4"
