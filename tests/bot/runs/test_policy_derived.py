"""A policy rule's ``derived:`` key (issue 36): ``deny`` refuses a derived call, ``{approvals: N}``
asks N in total, and without one a destructive call with a derived target, path or service asks
one approver more; typos are reported like every other key's; the card says where values came from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.provenance import ArgumentOrigin, Origin, Provenance
from agent.tooling import ToolCategory
from bot.errors import PolicyConfigError
from bot.policy.file import load_policy
from bot.policy.rules import Policy, Subject
from bot.runs.approvals import Approval
from bot.slack.rendering.approval_card import approval_blocks, derived_line

POLICY = """\
policy:
  rules:
    - name: no-derived-truncates
      match: {tools: [truncate_logs]}
      derived: deny
    - name: prod-destructive
      match: {labels: {env: prod}, categories: [destructive]}
      approve: {groups: [S_SRE_LEADS], requester_may_approve: false, approvals: 2}
      derived: {approvals: 3}
    - name: prod
      match: {labels: {env: prod}}
      approve: {groups: [S_SRE_LEADS]}
"""
PROD = (("env", "prod"),)


@pytest.fixture
def policy(tmp_path: Path) -> Policy:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return load_policy(path)


def subject(tool: str, category: ToolCategory, *, derived: bool, key: bool = True) -> Subject:
    return Subject(
        "U_ALICE", "C1", tool, category, "db-01", PROD, derived=derived, derived_key=derived and key
    )


def test_derived_deny_refuses_only_a_derived_call(policy: Policy) -> None:
    asked = policy.decide(subject("truncate_logs", ToolCategory.DESTRUCTIVE, derived=False))
    assert not asked.denied
    derived = policy.decide(subject("truncate_logs", ToolCategory.DESTRUCTIVE, derived=True))
    assert (
        derived.denied
        and "derived: deny" in derived.deny_reason
        and "no-derived-truncates" in derived.deny_reason
    )
    assert policy.offered("C1", "truncate_logs", ToolCategory.DESTRUCTIVE) is None  # still offered


def test_derived_approvals_and_the_default_one_more(policy: Policy) -> None:
    assert policy.decide(subject("rm", ToolCategory.DESTRUCTIVE, derived=False)).requirement.approvals == 2
    three = policy.decide(subject("rm", ToolCategory.DESTRUCTIVE, derived=True))
    assert (three.requirement.approvals, three.escalated, three.requirement.rule) == (
        3,
        True,
        "prod-destructive",
    )
    # No derived: key matches a mutating prod call: flagged only; a destructive one elsewhere: one more.
    assert policy.decide(subject("restart", ToolCategory.MUTATING, derived=True)).requirement.approvals == 1
    other = Subject(
        "U_ALICE", "C1", "rm", ToolCategory.DESTRUCTIVE, "dev-01", (), derived=True, derived_key=True
    )
    assert policy.decide(other).requirement.approvals == 2  # CHATOPS_APPROVERS' one, and one more
    only_other_values = Subject("U_ALICE", "C1", "rm", ToolCategory.DESTRUCTIVE, "dev-01", (), derived=True)
    assert policy.decide(only_other_values).requirement.approvals == 1
    # Without a policy file nothing more is asked (the card is flagged all the same).
    assert Policy().decide(other).requirement.approvals == 1


@pytest.mark.parametrize(
    ("derived", "problem"),
    [
        (
            "denied",
            "derived: must be 'deny' or a mapping {approvals: N}, not 'denied' (did you mean 'deny'?)",
        ),
        ("{aprovals: 3}", "derived: aprovals: unknown key (did you mean 'approvals'?)"),
        ("{approvals: 9}", "derived: approvals: Input should be less than or equal to 6"),
        ("[deny]", "derived: must be 'deny' or a mapping {approvals: N}"),
    ],
)
def test_a_wrong_derived_key_is_reported_clearly(tmp_path: Path, derived: str, problem: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(f"policy:\n  rules:\n    - name: r\n      derived: {derived}\n")
    with pytest.raises(PolicyConfigError) as raised:
        load_policy(path)
    assert raised.value.problems == [f"rule 'r' (line 3): {problem}"]
    path.write_text("policy:\n  rules:\n    - name: r\n      deny: true\n      derived: deny\n")
    with pytest.raises(PolicyConfigError, match="a deny rule has no 'request:', 'approve:' or 'derived:'"):
        load_policy(path)


def card(provenance: Provenance, **changes: Any) -> Approval:
    base: dict[str, Any] = {
        "id": "a" * 32,
        "run_id": "r" * 32,
        "call_id": "c1",
        "tool": "cleanup_old_logs",
        "args_json": json.dumps({"target": "db-01", "path": "/"}),
        "args_sha256": "0" * 64,
        "category": ToolCategory.DESTRUCTIVE,
        "requester": "U_ALICE",
        "created_at": 1.0,
        "expires_at": 1801.0,
        "provenance": provenance.to_json(),
    }
    return Approval.model_validate({**base, **changes})


def test_the_cards_first_line_names_the_derived_values_and_their_evidence() -> None:
    found = Provenance(
        (
            ArgumentOrigin("target", "db-01", Origin.DERIVED, ("E3",)),
            ArgumentOrigin("path", "/", Origin.DERIVED, ("E3", "E5")),
            ArgumentOrigin("reason", "disk", Origin.REQUESTED),
        )
    )
    policy = '{"rule":"r","users":[],"groups":[],"requester_may_approve":false,"approvals":3}'
    blocks = approval_blocks(card(found, policy=policy))
    first = blocks[0]["text"]["text"]
    assert first == (
        ":warning: Derived from tool output, not from anyone's request: `db-01`, `/` (from E3, E5) · needs 3 approvals"
    )
    assert derived_line(card(Provenance((ArgumentOrigin("path", "/", Origin.REQUESTED),)))) == ""
    assert derived_line(card(Provenance())) == ""


def test_a_hostile_value_on_the_first_line_stays_inert() -> None:
    hostile = "<!channel> *click* `x` <https://evil|ok>\u202e"
    found = Provenance((ArgumentOrigin("path", hostile, Origin.DERIVED, ()),))
    line = derived_line(card(found))
    assert "<!channel>" not in line and "<https://" not in line and "\u202e" not in line
    assert line.endswith("(in no tool output: the model's own or the opening message's)")
