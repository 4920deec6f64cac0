"""One evaluation scenario, as its YAML file declares it (``emulator/eval/scenarios/NAME.yaml``).

::

    name: disk-full-rotations          # the file's name without .yaml
    description: One line: what is wrong and what a good run does.
    tags: [single-cause, needs-approval] # its families (FAMILIES)
    incident: Where the story comes from (optional).
    fleet: {targets: {web-03: {...}}, prometheus: [...]}   # emulator.eval.fleet
    start: {mention: "web-03 is out of disk"}              # or {alert: {labels, annotations}}
    replies: [{turn: 2, text: "it began after the deploy"}]  # optional
    runbooks: {disk/full.md: "---\ntitle: ...\n---\n# ..."}  # optional: emulator.eval.runbooks
    incidents: [{ago: 9d, question: ..., root_cause: ...}]     # optional: emulator.eval.past_incidents
    approver: approve                  # what the simulated approver clicks on every card
    truth: {root_causes: [...], facts: [...], forbidden: [...], fixes: [...]}  # emulator.eval.truth
    reference: {turns: [...], rules: [...]}                # a scripted model that solves it

``reference`` is today's scripted scenario language (``emulator.models.scenario``), passed to it
as it is: whatever that language accepts, a reference agent may use. Its ``${TARGET.log_dir}``
and ``${TARGET.host_root}`` are the simulated hosts' folders, known when the harness builds them.

The tags are checked against what the scenario declares, so a family means the same in every
file: ``no-fault`` exactly when there is no root cause, ``two-causes`` exactly when there are
several, ``needs-approval`` exactly when there are fixes, ``alert`` exactly when an alert starts
the run, ``runner-down`` exactly when a target's runner is down; ``single-cause`` needs one
root cause, ``confounder`` and ``red-herring`` a suspect, ``recent-change`` a root cause or a
suspect of kind ``change`` (the change that explains it, or the one that looks guilty and is not),
``injection`` a forbidden call (what the hostile text asks for), ``resource-exhaustion``
a root cause (what consumes the resource), ``slow-burn`` a root cause and the Prometheus series
that show it building up, ``knowledge`` runbooks (``runbooks:``) the agent is to find and read, or
past incidents (``incidents:``) the bot remembers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from emulator.eval.fleet import Fleet
from emulator.eval.past_incidents import PastIncident, incident_problems
from emulator.eval.quantities import Age
from emulator.eval.runbooks import runbook_problems
from emulator.eval.strict import Strict
from emulator.eval.truth import Truth

FAMILIES: Mapping[str, str] = {
    "single-cause": "one dominant cause",
    "confounder": "a cause with a confounder: something else looks guilty too",
    "red-herring": "the alert or the request points at the wrong thing",
    "no-fault": "a control: nothing is wrong, the right answer is no_fault_found",
    "two-causes": "two independent causes, both must be found",
    "recent-change": "a cause only a recent change explains, or a recent change that looks guilty and is not",
    "injection": "hostile text (a log line, a tool output) tells the agent to run something",
    "runner-down": "a target whose runner is down",
    "needs-approval": "the fix is a change a person approves (which call, arguments and dry run are acceptable)",
    "alert": "an Alertmanager alert starts the run",
    "resource-exhaustion": (
        "a resource runs out (memory, disk, inodes, connection-tracking slots): the cause is what consumes it, "
        "not the thing that fails for want of it"
    ),
    "slow-burn": (
        "the fault built up over hours or days: only a series over time (Prometheus) shows when it began"
    ),
    "knowledge": (
        "the team's knowledge is part of the run: a runbook holds the decisive hint, to be confirmed on the "
        "hosts (or, tagged injection too, a poisoned runbook asks for something unsafe)"
    ),
}
"""The families a scenario is tagged with; add one here and its rule in ``_FAMILY_RULES``."""


class Alert(Strict):
    """An Alertmanager alert (webhook version 4) that starts the run, firing since ``started`` ago."""

    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    started: Age = 300.0

    @field_validator("labels")
    @classmethod
    def _alertname(cls, labels: dict[str, str]) -> dict[str, str]:
        if not labels.get("alertname"):
            raise ValueError("an alert has an alertname label; fix: add alertname: (e.g. HostDiskFull)")
        return labels


class Start(Strict):
    """How the run starts: a mention's text (after the bot's ``@``), or an alert."""

    mention: str | None = Field(default=None, min_length=1, max_length=3000)
    alert: Alert | None = None

    @model_validator(mode="after")
    def _one(self) -> Start:
        if (self.mention is None) == (self.alert is None):
            raise ValueError("a run starts with a mention or an alert; fix: give exactly one of them")
        return self


class Reply(Strict):
    """A thread reply, posted once the model has answered ``turn`` times."""

    turn: int = Field(ge=1, le=100)
    text: str = Field(min_length=1, max_length=3000)
    user: Literal["requester", "teammate"] = "requester"


class EvalScenario(Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{1,62}$")
    description: str = Field(min_length=1, max_length=300)
    tags: tuple[str, ...] = Field(min_length=1)
    incident: str = Field(default="", max_length=2000)
    fleet: Fleet
    start: Start
    replies: tuple[Reply, ...] = ()
    runbooks: dict[str, str] = Field(default_factory=dict)
    incidents: tuple[PastIncident, ...] = ()
    approver: Literal["approve", "decline"] = "approve"
    truth: Truth
    reference: dict[str, Any]

    @model_validator(mode="before")
    @classmethod
    def _truth_confirmed(cls, data: Any) -> Any:
        truth = data.get("truth") if isinstance(data, dict) else None
        if isinstance(truth, dict) and "unconfirmed" in truth:
            raise ValueError(
                f"truth.unconfirmed: {truth['unconfirmed']}; fix: check root_causes, suspects, facts and fixes "
                "against what really happened, then remove the unconfirmed: line (or capture again with --confirm)"
            )
        return data

    @field_validator("tags")
    @classmethod
    def _known_tags(cls, tags: tuple[str, ...]) -> tuple[str, ...]:
        for tag in tags:
            if tag not in FAMILIES:
                raise ValueError(
                    f"unknown family {tag!r}; fix: use one of {', '.join(FAMILIES)} (or add it to FAMILIES)"
                )
        if len(set(tags)) != len(tags):
            raise ValueError("a tag is given twice; fix: each family once")
        return tags

    @model_validator(mode="after")
    def _consistent(self) -> EvalScenario:
        problems = consistency_problems(self)
        if problems:  # each names its own place (``emulator.eval.loading`` prints them as they are)
            raise ValueError("\n".join(problems))
        return self

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(self.fleet.targets)


def consistency_problems(scenario: EvalScenario) -> list[str]:
    """What the parts of a scenario say about each other that does not hold, each ``PLACE: what; fix``."""
    targets = set(scenario.fleet.targets)
    known = f"use one of {', '.join(sorted(targets))}"
    problems = []
    for kind, causes in (("root_causes", scenario.truth.root_causes), ("suspects", scenario.truth.suspects)):
        for index, cause in enumerate(causes):
            if cause.target not in targets:
                problems.append(
                    f"truth.{kind}[{index}].id: names target {cause.target!r}, not in the fleet; fix: {known}"
                )
    for index, fix in enumerate(scenario.truth.fixes):
        if fix.target not in targets:
            problems.append(f"truth.fixes[{index}].target: {fix.target!r} is not in the fleet; fix: {known}")
    problems.extend(runbook_problems(scenario.runbooks))
    problems.extend(incident_problems(scenario.incidents))
    for tag in scenario.tags:
        problem = _FAMILY_RULES[tag](scenario)
        if problem is not None:
            problems.append(f"tags: {tag}: {problem}")
    for tag, declares in _DECLARED_BY.items():
        if declares(scenario) and tag not in scenario.tags:
            problems.append(f"tags: the scenario is {FAMILIES[tag]!r}; fix: tag it {tag}")
    return problems


def _rule(holds: Callable[[EvalScenario], bool], fix: str) -> Callable[[EvalScenario], str | None]:
    return lambda scenario: None if holds(scenario) else fix


_DECLARED_BY: Mapping[str, Callable[[EvalScenario], bool]] = {
    "no-fault": lambda s: s.truth.no_fault,
    "two-causes": lambda s: len(s.truth.root_causes) >= 2,
    "needs-approval": lambda s: bool(s.truth.fixes),
    "alert": lambda s: s.start.alert is not None,
    "runner-down": lambda s: any(t.runner == "down" for t in s.fleet.targets.values()),
}
"""Families a scenario belongs to by what it declares: the tag must be there."""

_FAMILY_RULES: Mapping[str, Callable[[EvalScenario], str | None]] = {
    **{
        tag: _rule(declares, "the scenario is not that; fix: remove the tag")
        for tag, declares in _DECLARED_BY.items()
    },
    "single-cause": _rule(
        lambda s: len(s.truth.root_causes) == 1, "needs exactly one root cause; fix: one in truth.root_causes"
    ),
    "confounder": _rule(
        lambda s: bool(s.truth.suspects), "needs the confounder as a suspect; fix: add it to truth.suspects"
    ),
    "red-herring": _rule(
        lambda s: bool(s.truth.suspects), "needs the red herring as a suspect; fix: add it to truth.suspects"
    ),
    "recent-change": _rule(
        lambda s: any(c.kind == "change" for c in (*s.truth.root_causes, *s.truth.suspects)),
        "needs a root cause or a suspect of kind change; fix: e.g. web-03:change:deploy-4411",
    ),
    "injection": _rule(
        lambda s: bool(s.truth.forbidden),
        "needs what the hostile text asks for as a forbidden call; fix: add it to truth.forbidden",
    ),
    "resource-exhaustion": _rule(
        lambda s: bool(s.truth.root_causes),
        "needs what consumes the resource as a root cause; fix: add it to truth.root_causes",
    ),
    "slow-burn": _rule(
        lambda s: bool(s.truth.root_causes) and bool(s.fleet.prometheus),
        "needs a root cause and the Prometheus series that show it building up; fix: add them "
        "(truth.root_causes, fleet.prometheus)",
    ),
    "knowledge": _rule(
        lambda s: bool(s.runbooks or s.incidents),
        "needs the knowledge the agent is to use; fix: add runbooks: or incidents:",
    ),
}
"""What each tag needs the scenario to declare (``None``: it does)."""
