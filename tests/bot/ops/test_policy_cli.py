"""``chatops policy check|explain`` and the doctor's policy line, through the real CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.errors import BotConfigurationError
from bot.ops.cli import build_parser
from bot.ops.doctor import Outcome, _check_policy
from bot.ops.policy_cli import run_cli
from bot.ops.worker import check_at_start
from bot.policy.rules import Requirement
from bot.settings import Settings
from bot.slack.handlers.runtime import WebRuntime
from tests.bot.slack.test_policy_e2e import example_policy


def main(argv: list[str]) -> int:
    """``chatops ARGV`` as the console script parses it, without its logging set-up (which would
    outlive this test's captured streams) and without reading a ``.env`` it was not given."""
    args = build_parser().parse_args(argv)
    return run_cli(args, Settings(_env_file=args.env_file))  # type: ignore[call-arg]


def test_the_documented_example_loads_and_check_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(example_policy())
    assert main(["policy", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{path}: OK, 5 rule(s)" in out and "staging-on-call: request+approve" in out


def test_explain_on_the_command_line_names_the_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(example_policy())
    argv = ["policy", "explain", "--file", str(path), "--user", "U_CAROL", "--tool", "delete_files"]
    assert (
        main([*argv, "--category", "destructive", "--channel", "C_RANDOM", "--member-of", "S_SRE_LEADS"]) == 0
    )
    out = capsys.readouterr().out
    assert "offered: no: rule 'no-deletes-from-random'" in out and "denied: yes" in out
    assert (
        main([*argv, "--category", "destructive", "--channel", "C_INCIDENT", "--member-of", "S_SRE_LEADS"])
        == 0
    )
    out = capsys.readouterr().out
    assert "approve: rule 'defaults'" in out  # no target: no label rule matches
    assert json.loads(Requirement().to_json())["approvals"] == 1


def test_doctor_reports_the_policy_file(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(example_policy())
    unsealed = Settings(_env_file=None, chatops_policy_file=path)  # type: ignore[call-arg]
    check = _check_policy(unsealed)  # the approvals' facts could not be sealed: a Redis writer picks them
    assert check.outcome is Outcome.FAIL and "needs CHATOPS_RUNNER_SECRET" in check.summary
    settings = unsealed.model_copy(update={"chatops_runner_secret": "s3cret-s3cret"})
    check = _check_policy(settings)
    assert check.outcome is Outcome.PASS and "5 rule(s); break-glass 30 min" in check.summary
    path.write_text("policy:\n  rules: [{name: x, deny: yes, approve: {}}]\n")
    check = _check_policy(settings)
    assert check.outcome is Outcome.FAIL and "rule 'x' (line 2): deny:" in check.summary


def test_explain_reads_the_targets_labels_from_the_inventory_and_the_category_from_the_registry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(example_policy())
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(
        "targets:\n  - {name: web-03, via: runner, labels: {env: prod}}\n"
        "  - {name: db-01, via: runner, labels: {env: prod}}\n"
    )
    env = tmp_path / "chatops.env"
    env.write_text(
        f"CHATOPS_POLICY_FILE={policy}\nCHATOPS_INVENTORY_FILE={inventory}\nCHATOPS_RUNNER_SECRET=s3cret-s3cret\n"
    )
    base = [
        "--env-file",
        str(env),
        "policy",
        "explain",
        "--tool",
        "service_restart",
        "--member-of",
        "S_SRE_LEADS",
    ]
    assert main([*base, "--user", "U_CAROL", "--target", "web-03", "--requester", "U_ALICE"]) == 0
    out = capsys.readouterr().out
    assert "call: service_restart (mutating) on web-03 [env=prod]" in out
    assert "approve: rule 'prod': S_SRE_LEADS; 1 distinct approval(s); requester may not approve" in out
    assert "U_CAROL may approve: yes" in out
    assert main([*base, "--user", "U_CAROL", "--target", "web-03", "--requester", "U_CAROL"]) == 0
    assert "U_CAROL may approve: no: Policy rule 'prod' needs an approver other than the requester" in (
        capsys.readouterr().out
    )
    assert main([*base, "--user", "U_CAROL", "--target", "db-01"]) == 0
    assert "denied: yes, by rule 'no-database-restarts': database restarts follow the DBA runbook" in (
        capsys.readouterr().out
    )
    # Break-glass, stated offline: what the example's incident commanders' click would do.
    glass = [
        *base[:-1],
        "S_INCIDENT_COMMANDERS",
        "--user",
        "U_BOB",
        "--target",
        "web-03",
        "--requester",
        "U_BOB",
    ]
    assert main(glass) == 0
    out = capsys.readouterr().out
    assert "U_BOB may approve: no" in out and "break-glass: U_BOB may declare it" in out
    assert main([*glass, "--break-glass"]) == 0
    out = capsys.readouterr().out
    assert "U_BOB may approve: yes" in out and "break-glass: U_BOB holds it until" in out  # own mutating
    assert main([*base, "--user", "U_CAROL", "--target", "web-03"]) == 0
    assert "break-glass: U_CAROL may not declare it" in capsys.readouterr().out
    assert main([*base, "--user", "U_CAROL", "--target", "web-99"]) == 1
    assert "no target 'web-99' in the inventory" in capsys.readouterr().err


def test_check_prints_every_mistake_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "policy:\n  rules:\n    - name: prod\n      match: {lables: {env: prod}}\n      deny: true\n"
    )
    assert main(["policy", "check", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}: rule 'prod' (line 3): match.lables: unknown key (did you mean 'labels'?)" in err


def test_a_worker_and_a_web_process_refuse_to_start_with_a_policy_file_but_no_runner_secret(
    tmp_path: Path,
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(example_policy())
    unsealed = Settings(_env_file=None, chatops_policy_file=path)  # type: ignore[call-arg]
    with pytest.raises(BotConfigurationError, match="CHATOPS_POLICY_FILE needs CHATOPS_RUNNER_SECRET"):
        check_at_start(unsealed)
    with pytest.raises(BotConfigurationError, match="CHATOPS_POLICY_FILE needs CHATOPS_RUNNER_SECRET"):
        WebRuntime(unsealed)
    check_at_start(unsealed.model_copy(update={"chatops_runner_secret": "s3cret-s3cret"}))
